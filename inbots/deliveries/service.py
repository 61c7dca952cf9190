"""The recipient's side of deliveries: its inbox (listing stamps what it shows), reading stamps,
the working heartbeat and acknowledgements. The operator's console of every delivery is
:mod:`.console`."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from types import SimpleNamespace
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, Select, and_, bindparam, func, or_, select, update

from inbots.attachments import service as attachments
from inbots.caller import Caller
from inbots.db.uow import UnitOfWork, mostly_reads, reads
from inbots.deliveries import tallies
from inbots.deliveries.schemas import (
    INBOX_STATUSES,
    OUTCOMES,
    AckRequest,
    AckResult,
    DeliveryRead,
    Inbox,
    InboxItem,
    ReplyAcknowledged,
    WorkingRequest,
    WorkingResult,
)
from inbots.deliveries.stamps import opened, shown
from inbots.deliveries.state import STATE_STAMPS, state_of
from inbots.errors import AlreadyAcknowledged, Expired, Invalid, not_found
from inbots.events import service as events
from inbots.kit.clock import rfc3339, time_field, utcnow
from inbots.kit.cursor import INBOX, InboxPlace
from inbots.kit.ids import kind_of
from inbots.kit.text import shown_summary
from inbots.models.agents import Agent
from inbots.models.deliveries import Delivery
from inbots.models.messages import PRIORITIES, Message, priority_rank
from inbots.models.threads import CLOSED, Thread
from inbots.webhooks import subscriptions


def to_read(delivery: Delivery, recipient: str) -> DeliveryRead:
    return DeliveryRead(
        id=delivery.id,
        message_id=delivery.message_id,
        thread_id=delivery.thread_id,
        recipient=recipient,
        state=state_of(delivery),
        accepted_at=delivery.accepted_at,
        notified_at=delivery.notified_at,
        delivered_at=delivery.delivered_at,
        fetched_at=delivery.fetched_at,
        working_at=delivery.working_at,
        working_note=delivery.working_note,
        acknowledged_at=delivery.acknowledged_at,
        failed_at=delivery.failed_at,
        failure_reason=delivery.failure_reason,
        stalled_at=delivery.stalled_at,
        expired_at=delivery.expired_at,
        publish_count=delivery.publish_count,
        last_published_at=delivery.last_published_at,
        next_attempt_at=delivery.next_attempt_at,
        outcome=delivery.outcome,
        note=delivery.note,
        held_at=delivery.held_at,
        approved_at=delivery.approved_at,
        rejected_at=delivery.rejected_at,
        rejection_reason=delivery.rejection_reason,
    )


# What an inbox listing reads of each delivery: no more than its item and its state need (the
# whole ORM row costs about twice as much to load, per item).
_LISTED = (
    Delivery.id,
    Delivery.message_id,
    Delivery.thread_id,
    Delivery.priority_rank,
    *(getattr(Delivery, name) for name in STATE_STAMPS),
)


# The inbox's statements are built once per shape (which filters a listing uses, and its page
# size) and run with this listing's values: building a SELECT costs more than running it.
_WAITING_COUNT = (  # an index-only scan of ix_deliveries_inbox on PostgreSQL
    select(func.count())
    .select_from(Delivery)
    .where(Delivery.recipient_id == bindparam("recipient"), *Delivery.waiting())
)
_HAS_UNSHOWN = (
    select(Delivery.id)
    .where(
        Delivery.recipient_id == bindparam("recipient"),
        *Delivery.waiting(),
        Delivery.delivered_at.is_(None),
    )
    .limit(1)
)


class _Shape(NamedTuple):
    """Which filters an inbox listing uses (their values are bound when it runs)."""

    acked: bool | None  # None: both halves (status=all)
    priority: bool
    since: str | None  # "delivery" (after a delivery id) or "time" (accepted after), or None
    bodies: bool


def _inbox_filters(
    status: str | None, priority: str | None, since: str | None, include: str | None
) -> tuple[_Shape, dict[str, object]]:
    """An inbox listing's filters: their shape and their values."""
    values: dict[str, object] = {}
    status = status or "unacked"
    if status not in INBOX_STATUSES:
        raise Invalid(
            "status must be unacked (the default: mail still to do), acked (mail you "
            "acknowledged) or all.",
            field="status",
        )
    if priority:
        if priority not in PRIORITIES:
            raise Invalid(
                "priority must be urgent (only urgent mail) or normal; leave it out for both.",
                field="priority",
            )
        values["rank"] = priority_rank(priority)
    since_kind = None
    if since:
        if kind_of(since) == "delivery":
            since_kind, values["since"] = "delivery", since
        else:
            takes = (
                "must be a delivery id (dlv_…, from an earlier inbox answer) or an RFC 3339 time "
                "with its zone, such as 2026-11-29T18:10:00Z"
            )
            since_kind, values["since"] = "time", time_field(since, "since", takes)
    bodies = False
    for part in (include or "").split(","):
        if part.strip() == "body":
            bodies = True
        elif part.strip():
            raise Invalid(
                "include takes body (include=body): each item then carries the message's body.",
                field="include",
            )
    acked = {"unacked": False, "acked": True}.get(status)
    return _Shape(acked, bool(priority), since_kind, bodies), values


