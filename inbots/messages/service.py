"""Sending into a thread, reading history and single messages."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy import exists, insert, or_, select
from sqlalchemy.exc import IntegrityError

from inbots.agents import service as agents
from inbots.approvals import service as approvals
from inbots.caller import Caller
from inbots.db.uow import UnitOfWork, mostly_reads, reads
from inbots.deliveries import receipts
from inbots.deliveries import service as deliveries
from inbots.deliveries.schemas import OUTCOMES, AckRequest
from inbots.deliveries.state import STATES, state_of
from inbots.deliveries.state_sql import state_filter
from inbots.dispatch.jobs import Job
from inbots.errors import (
    IdempotencyKeyReused,
    Invalid,
    NoRecipients,
    NotFound,
    SummaryRequired,
    ThreadNotOpen,
    not_found,
)
from inbots.kit.clock import time_field, utcnow
from inbots.kit.cursor import LAST_ID
from inbots.kit.ids import kind_of, new_id
from inbots.kit.text import shown_summary
from inbots.messages import governance
from inbots.messages.schemas import (
    DeliveryBrief,
    DirectMessageCreate,
    History,
    MessageCreate,
    MessageRead,
    MessageWithDelivery,
    MessageWithReceipts,
    Outbox,
    OutboxItem,
    SendResult,
    ThreadDetail,
    idempotency_key,
)
from inbots.models.agents import Agent
from inbots.models.deliveries import Delivery
from inbots.models.messages import (
    APPROVED,
    DEFAULT_KIND,
    HELD,
    KINDS,
    NORMAL,
    PRIORITIES,
    Message,
    priority_rank,
)
from inbots.models.threads import CLOSE_REQUESTED, CLOSED, OPEN, Participant, Thread
from inbots.observability import metrics
from inbots.threads import service as threads
from inbots.webhooks import subscriptions
from inbots.webhooks.subscriptions import MESSAGE_CREATED

log = logging.getLogger(__name__)


def to_read(message: Message, sender: str) -> MessageRead:
    return MessageRead(
        id=message.id,
        thread_id=message.thread_id,
        sender=sender,
        kind=message.kind,
        priority=message.priority,
        summary=message.summary,
        body=message.body,
        reply_to=message.reply_to_id,
        created_at=message.created_at,
        ttl_seconds=message.ttl_seconds,
        expires_at=message.expires_at,
    )


def _reads(uow: UnitOfWork, messages: Sequence[Message]) -> list[MessageRead]:
    names = agents.usernames(uow, (m.sender_id for m in messages))
    return [to_read(m, names.get(m.sender_id, "")) for m in messages]


def check_idempotency_key(key: str | None, uow: UnitOfWork) -> str | None:
    return idempotency_key(key, uow.settings.idempotency_key_max)


def _check_content(
    uow: UnitOfWork, caller: Caller, body: str, summary: str | None, kind: str | None
) -> tuple[str, str | None, str]:
    """A message's content as stored (a blank summary is none; no kind is ``update``), within
    the settings' lengths; a long body needs a summary (the operator's does not)."""
    s = uow.settings
    if not body.strip():
        raise Invalid("body must be a non-empty string.", field="body")
    if len(body) > s.message_body_max:
        raise Invalid(
            f"body is {len(body)} characters; the limit is {s.message_body_max}. Point at a file "
            "or URL instead of pasting it.",
            field="body",
        )
    if summary is not None:
        summary = summary.strip() or None
    if summary is not None:
        if "\n" in summary or "\r" in summary:
            raise Invalid("summary must be one line.", field="summary")
        if len(summary) > s.summary_max:
            raise Invalid(f"summary must be at most {s.summary_max} characters.", field="summary")
    if summary is None and not caller.is_operator and len(body) > s.summary_required_over:
        raise SummaryRequired(
            f"This body is {len(body)} characters: add a summary (one line, up to "
            f"{s.summary_max} characters, saying what you are asking for) to any body over "
            f"{s.summary_required_over}.",
            field="summary",
        )
    if kind is None:
        kind = DEFAULT_KIND
    if kind not in KINDS:
        raise Invalid(f"kind must be one of {', '.join(KINDS)}.", field="kind")
    return body, summary, kind


def _check_priority(priority: str | None) -> str:
    if priority is None:
        return NORMAL
    if priority not in PRIORITIES:
        raise Invalid(
            "priority must be normal (the default) or urgent (listed first in every inbox).",
            field="priority",
        )
    return priority


def _check_ttl(uow: UnitOfWork, ttl: int | None) -> int | None:
    s = uow.settings
    if ttl is None:
        return None
    if not s.ttl_min_seconds <= ttl <= s.ttl_max_seconds:
        raise Invalid(
            f"ttl_seconds must be from {s.ttl_min_seconds} to {s.ttl_max_seconds} seconds "
            f"(got {ttl}); leave it out for mail that never expires.",
            field="ttl_seconds",
        )
    return ttl


# What a send's fingerprint is made of: its texts, ids and the sorted recipients of a direct send.
Part = str | list[str] | None


def _fingerprint(*parts: Part, priority: str = NORMAL, ttl: int | None = None) -> str:
    """What one send's content hashes to, for its idempotency key. A normal message without a
    ttl hashes as it did before priorities and expiry existed, so keys stored then still match
    their repeats."""
    values: list[Part | dict[str, int]] = [*parts] if priority == NORMAL else [*parts, priority]
    if ttl is not None:
        values.append({"ttl_seconds": ttl})
    canonical = json.dumps(values, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _replay(uow: UnitOfWork, original: Message, fingerprint: str) -> SendResult:
    if original.content_hash != fingerprint:
        raise IdempotencyKeyReused(
            "This Idempotency-Key was already used for a different message; use a new key for "
            "new content.",
            field="idempotency_key",
        )
    rows = uow.session.execute(
        select(Delivery, Agent.username)
        .join(Agent, Agent.id == Delivery.recipient_id)
        .where(Delivery.message_id == original.id)
        .order_by(Delivery.id)
    ).all()
    sender = agents.usernames(uow, [original.sender_id]).get(original.sender_id, "")
    return SendResult(
        message=to_read(original, sender),
        deliveries=[DeliveryBrief(id=d.id, recipient=name, state=state_of(d)) for d, name in rows],
        duplicate=True,
        held=original.approval == HELD,
    )


def _by_key(uow: UnitOfWork, sender_id: str, key: str) -> Message | None:
    return uow.session.scalars(
        select(Message).where(Message.sender_id == sender_id, Message.idempotency_key == key)
    ).first()


def _not_open(thread: Thread) -> str:
    if thread.status == CLOSE_REQUESTED:
        return (
            f"Thread {thread.id} has a close request pending: participants can still read and "
            "acknowledge, but no new messages are accepted until the operator dismisses it."
        )
    return (
        f"Thread {thread.id} is closed: it takes no new messages. Open a new thread (or send "
        "with POST /v1/messages) to go on."
    )


def send_message(
    uow: UnitOfWork,
    caller: Caller,
    thread_id: str,
    request: MessageCreate,
    idempotency_key: str | None = None,
) -> SendResult:
    """Store one message and one delivery per other participant who can receive, in one
    transaction. With an idempotency key, a repeat returns the original (``duplicate``)."""
    key = check_idempotency_key(idempotency_key, uow)
    body, summary, kind, reply_to = request.body, request.summary, request.kind, request.reply_to
    thread = threads.visible_thread(uow, caller, thread_id, lock=True)
    body, summary, kind = _check_content(uow, caller, body, summary, kind)
    priority = _check_priority(request.priority)
    ttl = _check_ttl(uow, request.ttl_seconds)
    fingerprint = _fingerprint(thread.id, body, summary, kind, reply_to, priority=priority, ttl=ttl)
    if key is not None and (original := _by_key(uow, caller.agent_id, key)) is not None:
        return _replay(uow, original, fingerprint)
    if thread.status != OPEN:
        raise ThreadNotOpen(_not_open(thread))
    if reply_to is not None:
        found = uow.session.scalar(
            select(Message.id).where(Message.id == reply_to, Message.thread_id == thread.id)
        )
        if found is None:
            raise Invalid("reply_to must name a message in this thread.", field="reply_to")

    recipients = uow.session.execute(
        select(Agent.id, Agent.username, Agent.webhook_url, Agent.webhook_events)
        .join(Participant, Participant.agent_id == Agent.id)
        .where(
            Participant.thread_id == thread.id,
            Agent.id != caller.agent_id,
            Agent.status == "active",
        )
        .order_by(Participant.added_at, Agent.username)
    ).all()
    if not recipients:
        raise NoRecipients(
            "Nobody else in this thread can receive this message; add a participant first."
        )
    if caller.is_operator:
        threads.join(uow, thread, caller.agent_id)

    message = _message(uow, caller, thread, body, summary, kind, priority, reply_to, ttl)
    if key is None:
        uow.session.add(message)
        uow.session.flush()
    else:
        message.idempotency_key, message.content_hash = key, fingerprint
        try:
            with uow.session.begin_nested():  # a savepoint only where a key can collide
                uow.session.add(message)
                uow.session.flush()
        except IntegrityError:
            # The same key raced in from a concurrent call (in another thread of the sender's):
            # that call's message is the one, and this is its duplicate.
            original = _by_key(uow, caller.agent_id, key)
            if original is None:
                raise
            return _replay(uow, original, fingerprint)
    return _deliver(uow, caller, thread, message, recipients)


def send_direct(
    uow: UnitOfWork,
    caller: Caller,
    request: DirectMessageCreate,
    idempotency_key: str | None = None,
) -> SendResult:
    """Open a new thread with the caller and ``to`` (``"*"``: every agent that is not archived,
    other than the caller, at this moment) and post its first message: one transaction, the same
    statements whatever the number of recipients. ``title`` defaults to the summary, or else the
    body's first line, cut to the title's limit. With an idempotency key, a repeat returns the
    original (``duplicate``) and opens nothing."""
    s = uow.settings
    key = check_idempotency_key(idempotency_key, uow)
    body, summary, kind = _check_content(uow, caller, request.body, request.summary, request.kind)
    priority = _check_priority(request.priority)
    ttl = _check_ttl(uow, request.ttl_seconds)
    if request.reply_to is not None:
        raise Invalid(
            "reply_to names a message in the same thread, and a send with to opens a new "
            "thread: leave reply_to out, or post to the thread (thread_id) you answer in.",
            field="reply_to",
        )
    if request.title is None:
        title = shown_summary(summary, body, s.thread_title_max)
    else:
        title, _ = threads.check_title(request.title, None, uow)
    ref = threads.check_ref(request.ref, uow)
    to = request.to
    fingerprint = _fingerprint(
        "to", sorted(set(to)), title, ref, body, summary, kind, priority=priority, ttl=ttl
    )
    if key is not None and (original := _by_key(uow, caller.agent_id, key)) is not None:
        return _replay(uow, original, fingerprint)
    members = threads.recipients_of(uow, caller, to, "to")
    recipients = members
    if key is None:
        thread = threads.create(uow, caller, title, None, ref, members)
        message = _message(uow, caller, thread, body, summary, kind, priority, None, ttl)
        uow.session.add(message)
        uow.session.flush()
        return _titled(thread, request, _deliver(uow, caller, thread, message, recipients))
    try:
        # The thread too, inside the savepoint: a repeat that lost the race opens nothing.
        with uow.session.begin_nested():
            thread = threads.create(uow, caller, title, None, ref, members)
            message = _message(uow, caller, thread, body, summary, kind, priority, None, ttl)
            message.idempotency_key, message.content_hash = key, fingerprint
            uow.session.add(message)
            uow.session.flush()
    except IntegrityError:
        original = _by_key(uow, caller.agent_id, key)
        if original is None:
            raise
        return _replay(uow, original, fingerprint)
    return _titled(thread, request, _deliver(uow, caller, thread, message, recipients))


def _titled(thread: Thread, request: DirectMessageCreate, sent: SendResult) -> SendResult:
    """A held direct send's thread does not show its message's first line as its title to the
    recipients, who may not read the message yet (:data:`~inbots.approvals.service.HELD_TITLE`
    until the approval). A title the sender gave is the thread's, as any thread's title is."""
    if sent.held and request.title is None:
        thread.title = approvals.HELD_TITLE
    return sent


class Recipient(Protocol):
    """Who a message goes to: an agent row, or a row of the recipients query."""

    @property
    def id(self) -> str: ...
    @property
    def username(self) -> str: ...
    @property
    def webhook_url(self) -> str | None: ...
    @property
    def webhook_events(self) -> str: ...


def _message(
    uow: UnitOfWork,
    caller: Caller,
    thread: Thread,
    body: str,
    summary: str | None,
    kind: str,
    priority: str,
    reply_to: str | None,
    ttl: int | None = None,
) -> Message:
    now = utcnow()
    return Message(
        id=new_id("msg"),
        workspace_id=caller.workspace_id,
        thread_id=thread.id,
        sender_id=caller.agent_id,
        kind=kind,
        priority=priority,
        summary=summary,
        body=body,
        reply_to_id=reply_to,
        created_at=now,
        ttl_seconds=ttl,
        expires_at=None if ttl is None else now + timedelta(seconds=ttl),
    )


def _deliver(
    uow: UnitOfWork,
    caller: Caller,
    thread: Thread,
    message: Message,
    recipients: Sequence[Recipient],
) -> SendResult:
    """One delivery per recipient, for a message just stored: one statement however many. Then
    the caps and the rate limit are checked (a refusal rolls the whole send back, so nothing is
    stored): last, so that the rows they lock are held for as short a time as possible."""
    now = message.created_at
    # The workspace's approval policy may hold it: its deliveries are then stored held (stamped,
    # never published, nobody woken) until the operator approves (inbots.approvals).
    held = approvals.holds(uow, caller, message.kind, message.priority)
    if held:
        message.approval = HELD
    # A webhook recipient's delivery is published in the same breath (if its webhook receives
    # message.created): the publish is recorded here (so the renotify sweep sees it if the broker
    # never gets it) and sent after commit.
    pushed = [
        not held
        and bool(r.webhook_url)
        and subscriptions.subscribed(r.webhook_events, MESSAGE_CREATED)
        for r in recipients
    ]
    rows = [
        {
            "id": new_id("dlv"),
            "workspace_id": caller.workspace_id,
            "message_id": message.id,
            "thread_id": thread.id,
            "recipient_id": r.id,
            "priority_rank": priority_rank(message.priority),
            "sender_id": message.sender_id,
            "expires_at": message.expires_at,
            "accepted_at": now,
            "moved_at": now,
            "publish_count": 1 if push else 0,
            "last_published_at": now if push else None,
            "held_at": now if held else None,
        }
        for r, push in zip(recipients, pushed, strict=True)
    ]
    # render_nulls: a NULL is sent as NULL, so rows that differ only in which columns are NULL
    # (published or not, held or not) still make one statement (by default the ORM leaves such
    # columns out and so splits the rows into an INSERT per run of alike rows).
    uow.session.execute(insert(Delivery).execution_options(render_nulls=True), rows)
    if not held:  # held mail is no activity its recipients may see: the approval moves it
        thread.last_activity_at = now
    uow.session.flush()
    governance.admit(uow, caller, [(r.id, r.username) for r in recipients])

    recipient_ids = [r.id for r in recipients]
    jobs = [Job(str(row["id"]), 1, "publish") for row in rows if row["publish_count"]]
    uow.after_commit(_accepted(message.id, thread.id, len(rows), len(jobs)))
    if held:
        approvals.on_held(uow, message, len(rows))
    else:
        uow.wake(recipient_ids)
        uow.enqueue(*jobs)
    return SendResult(
        message=to_read(message, caller.username),
        deliveries=[
            DeliveryBrief(id=row["id"], recipient=r.username, state="held" if held else "accepted")
            for row, r in zip(rows, recipients, strict=True)
        ],
        duplicate=False,
        held=held,
    )


def _accepted(
    message_id: str, thread_id: str, deliveries: int, published: int
) -> Callable[[], None]:
    def count_and_log() -> None:
        metrics.MESSAGES_ACCEPTED.inc()
        metrics.DELIVERIES_CREATED.inc(deliveries)
        log.info(
            "message accepted",
            extra={
                "message_id": message_id,
                "thread_id": thread_id,
                "deliveries": deliveries,
                "webhooks": published,
            },
        )

    return count_and_log


def _parse_since(since: str | None, uow: UnitOfWork) -> tuple[str | None, datetime | None]:
    if not since:
        return None, None
    if kind_of(since) == "message":
        return since, None
    takes = "must be a message id or an RFC 3339 time such as 2026-11-29T18:10:00Z"
    return None, time_field(since, "since", takes)


@mostly_reads
def history(
    uow: UnitOfWork,
    caller: Caller,
    thread_id: str,
    since: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> History:
    """The thread's messages with full bodies, oldest first, ``limit`` a page (by default
    ``INBOTS_LIST_DEFAULT``). Stamps the caller's deliveries among them fetched."""
    s = uow.settings
    thread = threads.visible_thread(uow, caller, thread_id)
    after_id, after_time = _parse_since(since, uow)
    if after_id and not uow.session.scalar(
        select(Message.id).where(Message.id == after_id, Message.thread_id == thread.id)
    ):  # a mistyped id would read as "nothing new"
        raise Invalid(
            f"since names no message of thread {thread.id}: give the id of one of its messages "
            "(from its history) or an RFC 3339 time such as 2026-11-29T18:10:00Z.",
            field="since",
        )
    after_id = LAST_ID.decode(cursor) or after_id
    count = limit or s.list_default
    stmt = select(Message).where(Message.thread_id == thread.id)
    if not caller.is_operator:  # held or rejected mail: only its sender sees it
        stmt = stmt.where(or_(Message.released(), Message.sender_id == caller.agent_id))
        # Mail that expired unacknowledged is no longer the caller's to read (a read is 410).
        stmt = stmt.where(~Delivery.expired_for(caller.agent_id, Message.id))
    if after_id:
        stmt = stmt.where(Message.id > after_id)
    if after_time:
        stmt = stmt.where(Message.created_at > after_time)
    rows = uow.session.scalars(stmt.order_by(Message.id).limit(count + 1)).all()
    page = list(rows[:count])
    if page:
        own = uow.session.scalars(
            select(Delivery).where(
                Delivery.message_id.in_([m.id for m in page]),
                Delivery.recipient_id == caller.agent_id,
                Delivery.expired_at.is_(None),  # the operator's expired copies stay expired
            )
        ).all()
        deliveries.opened(uow, own)
    next_cursor = LAST_ID.encode(page[-1].id) if len(rows) > count else None
    items = _reads(uow, page)
    sent = receipts.receipts_of(uow, [m.id for m in page if m.sender_id == caller.agent_id])
    for item in items:
        item.receipts = sent.get(item.id)
    return History(items=items, next_cursor=next_cursor)


