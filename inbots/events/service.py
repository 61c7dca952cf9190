"""Events: made where they happen (an acknowledgement, a close request, a close), shown to a
sender's long-poll (receipts), and the operator's view of them with redeliver.

An event is one row per agent told, in the same transaction as what it reports, and it is an
outbox row like a delivery (:mod:`inbots.deliveries.outbox`): a row whose agent's webhook receives
its type is published at once (``publish_count`` 1, sent after the commit); the renotify sweep is
the safety net, and the operator can redeliver it. Rows are made only for agents that will be
told: every ``message.acknowledged`` (the sender's long-poll shows it, webhook or not), and a
thread event only for participants whose webhook receives it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, TextClause, and_, insert, or_, select, text, update

from inbots.agents.models import Agent
from inbots.auth.service import Caller
from inbots.db.uow import UnitOfWork, mostly_reads, reads
from inbots.deliveries.models import Delivery, DeliveryAttempt
from inbots.deliveries.outbox import publish_again
from inbots.deliveries.receipts import receipt_fields
from inbots.deliveries.schemas import AttemptRead, ReceiptEvent
from inbots.dispatch.jobs import Job
from inbots.errors import Invalid, not_found
from inbots.events.models import RECEIPT_TYPES_SQL, Event
from inbots.events.schemas import EVENT_STATES, EventDetail, EventPage, EventRead
from inbots.kit.clock import utcnow
from inbots.kit.ids import new_id
from inbots.kit.paging import clamp_limit, decode_cursor, encode_cursor
from inbots.threads.models import Participant, Thread
from inbots.webhooks import subscriptions
from inbots.webhooks.subscriptions import (
    ALERT_TYPES,
    EVENT_TYPES,
    MESSAGE_ACKNOWLEDGED,
    MESSAGE_CREATED,
    MESSAGE_REJECTED,
)
from inbots.webhooks.wanted import wants

# message.created is a delivery; the operator's alerts (inbots.alerts) are events too.
TYPES = (*(t for t in EVENT_TYPES if t != MESSAGE_CREATED), *ALERT_TYPES)


def pushes(agent: Any, event_type: str) -> bool:
    """Whether ``agent`` (a row with ``status``, ``webhook_url`` and ``webhook_events``) is
    pushed notifications of ``event_type`` now."""
    return (
        agent.status == "active"
        and bool(agent.webhook_url)
        and subscriptions.subscribed(agent.webhook_events, event_type)
    )


def _insert(uow: UnitOfWork, rows: list[dict[str, Any]]) -> None:
    """Store events (one INSERT, however many: NULLs are sent as NULL, see
    ``inbots.messages.service._deliver``) and publish those with a push after the commit."""
    if not rows:
        return
    uow.session.execute(insert(Event).execution_options(render_nulls=True), rows)
    uow.enqueue(*[Job(row["id"], 1, "publish") for row in rows if row["publish_count"]])


def _row(
    *,
    workspace_id: str,
    event_type: str,
    recipient_id: str,
    actor_id: str,
    thread_id: str,
    push: bool,
    now: datetime,
    message_id: str | None = None,
    delivery_id: str | None = None,
    outcome: str | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    return {
        "id": new_id("evt"),
        "workspace_id": workspace_id,
        "type": event_type,
        "recipient_id": recipient_id,
        "actor_id": actor_id,
        "thread_id": thread_id,
        "message_id": message_id,
        "delivery_id": delivery_id,
        "outcome": outcome,
        "note": note,
        "created_at": now,
        "publish_count": 1 if push else 0,
        "last_published_at": now if push else None,
    }


@dataclass(frozen=True)
class Acknowledged:
    """A delivery acknowledged just now, and whether its message's sender is pushed
    ``message.acknowledged`` (:func:`pushes`)."""

    delivery_id: str
    message_id: str
    thread_id: str
    workspace_id: str
    recipient_id: str
    sender_id: str
    push: bool


def record_acknowledged(
    uow: UnitOfWork,
    acknowledged: Sequence[Acknowledged],
    outcome: str | None,
    note: str | None,
    now: datetime,
) -> None:
    """One ``message.acknowledged`` event per delivery acknowledged now, for its message's
    sender; wakes the senders' long-polls after the commit. One statement however many."""
    _insert(
        uow,
        [
            _row(
                workspace_id=a.workspace_id,
                event_type=MESSAGE_ACKNOWLEDGED,
                recipient_id=a.sender_id,
                actor_id=a.recipient_id,
                thread_id=a.thread_id,
                message_id=a.message_id,
                delivery_id=a.delivery_id,
                outcome=outcome,
                note=note,
                push=a.push,
                now=now,
            )
            for a in acknowledged
        ],
    )
    uow.wake({a.sender_id for a in acknowledged})


