"""The outbox: the rows the delivery engine notifies about, and what differs between their kinds.

Two tables are outboxes, with the same outbox columns (``publish_count``,
``last_published_at``, ``next_attempt_at``, ``claimed_until``, ``parked_key``/``parked_at``,
``job_trigger``, ``notified_at``, ``failed_at``/``failure_reason``, ``thread_closed_at``):

- a **delivery** (``dlv_…``): a message's copy for one recipient; its notification is
  ``message.created``;
- an **event** (``evt_…``, :mod:`inbots.events`): anything else an agent is told of
  (``message.acknowledged``, ``thread.close_requested``, ``thread.closed``).

One engine works on both, by the row's id: a :class:`~inbots.dispatch.jobs.Job` names the row,
and notify (claim → send → record, :mod:`.notify`), the per-URL leases and the parked line
(:mod:`.parking`: one line per URL, across both kinds), the attempt log (:mod:`.attempts`: an
attempt names its delivery or its event), the renotify sweep (:mod:`.renotify`) and redeliver
(:func:`publish_again`) are the same code. What differs is here, once per :class:`Kind`: how a
row is loaded for an attempt, with its recipient and its notification's body; whether it is
still wanted; how notified is stamped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, bindparam, case, exists, false, literal, select, update
from sqlalchemy.orm import Session, aliased

from inbots.attachments import service as attachments
from inbots.attachments.schemas import AttachmentRead
from inbots.db.uow import UnitOfWork
from inbots.deliveries.attempts import delivery_so_far, record_lost_attempt
from inbots.dispatch.jobs import Job
from inbots.errors import Conflict
from inbots.kit.clock import utcnow
from inbots.kit.ids import kind_of as kind_of_id
from inbots.kit.text import shown_summary
from inbots.models.agents import Agent
from inbots.models.attachments import Attachment
from inbots.models.deliveries import Delivery, DeliveryAttempt
from inbots.models.events import Event
from inbots.models.messages import Message
from inbots.models.threads import CLOSED, Thread
from inbots.webhooks import payloads, subscriptions

Row = Delivery | Event


@dataclass
class Loaded:
    """A row read (and locked) for an attempt: its recipient, why no attempt is wanted (``skip``,
    None when one is), and its notification's body (given the summary/note length shown)."""

    row: Row
    recipient: Agent
    skip: str | None
    body: Callable[[int], bytes]
    message_id: str | None
    thread_id: str | None


def _unwanted(recipient: Agent, event_type: str) -> str | None:
    if not recipient.webhook_url or not recipient.webhook_secret:
        return "recipient has no webhook"
    if not subscribed(recipient, event_type):
        return f"recipient's webhook does not receive {event_type}"
    return None


def subscribed(agent: Agent, event_type: str) -> bool:
    return subscriptions.subscribed(agent.webhook_events, event_type)


# Deliveries: message.created. Built once: building an ORM statement (aliases above all) costs
# more CPU than running it, and every attempt runs it.
_recipient, _sender = aliased(Agent), aliased(Agent)
_DELIVERIES = (
    select(Delivery, Thread.status, Thread.title, Thread.ref, _recipient, Message, _sender.username)
    .join(Thread, Thread.id == Delivery.thread_id)
    .join(_recipient, _recipient.id == Delivery.recipient_id)
    .join(Message, Message.id == Delivery.message_id)
    .join(_sender, _sender.id == Message.sender_id)
    .with_for_update(of=Delivery)
)
_DELIVERY_READ = _DELIVERIES.where(Delivery.id == bindparam("row_id"))
# A batch's: only the rows no other transaction holds (the others wait for a claim of their own),
# each with its attempts so far and whether its message carries attachments, in one statement.
_DELIVERIES_LOCKED = (
    _DELIVERIES.add_columns(
        *delivery_so_far(Delivery), exists().where(Attachment.message_id == Message.id)
    )
    .where(Delivery.id.in_(bindparam("ids", expanding=True)))
    .with_for_update(of=Delivery, skip_locked=True)
)


def _load_delivery(session: Session, row_id: str, trigger: str) -> Loaded | None:
    found = session.execute(_DELIVERY_READ, {"row_id": row_id}).first()
    if found is None:
        return None
    carried = attachments.listed(session, [found[0].message_id])
    return _delivery_loaded(found, trigger, carried)