@mostly_reads
def read_message(uow: UnitOfWork, caller: Caller, ident: str) -> MessageWithDelivery:
    """One message with its full body, by message id or the caller's delivery id. Stamps the
    caller's delivery fetched."""
    kind = kind_of(ident)
    delivery: Delivery | None = None
    if kind == "delivery":
        delivery = uow.session.scalars(
            select(Delivery).where(Delivery.id == ident, Delivery.recipient_id == caller.agent_id)
        ).first()
        message_id = delivery.message_id if delivery else None
    elif kind == "message":
        message_id = ident
    else:
        message_id = None
    message = (
        uow.session.scalars(
            select(Message).where(
                Message.id == message_id, Message.workspace_id == caller.workspace_id
            )
        ).first()
        if message_id
        else None
    )
    if message is None or not (
        caller.is_operator
        or message.sender_id == caller.agent_id
        or message.approval in (None, APPROVED)
    ):  # held or rejected mail: only its sender and the operator see it
        raise not_found("message", ident)
    try:
        threads.visible_thread(uow, caller, message.thread_id)
    except NotFound:
        raise not_found("message", ident) from None
    if delivery is None:
        delivery = uow.session.scalars(
            select(Delivery).where(
                Delivery.message_id == message.id, Delivery.recipient_id == caller.agent_id
            )
        ).first()
    if delivery is not None:
        if delivery.expired_at is not None:
            raise deliveries.expired_error(
                f"Message {message.id}", delivery.expired_at, message.ttl_seconds
            )
        deliveries.opened(uow, [delivery])
    sender = agents.usernames(uow, [message.sender_id]).get(message.sender_id, "")
    sent = receipts.receipts_of(uow, [message.id]) if message.sender_id == caller.agent_id else {}
    return MessageWithDelivery(
        message=to_read(message, sender),
        delivery=deliveries.to_read(delivery, caller.username) if delivery else None,
        receipts=sent.get(message.id),
    )


