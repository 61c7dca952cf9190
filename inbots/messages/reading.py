"""Reading messages: a thread's history, one message (and reading it and acknowledging it in
one call), what the caller sent with every recipient's receipt (the outbox), and a thread's
detail for the operator. Posting them is :mod:`.service`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import exists, or_, select

from inbots.agents import service as agents
from inbots.attachments import service as attachments
from inbots.caller import Caller
from inbots.db.uow import UnitOfWork, mostly_reads, reads
from inbots.deliveries import receipts, stamps
from inbots.deliveries import service as deliveries
from inbots.deliveries.schemas import OUTCOMES, AckRequest
from inbots.deliveries.state import STATES
from inbots.deliveries.state_sql import state_filter
from inbots.errors import LIST_THREADS, Invalid, NotFound, Pointing, not_found
from inbots.kit.clock import time_field
from inbots.kit.cursor import LAST_ID
from inbots.kit.ids import kind_of
from inbots.messages.schemas import (
    History,
    MessageRead,
    MessageWithDelivery,
    MessageWithReceipts,
    Outbox,
    OutboxItem,
    ThreadDetail,
)
from inbots.models.deliveries import Delivery
from inbots.models.messages import APPROVED, Message
from inbots.models.threads import CLOSED, Thread
from inbots.threads import service as threads


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


def with_attachments(uow: UnitOfWork, items: Sequence[MessageRead]) -> None:
    """Fill in what each message carries (metadata only: one query for them all)."""
    found = attachments.listed(uow.session, (m.id for m in items))
    for item in items:
        item.attachments = found.get(item.id, [])


def _reads(uow: UnitOfWork, messages: Sequence[Message]) -> list[MessageRead]:
    names = agents.usernames(uow, (m.sender_id for m in messages))
    items = [to_read(m, names.get(m.sender_id, "")) for m in messages]
    with_attachments(uow, items)
    return items


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
        stamps.opened(uow, own)
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
        stamps.opened(uow, [delivery])
    sender = agents.usernames(uow, [message.sender_id]).get(message.sender_id, "")
    sent = receipts.receipts_of(uow, [message.id]) if message.sender_id == caller.agent_id else {}
    read = to_read(message, sender)
    with_attachments(uow, [read])
    return MessageWithDelivery(
        message=read,
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
            Pointing("thread must be a thread id (th_…), as {} gives them.", LIST_THREADS),
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
    with_attachments(uow, [item.message for item in items])
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
    carried = attachments.listed(uow.session, (m.id for m in messages))
    return [
        MessageWithReceipts(
            **to_read(m, names.get(m.sender_id, "")).model_dump(),
            attachments=carried.get(m.id, []),
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