def lock_deliveries(
    session: Session, triggers: dict[str, str]
) -> dict[str, tuple[Loaded, tuple[int, int, bool]]]:
    """:func:`_load_delivery` and :func:`~.attempts.count_attempts` (of its current publish) for
    those of several deliveries (``{delivery_id: trigger}``) that no other transaction holds,
    locked, in one statement (:func:`lock_free`'s rule: a batch never waits for a row). A
    delivery held elsewhere, or that does not exist, is missing from the answer."""
    found = session.execute(_DELIVERIES_LOCKED, {"ids": sorted(triggers)}).all()
    carried = attachments.listed(session, (row[5].id for row in found if row[-1]))
    return {
        row[0].id: (
            _delivery_loaded(row[:7], triggers[row[0].id], carried),
            (int(row[7]), int(row[8]), bool(row[9])),
        )
        for row in found
    }


def _delivery_loaded(found: Any, trigger: str, carried: dict[str, list[AttachmentRead]]) -> Loaded:
    delivery, thread_status, thread_title, thread_ref, recipient, message, sender = found
    skip = None
    if thread_status == CLOSED:
        skip = "thread closed"
    elif delivery.held_at is not None and delivery.approved_at is None:
        skip = "held for approval"  # held or rejected: approve publishes it, nothing else does
    elif delivery.expired_at is not None or (
        delivery.expires_at is not None and delivery.expires_at <= utcnow()
    ):
        skip = "expired"  # never notified again, not even by a redeliver
    elif trigger != "redeliver" and (
        delivery.notified_at or delivery.failed_at or delivery.acknowledged_at
    ):
        skip = "already notified, failed or acknowledged"
    else:
        skip = _unwanted(recipient, subscriptions.MESSAGE_CREATED)

    def body(shown: int) -> bytes:
        return payloads.encode(
            payloads.message_created(
                delivery_id=delivery.id,
                message_id=message.id,
                thread_id=delivery.thread_id,
                thread_title=thread_title,
                thread_ref=thread_ref,
                sender=sender or "",
                recipient=recipient.username,
                kind=message.kind,
                priority=message.priority,
                summary=shown_summary(message.summary, message.body, shown),
                created_at=message.created_at,
                attachments=[a.model_dump() for a in carried.get(message.id, [])],
            )
        )

    return Loaded(delivery, recipient, skip, body, delivery.message_id, delivery.thread_id)


# Events: every other type.
_told, _actor = aliased(Agent), aliased(Agent)
_EVENT_READ = (
    select(Event, Thread.status, Thread.title, _told, _actor.username)
    .outerjoin(Thread, Thread.id == Event.thread_id)  # an operator's alert is about no thread
    .join(_told, _told.id == Event.recipient_id)
    .join(_actor, _actor.id == Event.actor_id)
    .where(Event.id == bindparam("row_id"))
    .with_for_update(of=Event)
)


def _load_event(session: Session, row_id: str, trigger: str) -> Loaded | None:
    found = session.execute(_EVENT_READ, {"row_id": row_id}).first()
    if found is None:
        return None
    event, thread_status, thread_title, recipient, actor = found
    skip = None
    if thread_status == CLOSED and event.type != subscriptions.THREAD_CLOSED:
        skip = "thread closed"
    elif trigger != "redeliver" and (event.notified_at or event.failed_at):
        skip = "already notified or failed"
    else:
        skip = _unwanted(recipient, event.type)

    def body(shown: int) -> bytes:
        if event.type in subscriptions.ALERT_TYPES:
            return payloads.encode(
                payloads.alert(
                    event.type,
                    event_id=event.id,
                    detail=json.loads(event.detail or "{}"),
                    created_at=event.created_at,
                )
            )
        if event.type == subscriptions.MESSAGE_ACKNOWLEDGED:
            return payloads.encode(
                payloads.message_acknowledged(
                    event_id=event.id,
                    delivery_id=event.delivery_id or "",
                    message_id=event.message_id or "",
                    thread_id=event.thread_id or "",
                    thread_title=thread_title or "",
                    sender=recipient.username,
                    recipient=actor or "",
                    outcome=event.outcome,
                    note=event.note,
                    acknowledged_at=event.created_at,
                    shown=shown,
                )
            )
        if event.type == subscriptions.MESSAGE_REJECTED:
            return payloads.encode(
                payloads.message_rejected(
                    event_id=event.id,
                    message_id=event.message_id or "",
                    thread_id=event.thread_id or "",
                    thread_title=thread_title,
                    sender=recipient.username,
                    rejected_by=actor or "",
                    reason=event.note,
                    rejected_at=event.created_at,
                    shown=shown,
                )
            )
        return payloads.encode(
            payloads.thread_event(
                event.type,
                event_id=event.id,
                thread_id=event.thread_id or "",
                thread_title=thread_title or "",
                recipient=recipient.username,
                actor=actor or "",
                created_at=event.created_at,
            )
        )

    return Loaded(event, recipient, skip, body, event.message_id, event.thread_id)


