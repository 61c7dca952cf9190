"""The send path: posting into a thread, or opening a thread with its first message (a direct
send), in one transaction: the content's checks (:mod:`.checks`), the idempotency key, one
delivery per recipient, the approval gate, the caps, the acknowledgement a reply may carry
(``acknowledge``) and what waits for the commit. Reading what was sent is :mod:`.reading`."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Protocol

from sqlalchemy import bindparam, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.attributes import set_committed_value

from inbots.agents import service as agents
from inbots.approvals import service as approvals
from inbots.attachments import service as attachments
from inbots.attachments.service import Checked
from inbots.caller import Caller
from inbots.db.uow import UnitOfWork
from inbots.deliveries import service as deliveries
from inbots.deliveries.schemas import ReplyAcknowledged
from inbots.deliveries.state import state_of
from inbots.dispatch.jobs import Job
from inbots.errors import (
    IDEMPOTENCY_KEY,
    SEND_DIRECT,
    IdempotencyKeyReused,
    Invalid,
    NoRecipients,
    Pointing,
    ThreadNotOpen,
)
from inbots.kit.clock import utcnow
from inbots.kit.ids import new_id
from inbots.kit.text import shown_summary
from inbots.messages import checks, governance
from inbots.messages.reading import to_read, with_attachments
from inbots.messages.schemas import (
    DeliveryBrief,
    DirectMessageCreate,
    MessageCreate,
    SendResult,
    Skipped,
)
from inbots.models.agents import Agent
from inbots.models.deliveries import Delivery
from inbots.models.messages import (
    HELD,
    NORMAL,
    Message,
    priority_rank,
)
from inbots.models.threads import CLOSE_REQUESTED, OPEN, Participant, Thread
from inbots.observability import metrics
from inbots.threads import service as threads
from inbots.webhooks import subscriptions
from inbots.webhooks.subscriptions import MESSAGE_CREATED

log = logging.getLogger(__name__)

# The send path's statements, built once (their values are bound per send): building a statement
# costs more than running it.
_RECIPIENTS = (  # the other active participants, in the order they joined
    select(Agent.id, Agent.username, Agent.webhook_url, Agent.webhook_events)
    .join(Participant, Participant.agent_id == Agent.id)
    .where(
        Participant.thread_id == bindparam("thread"),
        Agent.id != bindparam("sender"),
        Agent.status == "active",
    )
    .order_by(Participant.added_at, Agent.username)
)
_NAMED = select(Message.id).where(
    Message.id == bindparam("reply_to"), Message.thread_id == bindparam("thread")
)
# A held or rejected message is unknown to all but its sender (the operator knows them all).
_REPLY_TO = {
    True: _NAMED,
    False: _NAMED.where(or_(Message.released(), Message.sender_id == bindparam("sender"))),
}
_INSERT_DELIVERIES = insert(Delivery)
_THREAD_ACTIVE = (
    update(Thread)
    .where(Thread.id == bindparam("thread"))
    .values(last_activity_at=bindparam("at", type_=Thread.last_activity_at.type))
)


def _acknowledged(
    uow: UnitOfWork, caller: Caller, message: Message, outcome: str | None, held: bool
) -> ReplyAcknowledged | None:
    """The caller's delivery of the message ``message`` answers, acknowledged with ``outcome``
    and the reply's summary as its note (as inboxes show it). A held reply gives no note: the
    operator has not let its words out yet."""
    if outcome is None or message.reply_to_id is None:
        return None
    s = uow.settings
    note = (
        None
        if held
        else shown_summary(message.summary, message.body, min(s.summary_shown, s.note_max))
    )
    return deliveries.acknowledge_reply(uow, caller, message.reply_to_id, outcome, note)


# What a send's fingerprint is made of: its texts, ids and the sorted recipients of a direct send.
Part = str | list[str] | None


def _fingerprint(
    *parts: Part,
    priority: str = NORMAL,
    ttl: int | None = None,
    ack: str | None = None,
    carried: Sequence[Checked] = (),
) -> str:
    """What one send's content hashes to, for its idempotency key. A normal message without a
    ttl or an acknowledgement hashes as it did before priorities, expiry and reply-and-ack
    existed, so keys stored then still match their repeats."""
    values: list[Part | dict[str, int | str | list[str]]] = (
        [*parts] if priority == NORMAL else [*parts, priority]
    )
    if ttl is not None:
        values.append({"ttl_seconds": ttl})
    if ack is not None:
        values.append({"acknowledge": ack})
    if carried:  # names, types and SHA-256 of the attachments, in order
        values.append({"attachments": attachments.fingerprint_of(carried)})
    canonical = json.dumps(values, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _replay(
    uow: UnitOfWork, original: Message, fingerprint: str, ack: str | None = None
) -> SendResult:
    """The original of a repeated send; with ``ack``, what its acknowledgement did (the
    sender's delivery of the message it answers, as it stands)."""
    if original.content_hash != fingerprint:
        raise IdempotencyKeyReused(
            Pointing(
                "This {} was already used for a different message; use a new key for new content.",
                IDEMPOTENCY_KEY,
            ),
            field="idempotency_key",
        )
    rows = uow.session.execute(
        select(Delivery, Agent.username)
        .join(Agent, Agent.id == Delivery.recipient_id)
        .where(Delivery.message_id == original.id)
        .order_by(Delivery.id)
    ).all()
    sender = agents.usernames(uow, [original.sender_id]).get(original.sender_id, "")
    acked = None
    if ack is not None and original.reply_to_id is not None:
        found = uow.session.execute(
            select(Delivery.id, Delivery.outcome).where(
                Delivery.message_id == original.reply_to_id,
                Delivery.recipient_id == original.sender_id,
                Delivery.acknowledged_at.is_not(None),
            )
        ).first()
        if found is not None:
            acked = ReplyAcknowledged(delivery_id=found.id, outcome=found.outcome)
    read = to_read(original, sender)
    with_attachments(uow, [read])
    return SendResult(
        message=read,
        deliveries=[DeliveryBrief(id=d.id, recipient=name, state=state_of(d)) for d, name in rows],
        duplicate=True,
        held=original.approval == HELD,
        acknowledged=acked,
    )


_BY_KEY = select(Message).where(
    Message.sender_id == bindparam("sender"), Message.idempotency_key == bindparam("key")
)


def _by_key(uow: UnitOfWork, sender_id: str, key: str) -> Message | None:
    return uow.session.scalars(_BY_KEY, {"sender": sender_id, "key": key}).first()


def _not_open(thread: Thread) -> str | Pointing:
    if thread.status == CLOSE_REQUESTED:
        return (
            f"Thread {thread.id} has a close request pending: participants can still read and "
            "acknowledge, but no new messages are accepted until the operator dismisses it."
        )
    return Pointing(
        "Thread {thread} is closed: it takes no new messages. Open a new thread (or send with "
        "{}) to go on.",
        SEND_DIRECT,
        thread=thread.id,
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
    key = checks.idempotency_key_of(idempotency_key, uow)
    body, summary, kind, reply_to = request.body, request.summary, request.kind, request.reply_to
    thread = threads.visible_thread(uow, caller, thread_id, lock=True)
    body, summary, kind = checks.content(uow, caller, body, summary, kind)
    priority = checks.priority(request.priority)
    ttl = checks.ttl(uow, request.ttl_seconds)
    ack = checks.acknowledge(request.acknowledge, reply_to)
    carried = attachments.check(uow.settings, request.attachments)
    fingerprint = _fingerprint(
        thread.id,
        body,
        summary,
        kind,
        reply_to,
        priority=priority,
        ttl=ttl,
        ack=ack,
        carried=carried,
    )
    if key is not None and (original := _by_key(uow, caller.agent_id, key)) is not None:
        return _replay(uow, original, fingerprint, ack)
    if thread.status != OPEN:
        raise ThreadNotOpen(_not_open(thread))
    if reply_to is not None:
        named = _REPLY_TO[caller.is_operator]
        values = {"reply_to": reply_to, "thread": thread.id, "sender": caller.agent_id}
        if uow.session.connection().scalar(named, values) is None:
            raise Invalid("reply_to must name a message in this thread.", field="reply_to")

    recipients = (
        uow.session.connection()
        .execute(_RECIPIENTS, {"thread": thread.id, "sender": caller.agent_id})
        .all()
    )
    if not recipients:
        raise NoRecipients(
            "Nobody else in this thread can receive this message; add a participant first."
        )
    if caller.is_operator:
        threads.join(uow, thread, caller.agent_id)
        approvals.release(thread)  # the operator writing in a held thread lets it out

    held = approvals.holds(uow, caller, kind, priority, thread)
    message = _message(uow, caller, thread, body, summary, kind, priority, reply_to, ttl, held)
    if key is None:
        _store(uow, message)
    else:
        message.idempotency_key, message.content_hash = key, fingerprint
        try:
            with uow.session.begin_nested():  # a savepoint only where a key can collide
                _store(uow, message)
        except IntegrityError:
            # The same key raced in from a concurrent call (in another thread of the sender's):
            # that call's message is the one, and this is its duplicate.
            original = _by_key(uow, caller.agent_id, key)
            if original is None:
                raise
            return _replay(uow, original, fingerprint, ack)
    sent = _deliver(uow, caller, thread, message, recipients, carried, held)
    # Last, in the same transaction: a refused send (a cap, the rate limit) acknowledges nothing.
    sent.acknowledged = _acknowledged(uow, caller, message, ack, sent.held)
    return sent


def send_direct(
    uow: UnitOfWork,
    caller: Caller,
    request: DirectMessageCreate,
    idempotency_key: str | None = None,
) -> SendResult:
    """Open a new thread with the caller and ``to`` (``"*"``: every agent that is not archived,
    other than the caller, at this moment) and post its first message: one transaction, the same
    statements whatever the number of recipients. ``title`` defaults to the summary, or else the
    body's first line, cut to the title's limit. With a ``ref``, the open thread of exactly the
    same people and ref (:func:`~inbots.threads.service.open_with`) goes on instead
    (``reused_thread``). With an idempotency key, a repeat returns the original
    (``duplicate``) and opens nothing."""
    s = uow.settings
    key = checks.idempotency_key_of(idempotency_key, uow)
    body, summary, kind = checks.content(uow, caller, request.body, request.summary, request.kind)
    priority = checks.priority(request.priority)
    ttl = checks.ttl(uow, request.ttl_seconds)
    if request.reply_to is not None:
        raise Invalid(
            "reply_to names a message in the same thread, and a send with to opens a new "
            "thread: leave reply_to out, or post to the thread (thread_id) you answer in.",
            field="reply_to",
        )
    checks.acknowledge(request.acknowledge, None)
    if request.title is None:
        title = shown_summary(summary, body, s.thread_title_max)
    else:
        title, _ = threads.check_title(request.title, None, uow)
    ref = threads.check_ref(request.ref, uow)
    to = request.to
    carried = attachments.check(s, request.attachments)
    fingerprint = _fingerprint(
        "to",
        sorted(set(to)),
        title,
        ref,
        body,
        summary,
        kind,
        priority=priority,
        ttl=ttl,
        carried=carried,
    )
    if key is not None and (original := _by_key(uow, caller.agent_id, key)) is not None:
        return _replay(uow, original, fingerprint)
    members = threads.recipients_of(uow, caller, to, "to")
    recipients = members
    # With a ref, the open thread of the same people and ref goes on: one thread per task.
    reused = threads.open_with(uow, caller, ref, members) if ref is not None else None
    if reused is not None:
        thread = reused
    if key is None:
        if reused is None:
            thread = threads.create(uow, caller, title, None, ref, members)
        held = approvals.holds(uow, caller, kind, priority, thread)
        message = _message(uow, caller, thread, body, summary, kind, priority, None, ttl, held)
        _store(uow, message)
        return _sent_direct(
            thread, reused, _deliver(uow, caller, thread, message, recipients, carried, held)
        )
    try:
        # The thread too, inside the savepoint: a repeat that lost the race opens nothing.
        with uow.session.begin_nested():
            if reused is None:
                thread = threads.create(uow, caller, title, None, ref, members)
            held = approvals.holds(uow, caller, kind, priority, thread)
            message = _message(uow, caller, thread, body, summary, kind, priority, None, ttl, held)
            message.idempotency_key, message.content_hash = key, fingerprint
            _store(uow, message)
    except IntegrityError:
        original = _by_key(uow, caller.agent_id, key)
        if original is None:
            raise
        return _replay(uow, original, fingerprint)
    return _sent_direct(
        thread, reused, _deliver(uow, caller, thread, message, recipients, carried, held)
    )


def _sent_direct(thread: Thread, reused: Thread | None, sent: SendResult) -> SendResult:
    """A direct send's answer says whether it went on in an open thread (``reused_thread``).
    A held direct send's new thread is held with its message: its title (given, or the
    message's first line) and ref are the sender's and the operator's until the approval. (A
    thread it went on in stays as it was: only the message waits.)"""
    if reused is not None:
        sent.reused_thread = True
    elif sent.held:
        thread.approval = HELD
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
    held: bool = False,
) -> Message:
    """A message to store (:func:`_store`); held, if the approval gate holds it."""
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
        idempotency_key=None,
        content_hash=None,
        ttl_seconds=ttl,
        expires_at=None if ttl is None else now + timedelta(seconds=ttl),
        approval=HELD if held else None,
    )