@functools.lru_cache(maxsize=256)
def _listing(
    shape: _Shape, acked: bool, after: bool, unshown_only: bool, rows: int, counted: bool
) -> Select[Any]:
    """A page of ``rows`` of the recipient's inbox of this shape, acknowledged or not: its
    values are ``recipient`` and those of :func:`_inbox_filters` (``rank``, ``since``), and with
    ``after`` the cursor's ``after_rank`` and ``after_id``. ``counted``: each row also carries
    ``waiting`` (:func:`waiting_count`, read in the same statement: one round trip, one
    snapshot)."""
    # Expired mail and mail in a closed thread has left the inbox; held (or rejected) mail is
    # not the recipient's (yet). Unacknowledged, this is the predicate of ix_deliveries_inbox.
    where: list[ColumnElement[bool]] = [
        Delivery.acknowledged_at.is_not(None) if acked else Delivery.acknowledged_at.is_(None)
    ]
    if shape.priority:
        where.append(Delivery.priority_rank == bindparam("rank"))
    if shape.since == "delivery":
        where.append(Delivery.id > bindparam("since"))
    elif shape.since == "time":
        where.append(Delivery.accepted_at > bindparam("since", type_=Delivery.accepted_at.type))
    where += [Delivery.recipient_id == bindparam("recipient"), *Delivery.in_inbox()]
    if unshown_only:
        where.append(Delivery.delivered_at.is_(None))
    if after:
        rank = bindparam("after_rank", type_=Delivery.priority_rank.type)
        where.append(
            or_(
                Delivery.priority_rank > rank,
                and_(Delivery.priority_rank == rank, Delivery.id > bindparam("after_id")),
            )
        )
    counts = (_WAITING_COUNT.scalar_subquery().label("waiting"),) if counted else ()
    return (
        select(
            *_LISTED,
            *counts,
            Thread.title.label("thread_title"),
            Thread.ref.label("thread_ref"),
            Agent.username.label("sender"),
            Message.kind.label("kind"),
            Message.priority.label("message_priority"),
            Message.summary.label("summary"),
            Message.body.label("body"),
            Message.created_at.label("sent_at"),
        )
        .join(Thread, Thread.id == Delivery.thread_id)
        .join(Message, Message.id == Delivery.message_id)
        .join(Agent, Agent.id == Message.sender_id)
        .where(*where)
        .order_by(Delivery.priority_rank, Delivery.id)
        .limit(rows)
    )