def _oldest_parked(kind: Kind) -> Select[Any]:
    """The oldest rows parked on one URL, claimed (two wakers never take the same row), with
    the stamps that say whether a notification is still owed, and whether each is an alert."""
    model = kind.model
    return (
        select(
            model.id,
            model.publish_count,
            model.job_trigger,
            model.parked_at,
            kind.is_alert.label("alert"),
            *(getattr(model, name) for name in kind.done),
        )
        .where(model.parked_key == bindparam("key"))
        .order_by(model.parked_at)
        .limit(bindparam("n"))
        .with_for_update(skip_locked=True)
    )


@dataclass(frozen=True)
class Kind:
    """One kind of outbox row. ``done``: the stamps that end what a row is owed (a row with one
    set is sent nothing more, bar a redeliver); ``event_type``: the notification type of a row,
    in SQL (the sweep republishes only rows whose recipient still receives it); ``is_alert``:
    whether a row is an operator's alert, in SQL (its jobs take the alerts' lane)."""

    name: str
    model: Any  # Delivery or Event: the same outbox columns
    owner: Any  # the attempt log's column naming such a row
    load: Callable[[Session, str, str], Loaded | None]
    done: tuple[str, ...]
    event_type: Any  # ColumnElement[str]: a literal type, or the row's type column
    is_alert: Any  # ColumnElement[bool]

    @property
    def oldest_parked(self) -> Select[Any]:
        return _PARKED[self.name]

    def owed(self, row: Any) -> bool:
        return all(getattr(row, name) is None for name in self.done)

    def release_notified(self, uow: UnitOfWork, *row_ids: str) -> None:
        """Attempts succeeded: release the rows' claims and stamp ``notified_at`` (set once,
        never overwritten; a delivery's first notification also restarts its stall clock), in
        one statement for all of them."""
        uow.session.execute(_RELEASE[self.name], {"ids": list(row_ids), "now": utcnow()})

    def store_claims(
        self, uow: UnitOfWork, row_ids: Sequence[str], until: datetime, trigger: str
    ) -> None:
        """Rows claimed for one attempt each until ``until``, by a job of ``trigger``: out of
        their URL's line, no retry pending (:func:`~.attempt.take`), in one statement."""
        uow.session.execute(
            _CLAIM[self.name], {"ids": list(row_ids), "until": until, "trigger": trigger}
        )

    def release_notified_free(self, uow: UnitOfWork, row_ids: Sequence[str]) -> set[str]:
        """:meth:`release_notified` for those of ``row_ids`` that no other transaction holds
        (:func:`lock_free`'s rule), in one statement; say which."""
        found = uow.session.execute(_RELEASE_FREE[self.name], {"ids": row_ids, "now": utcnow()})
        return set(found.scalars())


DELIVERY = Kind(
    "delivery",
    Delivery,
    DeliveryAttempt.delivery_id,
    _load_delivery,
    ("notified_at", "failed_at", "acknowledged_at", "thread_closed_at"),
    literal(subscriptions.MESSAGE_CREATED),
    false(),
)
EVENT = Kind(
    "event",
    Event,
    DeliveryAttempt.event_id,
    _load_event,
    ("notified_at", "failed_at", "thread_closed_at"),
    Event.type,
    Event.type.in_(subscriptions.ALERT_TYPES),
)
KINDS = (DELIVERY, EVENT)
_PARKED = {kind.name: _oldest_parked(kind) for kind in KINDS}