def record_rejected(
    uow: UnitOfWork,
    *,
    workspace_id: str,
    message_id: str,
    thread_id: str,
    sender: Any,
    actor_id: str,
    reason: str | None,
    now: datetime,
) -> None:
    """One ``message.rejected`` event for the sender of a held message the operator rejected
    (``sender``: its agent row); the reason is the event's note. Made whether or not its webhook
    receives the type (the operator's events list shows it), pushed only if it does."""
    _insert(
        uow,
        [
            _row(
                workspace_id=workspace_id,
                event_type=MESSAGE_REJECTED,
                recipient_id=sender.id,
                actor_id=actor_id,
                thread_id=thread_id,
                message_id=message_id,
                note=reason,
                push=pushes(sender, MESSAGE_REJECTED),
                now=now,
            )
        ],
    )
    uow.wake([sender.id])


def record_thread_event(
    uow: UnitOfWork, thread: Thread, event_type: str, actor_id: str, now: datetime
) -> None:
    """``thread.close_requested`` or ``thread.closed``: one event for each other participant
    whose webhook receives it (nobody else would ever be told)."""
    told = uow.session.execute(
        select(Agent.id, Agent.status, Agent.webhook_url, Agent.webhook_events)
        .join(Participant, Participant.agent_id == Agent.id)
        .where(
            Participant.thread_id == thread.id,
            Agent.id != actor_id,
            Agent.status == "active",
            Agent.webhook_url.is_not(None),
            wants(Agent.webhook_events, event_type),
        )
    ).all()
    _insert(
        uow,
        [
            _row(
                workspace_id=thread.workspace_id,
                event_type=event_type,
                recipient_id=agent.id,
                actor_id=actor_id,
                thread_id=thread.id,
                push=pushes(agent, event_type),
                now=now,
            )
            for agent in told
        ],
    )


def thread_closed(uow: UnitOfWork, thread_id: str, now: datetime) -> None:
    """The thread is closing: its events still owed a push are no longer (as its deliveries),
    and they leave the long-poll's and the sweep's indexes."""
    uow.session.execute(
        update(Event)
        .where(Event.thread_id == thread_id, Event.thread_closed_at.is_(None))
        .values(thread_closed_at=now)
        .execution_options(synchronize_session=False)
    )


# The sender's long-poll.


def _unshown(caller: Caller) -> list[ColumnElement[bool] | TextClause]:
    """Receipts the caller has not been shown: acknowledgements of its messages and rejections
    of its held ones (matches ``ix_events_unshown``; the type test is the index's own text, so
    the planners can match the partial index's predicate)."""
    return [
        Event.recipient_id == caller.agent_id,
        text(f"events.{RECEIPT_TYPES_SQL}"),
        Event.shown_at.is_(None),
        Event.thread_closed_at.is_(None),
    ]


@reads
def has_unshown_receipts(uow: UnitOfWork, caller: Caller) -> bool:
    """Whether a recipient acknowledged one of the caller's messages, or the operator rejected
    one, since it was last shown receipts (the long-poll's trigger with ``events=receipts``)."""
    found = uow.session.scalar(select(Event.id).where(*_unshown(caller)).limit(1))
    return found is not None