@mostly_reads
def inbox(
    uow: UnitOfWork,
    caller: Caller,
    limit: int | None = None,
    *,
    cursor: str | None = None,
    include: str | None = None,
    status: str | None = None,
    priority: str | None = None,
    since: str | None = None,
    unshown_only: bool = False,
) -> Inbox:
    """The caller's deliveries in open or close-requested threads, urgent first, then oldest
    first; by default only the unacknowledged ones, with summaries; ``limit`` a page (by
    default ``INBOTS_LIST_DEFAULT``).

    Paging never needs an acknowledgement: ``next_cursor`` continues after the last item (same
    filters). ``include="body"`` adds each message's body (a page is then at most
    ``inbox_bodies_max`` items) and stamps those deliveries fetched; without it listing stamps
    delivered, never fetched (a summary is not the message). ``status`` is ``unacked``
    (default), ``acked`` or ``all``; ``priority`` keeps one priority; ``since`` keeps deliveries
    after a delivery id or an RFC 3339 time. ``unshown_only`` (the long-poll's answer) lists only
    deliveries never shown before, so new mail is never crowded out by a full page of older mail
    already seen. ``waiting`` always counts all unacknowledged mail.
    """
    s = uow.settings
    shape, values = _inbox_filters(status, priority, since, include)
    bodies = shape.bodies
    after = INBOX.decode(cursor)
    count = limit or s.list_default
    if bodies:
        count = min(count, s.inbox_bodies_max)
    values["recipient"] = caller.agent_id
    if after is not None:
        values["after_rank"], values["after_id"] = after
    run = uow.session.connection().execute
    halves = (False, True) if shape.acked is None else (shape.acked,)
    one = len(halves) == 1  # then the page's rows carry the count too
    statements = [
        _listing(shape, half, after is not None, unshown_only, count + 1, one) for half in halves
    ]
    if one:
        rows = list(run(statements[0], values).all())
        waiting = rows[0].waiting if rows else waiting_count(uow, caller)
    else:
        waiting = waiting_count(uow, caller)
        # Both halves, each read in order from its own partial index, merged: one index scan
        # per half instead of every delivery of the recipient sorted.
        rows = [row for statement in statements for row in run(statement, values)]
        rows.sort(key=lambda row: (row.priority_rank, row.id))
        rows = rows[: count + 1]
    page, following = rows[:count], len(rows) > count
    deliveries: Sequence[Any] = page
    if bodies or any(row.delivered_at is None for row in page):
        # Stamps to write, and mirror on the rows read (a row is read-only): a copy of each.
        deliveries = [SimpleNamespace(**row._mapping) for row in page]
        if bodies:
            opened(uow, deliveries)
        else:
            shown(uow, deliveries)
    # With the bodies, what each message carries (metadata only, one query).
    carried = attachments.listed(uow.session, (d.message_id for d in deliveries)) if bodies else {}
    items = [
        InboxItem(
            delivery_id=d.id,
            message_id=d.message_id,
            thread_id=d.thread_id,
            thread_title=d.thread_title,
            thread_ref=d.thread_ref,
            sender=d.sender,
            kind=d.kind,
            priority=d.message_priority,
            summary=shown_summary(d.summary, d.body, s.summary_shown),
            sent_at=d.sent_at,
            state=state_of(d),
            body=d.body if bodies else None,
            attachments=carried.get(d.message_id, []),
        )
        for d in deliveries
    ]
    last = deliveries[-1] if deliveries else None
    next_cursor = (
        INBOX.encode(InboxPlace(last.priority_rank, last.id))
        if following and last is not None and not unshown_only
        else None
    )
    # More: another page follows (on a first page of unacknowledged mail that is exactly
    # waiting > returned). The long-poll, which lists only unshown mail, keeps that meaning.
    more = waiting > len(items) if unshown_only else following
    return Inbox(
        items=items, returned=len(items), waiting=waiting, more=more, next_cursor=next_cursor
    )


@reads
def waiting_count(uow: UnitOfWork, caller: Caller) -> int:
    """How many unacknowledged deliveries the caller has in threads that are not closed."""
    total = uow.session.connection().scalar(_WAITING_COUNT, {"recipient": caller.agent_id})
    return total or 0


@reads
def has_unshown(uow: UnitOfWork, caller: Caller) -> bool:
    """Whether the caller has unacknowledged mail it has not been shown yet (the wait's trigger)."""
    found = uow.session.connection().scalar(_HAS_UNSHOWN, {"recipient": caller.agent_id})
    return found is not None


def own_delivery(uow: UnitOfWork, caller: Caller, delivery_id: str) -> Delivery:
    """The caller's own delivery, released to it, in a thread that is not closed: else 404
    (410 when it expired)."""
    delivery = uow.session.scalars(
        select(Delivery)
        .join(Thread, Thread.id == Delivery.thread_id)
        .where(
            Delivery.id == delivery_id,
            Delivery.recipient_id == caller.agent_id,
            Delivery.released(),
            Thread.status != CLOSED,
        )
    ).first()
    if delivery is None:
        raise not_found("delivery", delivery_id)
    if delivery.expired_at is not None:
        raise expired_error(f"Delivery {delivery.id}", delivery.expired_at)
    return delivery


def expired_error(what: str, expired_at: datetime, ttl_seconds: int | None = None) -> Expired:
    """``410 expired``: what reading, marking or working on mail that expired unacknowledged
    answers (``what``: "Message msg_…" or "Delivery dlv_…")."""
    given = f"a ttl_seconds of {ttl_seconds}" if ttl_seconds else "a ttl_seconds"
    return Expired(
        f"{what} expired unacknowledged at {rfc3339(expired_at)} (its sender gave it {given}); "
        "it is no longer yours to read or act on. Ask its sender to send it again if it still "
        "matters."
    )


@mostly_reads
def mark_received(uow: UnitOfWork, caller: Caller, delivery_id: str) -> DeliveryRead:
    """A webhook handler confirms its agent was told: stamps delivered."""
    delivery = own_delivery(uow, caller, delivery_id)
    shown(uow, [delivery])
    return to_read(delivery, caller.username)