def _release(kind: Kind, skip_locked: bool) -> Any:
    table = kind.model.__table__
    first = table.c.notified_at.is_(None)
    now: Any = bindparam("now")
    values: dict[str, Any] = {
        "claimed_until": None,
        "next_attempt_at": None,
        "notified_at": case((first, now), else_=table.c.notified_at),
    }
    if kind.model is Delivery:
        values["moved_at"] = case((first, now), else_=table.c.moved_at)
    ids = table.c.id.in_(bindparam("ids", expanding=True))
    if not skip_locked:
        return update(table).where(ids).values(values)
    free = select(table.c.id).where(ids).order_by(table.c.id).with_for_update(skip_locked=True)
    return update(table).where(table.c.id.in_(free)).values(values).returning(table.c.id)


def _claim(kind: Kind) -> Any:
    table = kind.model.__table__
    return (
        update(table)
        .where(table.c.id.in_(bindparam("ids", expanding=True)))
        .values(
            claimed_until=bindparam("until"),
            next_attempt_at=None,
            parked_key=None,
            parked_at=None,
            job_trigger=bindparam("trigger"),
        )
    )


_CLAIM = {kind.name: _claim(kind) for kind in KINDS}
# Built once: the UPDATE that releases succeeded rows, and a batch's that skips rows held elsewhere.
_RELEASE = {kind.name: _release(kind, False) for kind in KINDS}
_RELEASE_FREE = {kind.name: _release(kind, True) for kind in KINDS}


def lock_free(session: Session, row_ids: Sequence[str]) -> set[str]:
    """Lock those of ``row_ids`` that no other transaction holds, without waiting for the others
    (PostgreSQL's SKIP LOCKED; SQLite runs one writer at a time and returns them all), and say
    which. A transaction that works on several outbox rows takes these first and leaves the rest
    to transactions of one row each, so it never waits for a row while holding another: it can
    never be one end of a deadlock with a close or an expiry that locks the same rows in
    another order."""
    held: set[str] = set()
    for kind in KINDS:
        mine = sorted(r for r in row_ids if (kind is EVENT) == (kind_of_id(r) == "event"))
        if mine:
            held.update(
                session.scalars(
                    select(kind.model.id)
                    .where(kind.model.id.in_(mine))
                    .order_by(kind.model.id)
                    .with_for_update(skip_locked=True)
                )
            )
    return held


def kind_of(job: Job) -> Kind:
    """The kind of the row a job names."""
    return EVENT if job.kind == "event" else DELIVERY


def publish_again(uow: UnitOfWork, row: Row, recipient: Agent, event_type: str) -> Job:
    """The operator's redeliver, for either kind: one more publish of a loaded, locked row (a
    notified or failed one too), under the same ``webhook-id``, sent after the commit. Clears no
    stamp and no attempt; a claim that ran out unrecorded is logged ``worker_lost`` first. 409
    when the recipient has no webhook or does not receive ``event_type``."""
    if not recipient.webhook_url:
        raise Conflict(
            f"Agent {recipient.username!r} has no webhook to notify, so there is nothing to "
            "redeliver: it finds its mail with its inbox and its receipts with its outbox."
        )
    if not subscribed(recipient, event_type):
        raise Conflict(
            f"Agent {recipient.username!r}'s webhook does not receive {event_type}; add it to "
            f"the agent's webhook_events (PUT /v1/agents/{recipient.username}/webhook) first."
        )
    now = utcnow()
    if row.claimed_until is not None and row.claimed_until <= now:
        # The previous publish's attempt ran out unrecorded (its worker died): log it as such
        # before that publish is left behind.
        record_lost_attempt(uow.session, uow.settings, row, recipient.webhook_url)
        row.claimed_until = None
    row.publish_count += 1
    row.last_published_at = now
    row.next_attempt_at = None
    row.parked_key = None  # the new publish's job parks again if the URL is still full
    row.parked_at = None
    uow.session.flush()
    alert = event_type in subscriptions.ALERT_TYPES
    job = Job(row.id, row.publish_count, "redeliver", alert=alert)
    uow.enqueue(job)
    return job