def read_and_acknowledge(
    uow: UnitOfWork, caller: Caller, ident: str, ack: str | None, note: str | None = None
) -> MessageWithDelivery:
    """:func:`read_message` and acknowledge the caller's delivery of it with outcome ``ack``
    (``done`` or ``declined``) and ``note``, in one call: for mail that needs no work. A message
    with no copy addressed to the caller is read and nothing is acknowledged."""
    if ack is None and note is not None:
        raise Invalid(
            "note goes with ack=done or ack=declined: it is the acknowledgement's note for the "
            "sender. Add ack, or leave note out to read without acknowledging.",
            field="note",
        )
    if ack not in OUTCOMES:
        raise Invalid(
            "ack must be done (you acted on it) or declined (you will not); leave it out to "
            "read without acknowledging.",
            field="ack",
        )
    read = read_message(uow, caller, ident)
    if read.delivery is not None:
        request = AckRequest(ids=[read.delivery.id], outcome=ack, note=note)
        deliveries.acknowledge(uow, caller, request)
        row = uow.session.get_one(Delivery, read.delivery.id)
        uow.session.refresh(row)  # the acknowledgement is a bulk update
        read.delivery = deliveries.to_read(row, caller.username)
    return read


@reads
def outbox(
    uow: UnitOfWork,
    caller: Caller,
    state: str | None = None,
    thread: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Outbox:
    """Messages the caller sent, newest first, each with every recipient's receipt. ``state``
    keeps the messages with at least one receipt in that state; ``thread`` those of one thread.
    An agent sees its messages in threads that are not closed; the operator, all of its own."""
    s = uow.settings
    state = state or None
    if state is not None and state not in STATES:
        raise Invalid(
            f"state must be one of {', '.join(STATES)} (a message matches when any of its "
            "receipts is in that state).",
            field="state",
        )
    thread = thread or None
    if thread is not None and kind_of(thread) != "thread":
        raise Invalid(
            "thread must be a thread id (th_…), as list_threads (GET /v1/threads) gives them.",
            field="thread",
        )
    count = limit or s.list_default
    after = LAST_ID.decode(cursor)
    stmt = select(Message).where(
        Message.sender_id == caller.agent_id, Message.workspace_id == caller.workspace_id
    )
    if not caller.is_operator:
        stmt = stmt.join(Thread, Thread.id == Message.thread_id).where(Thread.status != CLOSED)
    if thread:
        stmt = stmt.where(Message.thread_id == thread)
    if state is not None:
        stmt = stmt.where(
            exists().where(Delivery.message_id == Message.id, state_filter(Delivery, state))
        )
    if after:
        stmt = stmt.where(Message.id < after)
    rows = uow.session.scalars(stmt.order_by(Message.id.desc()).limit(count + 1)).all()
    page = list(rows[:count])
    found = receipts.receipts_of(uow, [m.id for m in page])
    items = [OutboxItem(message=to_read(m, caller.username), receipts=found[m.id]) for m in page]
    next_cursor = LAST_ID.encode(page[-1].id) if len(rows) > count else None
    return Outbox(items=items, next_cursor=next_cursor)


def messages_with_receipts(uow: UnitOfWork, thread: Thread) -> list[MessageWithReceipts]:
    """Every message of a thread with each recipient's receipt (the operator's thread view)."""
    messages = uow.session.scalars(
        select(Message).where(Message.thread_id == thread.id).order_by(Message.id)
    ).all()
    receipts = uow.session.scalars(
        select(Delivery).where(Delivery.thread_id == thread.id).order_by(Delivery.id)
    ).all()
    by_message: dict[str, list[Delivery]] = {}
    for d in receipts:
        by_message.setdefault(d.message_id, []).append(d)
    names = agents.usernames(
        uow, [m.sender_id for m in messages] + [d.recipient_id for d in receipts]
    )
    return [
        MessageWithReceipts(
            **to_read(m, names.get(m.sender_id, "")).model_dump(),
            deliveries=[
                deliveries.to_read(d, names.get(d.recipient_id, ""))
                for d in by_message.get(m.id, [])
            ],
        )
        for m in messages
    ]


@reads
def get_thread(uow: UnitOfWork, caller: Caller, thread_id: str) -> ThreadDetail:
    """One thread with its participants; the operator also gets every message with receipts."""
    thread = threads.visible_thread(uow, caller, thread_id)
    detail = ThreadDetail(**threads.to_reads(uow, [thread])[0].model_dump())
    if caller.is_operator:
        detail.messages = messages_with_receipts(uow, thread)
    return detail