def _check_ids(ids: list[str], uow: UnitOfWork) -> list[str]:
    """The ids of a batch, each once, in the order given: 1 to ``INBOTS_ACK_BATCH_MAX``."""
    maximum = uow.settings.ack_batch_max
    if not 1 <= len(ids) <= maximum:
        raise Invalid(f"ids must hold 1 to {maximum} ids (got {len(ids)}).", field="ids")
    return list(dict.fromkeys(ids))


def _check_note(note: str | None, uow: UnitOfWork) -> str | None:
    if note is None:
        return None
    if len(note) > uow.settings.note_max:
        raise Invalid(
            f"note must be at most {uow.settings.note_max} characters (got {len(note)}); "
            "shorten it, or point at a file or URL with the rest.",
            field="note",
        )
    return note


def _heartbeat(
    uow: UnitOfWork, caller: Caller, wanted: list[str], note: str | None
) -> WorkingResult:
    """Stamp ``working_at`` (again) on the caller's unacknowledged deliveries among ``wanted``
    (delivery or message ids); answers what became of each id."""
    by_delivery = [i for i in wanted if kind_of(i) == "delivery"]
    by_message = [i for i in wanted if kind_of(i) == "message"]
    rows = uow.session.scalars(
        select(Delivery)
        .join(Thread, Thread.id == Delivery.thread_id)
        .where(
            Delivery.recipient_id == caller.agent_id,
            Delivery.released(),
            Thread.status != CLOSED,
            Delivery.id.in_(by_delivery) | Delivery.message_id.in_(by_message),
        )
        .with_for_update(of=Delivery)
    ).all()
    resolved: dict[str, Delivery] = {}
    for row in rows:
        resolved[row.id] = row
        resolved[row.message_id] = row
    now = utcnow()
    for row in {r.id: r for r in rows}.values():
        if row.acknowledged_at is None and row.expired_at is None:
            # A heartbeat is progress: it restarts the stall clock, and while it is recent the
            # sweep holds off for the working stall time (renotify.stall_batch).
            row.working_at = now
            row.moved_at = now
            if note is not None:
                row.working_note = note
    uow.session.flush()
    working: list[DeliveryRead] = []
    acked: list[str] = []
    missing: list[str] = []
    expired: list[str] = []
    for ident in wanted:
        found = resolved.get(ident)
        if found is None:
            missing.append(ident)
        elif found.acknowledged_at is not None:
            acked.append(ident)
        elif found.expired_at is not None:
            expired.append(ident)
        else:
            working.append(to_read(found, caller.username))
    return WorkingResult(
        working=working, already_acknowledged=acked, not_found=missing, expired=expired
    )


def working(
    uow: UnitOfWork, caller: Caller, delivery_id: str, request: WorkingRequest
) -> DeliveryRead:
    """The recipient is working on this delivery: stamp ``working_at`` (again on every call: a
    heartbeat) with an optional note for the sender. A working delivery is not stalled until the
    working stall time passes without a heartbeat. Only the recipient may (anyone else: not
    found); an acknowledged delivery is a conflict."""
    note = _check_note(request.note, uow)
    result = _heartbeat(uow, caller, [delivery_id], note)
    if result.working:
        return result.working[0]
    if result.already_acknowledged:
        raise AlreadyAcknowledged(
            f"Delivery {delivery_id!r} is already acknowledged: there is nothing left to work "
            "on. To say more about it, send a message in its thread instead."
        )
    if result.expired:  # the row _heartbeat loaded, from the session (no query)
        lapsed = uow.session.get(Delivery, delivery_id)
        expired_at = lapsed.expired_at if lapsed and lapsed.expired_at else utcnow()
        raise expired_error(f"Delivery {delivery_id}", expired_at)
    raise not_found("delivery", delivery_id)


def mark_working(
    uow: UnitOfWork, caller: Caller, ids: list[str], note: str | None
) -> WorkingResult:
    """The heartbeat for several deliveries (or messages) at once: ``working`` for each id,
    answered per id instead of failing on the first that cannot be marked."""
    wanted = _check_ids(ids, uow)
    return _heartbeat(uow, caller, wanted, _check_note(note, uow))