@mostly_reads
def show_receipts(uow: UnitOfWork, caller: Caller) -> list[ReceiptEvent]:
    """The receipts of the caller's messages it has not been shown, oldest first (at most a
    listing's default of events), each with the delivery's current state; stamps them shown.
    An acknowledgement is its delivery's receipt; a rejection (one event for the message) is
    the receipt of each of the message's deliveries, ``rejected`` with the operator's reason."""
    events = uow.session.scalars(
        select(Event).where(*_unshown(caller)).order_by(Event.id).limit(uow.settings.list_default)
    ).all()
    if not events:
        return []
    uow.session.execute(
        update(Event)
        .where(Event.id.in_([event.id for event in events]), Event.shown_at.is_(None))
        .values(shown_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    by_delivery = [e.delivery_id for e in events if e.delivery_id]
    by_message = [e.message_id for e in events if not e.delivery_id and e.message_id]
    found = uow.session.execute(
        select(Delivery, Agent.username)
        .join(Agent, Agent.id == Delivery.recipient_id)
        .where(Delivery.id.in_(by_delivery) | Delivery.message_id.in_(by_message))
        .order_by(Delivery.id)
    ).all()
    of_delivery = {delivery.id: (delivery, name) for delivery, name in found}
    of_message: dict[str, list[tuple[Delivery, str]]] = {}
    for delivery, name in found:
        of_message.setdefault(delivery.message_id, []).append((delivery, name))
    receipts: list[ReceiptEvent] = []
    for event in events:
        if event.delivery_id:
            told = [of_delivery[event.delivery_id]] if event.delivery_id in of_delivery else []
        else:
            told = of_message.get(event.message_id or "", [])
        receipts.extend(
            ReceiptEvent(
                **receipt_fields(delivery, name),
                event_id=event.id,
                message_id=event.message_id or delivery.message_id,
                thread_id=event.thread_id,
            )
            for delivery, name in told
        )
    return receipts


# The operator's view.


def event_state(event: Event) -> str:
    """``notified`` or ``failed`` (whichever happened last), else ``pending`` while a push is
    owed, else ``unsent`` (no push was wanted)."""
    if event.notified_at and (not event.failed_at or event.notified_at > event.failed_at):
        return "notified"
    if event.failed_at:
        return "failed"
    return "pending" if event.publish_count > 0 else "unsent"


def _state_filter(state: str) -> ColumnElement[bool]:
    notified, failed = Event.notified_at, Event.failed_at
    return {
        "notified": and_(notified.is_not(None), or_(failed.is_(None), notified > failed)),
        "failed": and_(failed.is_not(None), or_(notified.is_(None), failed >= notified)),
        "pending": and_(notified.is_(None), failed.is_(None), Event.publish_count > 0),
        "unsent": and_(notified.is_(None), failed.is_(None), Event.publish_count == 0),
    }[state]


def _reads(uow: UnitOfWork, events: Sequence[Event]) -> list[EventRead]:
    ids = {e.recipient_id for e in events} | {e.actor_id for e in events}
    names = dict(
        uow.session.execute(select(Agent.id, Agent.username).where(Agent.id.in_(ids))).all()
    )
    return [
        EventRead(
            id=e.id,
            type=e.type,
            recipient=names.get(e.recipient_id, ""),
            actor=names.get(e.actor_id, ""),
            thread_id=e.thread_id,
            message_id=e.message_id,
            delivery_id=e.delivery_id,
            outcome=e.outcome,
            note=e.note,
            created_at=e.created_at,
            shown_at=e.shown_at,
            state=event_state(e),
            notified_at=e.notified_at,
            failed_at=e.failed_at,
            failure_reason=e.failure_reason,
            publish_count=e.publish_count,
            last_published_at=e.last_published_at,
            next_attempt_at=e.next_attempt_at,
            alert=json.loads(e.detail) if e.detail else None,
        )
        for e in events
    ]


@reads
def list_events(
    uow: UnitOfWork,
    caller: Caller,
    *,
    type: str | None = None,
    state: str | None = None,
    agent: str | None = None,
    thread: str | None = None,
    limit: object = None,
    cursor: str | None = None,
) -> EventPage:
    """The operator's events, newest first, filtered by type, push state, the agent told or the
    thread."""
    caller.require_operator()
    s = uow.settings
    if type and type not in TYPES:
        raise Invalid(
            f"type must be one of {', '.join(TYPES)} (message.created notifications are "
            "deliveries: GET /v1/deliveries).",
            field="type",
        )
    if state and state not in EVENT_STATES:
        raise Invalid(f"state must be one of {', '.join(EVENT_STATES)}.", field="state")
    count = clamp_limit(limit, s.list_default, s.list_max)
    after = decode_cursor(cursor)
    where: list[Any] = [Event.workspace_id == caller.workspace_id]
    if type:
        where.append(Event.type == type)
    if state:
        where.append(_state_filter(state))
    if agent:
        told = select(Agent.id).where(
            Agent.workspace_id == caller.workspace_id,
            (Agent.id == agent) | (Agent.username == agent),
        )
        where.append(Event.recipient_id.in_(told.scalar_subquery()))
    if thread:
        where.append(Event.thread_id == thread)
    if after:
        where.append(Event.id < after)
    rows = uow.session.scalars(
        select(Event).where(*where).order_by(Event.id.desc()).limit(count + 1)
    ).all()
    page = list(rows[:count])
    next_cursor = encode_cursor(page[-1].id) if len(rows) > count else None
    return EventPage(items=_reads(uow, page), next_cursor=next_cursor)


def _event(uow: UnitOfWork, caller: Caller, event_id: str, *, lock: bool = False) -> Event:
    stmt = select(Event).where(Event.id == event_id, Event.workspace_id == caller.workspace_id)
    event = uow.session.scalars(stmt.with_for_update() if lock else stmt).first()
    if event is None:
        raise not_found("event", event_id)
    return event


@reads
def get_event(uow: UnitOfWork, caller: Caller, event_id: str) -> EventDetail:
    """One event with its attempt log (operator)."""
    caller.require_operator()
    event = _event(uow, caller, event_id)
    attempts = uow.session.scalars(
        select(DeliveryAttempt)
        .where(DeliveryAttempt.event_id == event.id)
        .order_by(DeliveryAttempt.number)
    ).all()
    return EventDetail(
        **_reads(uow, [event])[0].model_dump(),
        attempts=[AttemptRead.model_validate(a) for a in attempts],
    )


def redeliver_event(uow: UnitOfWork, caller: Caller, event_id: str) -> EventRead:
    """Publish the event's notification again (a failed or notified one too): a fresh set of
    attempts under the same ``webhook-id`` (the event id). Adds a publish; clears nothing."""
    caller.require_operator()
    event = _event(uow, caller, event_id, lock=True)
    recipient = uow.session.get_one(Agent, event.recipient_id)
    publish_again(uow, event, recipient, event.type)
    return _reads(uow, [event])[0]