# A message's columns, stored with one INSERT built once (the row is the send's own: it is read
# back from the object, never through the session).
_MESSAGE_COLUMNS = tuple(column.key for column in Message.__table__.columns)
_INSERT_MESSAGE = insert(Message)


def _store(uow: UnitOfWork, message: Message) -> None:
    """Insert ``message`` (after anything the session holds that it refers to, its new thread)."""
    if uow.session.new:
        uow.session.flush()
    values = {name: getattr(message, name) for name in _MESSAGE_COLUMNS}
    uow.session.connection().execute(_INSERT_MESSAGE, values)


def _deliver(
    uow: UnitOfWork,
    caller: Caller,
    thread: Thread,
    message: Message,
    recipients: Sequence[Recipient],
    carried: Sequence[Checked] = (),
    held: bool = False,
) -> SendResult:
    """One delivery per recipient, for a message just stored (and its attachments, here): one
    statement however many. Then the caps and the rate limit are checked (a refusal rolls the
    whole send back, so nothing is stored): last, so that the rows they lock are held for as
    short a time as possible. ``held``: the approval gate holds the message; its deliveries are
    then stored held (stamped, never published, nobody woken) until the operator approves
    (inbots.approvals)."""
    now = message.created_at
    stored = attachments.store(uow.session, caller.workspace_id, message.id, carried)
    # A webhook recipient's delivery is published in the same breath (if its webhook receives
    # message.created): the publish is recorded here (so the renotify sweep sees it if the broker
    # never gets it) and sent after commit.
    pushed = [
        not held
        and bool(r.webhook_url)
        and subscriptions.subscribed(r.webhook_events, MESSAGE_CREATED)
        for r in recipients
    ]
    rank = priority_rank(message.priority)
    rows = [
        {
            "id": new_id("dlv"),
            "workspace_id": caller.workspace_id,
            "message_id": message.id,
            "thread_id": thread.id,
            "recipient_id": r.id,
            "priority_rank": rank,
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
    connection = uow.session.connection()
    connection.execute(_INSERT_DELIVERIES, rows)  # one executemany, whatever the recipients
    if not held:  # held mail is no activity its recipients may see: the approval moves it
        connection.execute(_THREAD_ACTIVE, {"thread": thread.id, "at": now})
        set_committed_value(thread, "last_activity_at", now)
    uow.session.flush()
    skipped = governance.admit(uow, caller, message.id, [(r.id, r.username) for r in recipients])
    left_out = [
        Skipped(recipient=r.username, reason=skipped[r.id]) for r in recipients if r.id in skipped
    ]
    if skipped:  # at a cap, left out of a send to several: their deliveries are gone
        kept = [(row, r) for row, r in zip(rows, recipients, strict=True) if r.id not in skipped]
        rows, recipients = [row for row, _ in kept], [r for _, r in kept]

    recipient_ids = [r.id for r in recipients]
    jobs = [Job(str(row["id"]), 1, "publish") for row in rows if row["publish_count"]]
    uow.after_commit(_accepted(message.id, thread.id, len(rows), len(jobs)))
    if held:
        approvals.on_held(uow, message, len(rows))
    else:
        uow.wake(recipient_ids)
        uow.enqueue(*jobs)
    read = to_read(message, caller.username)
    read.attachments = stored
    return SendResult(
        message=read,
        deliveries=[
            DeliveryBrief(id=row["id"], recipient=r.username, state="held" if held else "accepted")
            for row, r in zip(rows, recipients, strict=True)
        ],
        duplicate=False,
        held=held,
        skipped=left_out,
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