def acknowledge(uow: UnitOfWork, caller: Caller, request: AckRequest) -> AckResult:
    """Done with these (acted on, or declined). Idempotent: a repeat, or an id that is not the
    caller's, changes nothing and raises nothing."""
    ids, outcome = request.ids, request.outcome
    wanted = _check_ids(ids, uow)
    if outcome is not None and outcome not in OUTCOMES:
        raise Invalid("outcome must be 'done' or 'declined'.", field="outcome")
    note = _check_note(request.note, uow)
    by_delivery = [i for i in wanted if kind_of(i) == "delivery"]
    by_message = [i for i in wanted if kind_of(i) == "message"]
    rows = uow.session.execute(
        select(
            Delivery.id,
            Delivery.message_id,
            Delivery.thread_id,
            Delivery.expired_at,
            Message.sender_id,
            Agent.status,
            Agent.webhook_url,
            Agent.webhook_events,
        )
        .join(Thread, Thread.id == Delivery.thread_id)
        .join(Message, Message.id == Delivery.message_id)
        .join(Agent, Agent.id == Message.sender_id)
        .where(
            Delivery.recipient_id == caller.agent_id,
            Delivery.released(),
            Thread.status != CLOSED,
            Delivery.id.in_(by_delivery) | Delivery.message_id.in_(by_message),
        )
    ).all()
    resolved: dict[str, str] = {}
    for row in rows:
        resolved[row.id] = row.id
        resolved[row.message_id] = row.id
    # Expired unacknowledged: no longer the caller's, so not acknowledged now (its sender
    # already reads "expired"; an acknowledgement would tell it the mail was dealt with).
    lapsed = {row.id for row in rows if row.expired_at is not None}
    targets = {resolved[i] for i in wanted if i in resolved} - lapsed
    done: set[str] = set()
    if targets:
        now = utcnow()
        done = set(
            uow.session.scalars(
                update(Delivery)
                .where(Delivery.id.in_(targets), Delivery.acknowledged_at.is_(None))
                .values(acknowledged_at=now, outcome=outcome, note=note)
                .returning(Delivery.id)
                .execution_options(synchronize_session=False)
            ).all()
        )
        tallies.acknowledged(uow.session, caller.workspace_id, caller.agent_id, len(done))
        # Each sender is told: its long-poll (receipts) and, if its webhook receives them, a
        # message.acknowledged notification.
        events.record_acknowledged(
            uow,
            [
                events.Acknowledged(
                    delivery_id=row.id,
                    message_id=row.message_id,
                    thread_id=row.thread_id,
                    workspace_id=caller.workspace_id,
                    recipient_id=caller.agent_id,
                    sender_id=row.sender_id,
                    push=events.pushes(row, subscriptions.MESSAGE_ACKNOWLEDGED),
                )
                for row in rows
                if row.id in done
            ],
            outcome,
            note,
            now,
        )
    acknowledged, already, missing, expired = [], [], [], []
    counted: set[str] = set()  # a delivery named twice (by its id and its message's) is acked once
    for ident in wanted:
        if ident not in resolved:
            missing.append(ident)
        elif resolved[ident] in done and resolved[ident] not in counted:
            acknowledged.append(ident)
            counted.add(resolved[ident])
        elif resolved[ident] in lapsed:
            expired.append(ident)
        else:
            already.append(ident)
    return AckResult(acknowledged=acknowledged, already=already, not_found=missing, expired=expired)


def acknowledge_reply(
    uow: UnitOfWork, caller: Caller, message_id: str, outcome: str, note: str | None
) -> ReplyAcknowledged:
    """The caller's delivery of ``message_id`` (a message it answers), acknowledged as
    :func:`acknowledge` does, inside the send's transaction. One already acknowledged stays as it
    was (its outcome is answered); no delivery of the caller's, or one that expired, is refused
    naming ``acknowledge``, so that the send is not stored either."""
    found = uow.session.execute(
        select(Delivery.id, Delivery.outcome, Delivery.expired_at, Delivery.acknowledged_at)
        .join(Thread, Thread.id == Delivery.thread_id)
        .where(
            Delivery.message_id == message_id,
            Delivery.recipient_id == caller.agent_id,
            Delivery.released(),
            Thread.status != CLOSED,
        )
    ).first()
    if found is None:
        raise Invalid(
            f"You have no copy of {message_id} to acknowledge (you sent it, or joined the thread "
            "after it): leave acknowledge out.",
            field="acknowledge",
        )
    if found.acknowledged_at is not None:
        return ReplyAcknowledged(delivery_id=found.id, outcome=found.outcome)
    if found.expired_at is not None:
        raise Invalid(
            f"Your copy of {message_id} expired unacknowledged: it is no longer yours to "
            "acknowledge. Leave acknowledge out.",
            field="acknowledge",
        )
    acknowledge(uow, caller, AckRequest(ids=[found.id], outcome=outcome, note=note))
    return ReplyAcknowledged(delivery_id=found.id, outcome=outcome)
