from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from inbots.attachments.schemas import AttachmentRead
from inbots.kit.schema import Model, Request, Timestamp, choice
from inbots.limits import bounds

OUTCOMES = ("done", "declined")
INBOX_STATUSES = ("unacked", "acked", "all")  # GET /v1/inbox?status=, check_inbox(status)


class DeliveryRead(Model):
    id: str
    message_id: str
    thread_id: str
    recipient: str
    state: str
    accepted_at: Timestamp
    notified_at: Timestamp | None
    delivered_at: Timestamp | None
    fetched_at: Timestamp | None
    working_at: Timestamp | None  # the recipient's last "working on it" heartbeat
    working_note: str | None  # and its note, if it gave one
    acknowledged_at: Timestamp | None
    failed_at: Timestamp | None
    failure_reason: str | None
    stalled_at: Timestamp | None
    expired_at: Timestamp | None = None
    publish_count: int
    last_published_at: Timestamp | None
    next_attempt_at: Timestamp | None
    outcome: str | None
    note: str | None
    # The approval gate: present only on deliveries of a held message.
    held_at: Timestamp | None = Field(default=None, exclude_if=lambda value: value is None)
    approved_at: Timestamp | None = Field(default=None, exclude_if=lambda value: value is None)
    rejected_at: Timestamp | None = Field(default=None, exclude_if=lambda value: value is None)
    rejection_reason: str | None = Field(default=None, exclude_if=lambda value: value is None)


class AttemptRead(Model):
    number: int
    publish: int
    trigger: str
    url: str
    started_at: Timestamp
    duration_ms: int | None
    status_code: int | None
    reason: str
    response_excerpt: str | None


class DeliveryDetail(DeliveryRead):
    attempts: list[AttemptRead]


class DeliveryPage(BaseModel):
    items: list[DeliveryRead]
    next_cursor: str | None


class InboxItem(Model):
    delivery_id: str
    message_id: str
    thread_id: str
    thread_title: str
    thread_ref: str | None
    sender: str
    kind: str
    priority: str
    summary: str
    sent_at: Timestamp
    state: str
    # Only in a page asked for with bodies (include=body); absent, not null, otherwise.
    body: str | None = Field(default=None, exclude_if=lambda value: value is None)
    # With the body: the message's attachments (metadata), absent when it has none.
    attachments: list[AttachmentRead] = Field(
        default_factory=list, exclude_if=lambda value: not value
    )


class Inbox(BaseModel):
    items: list[InboxItem]
    returned: int
    waiting: int  # every unacknowledged delivery of the caller, whatever the page's filters
    more: bool
    # The next page (the same filters and order) when there is one; null at the end.
    next_cursor: str | None = None


class Receipt(Model):
    """What became of a message for one recipient, as its sender sees it (the outbox, the
    sender's read of its own message, its thread history)."""

    delivery_id: str
    recipient: str
    state: str
    delivered_at: Timestamp | None
    fetched_at: Timestamp | None
    working_at: Timestamp | None = None  # the recipient's last "working on it" heartbeat
    working_note: str | None = None  # the note it gave with that heartbeat, if any
    acknowledged_at: Timestamp | None
    outcome: str | None
    note: str | None  # the acknowledgement's note
    # The approval gate: present only on deliveries of a held message (held_at), once the
    # operator approved it (approved_at) or rejected it (rejected_at, rejection_reason).
    held_at: Timestamp | None = Field(default=None, exclude_if=lambda value: value is None)
    approved_at: Timestamp | None = Field(default=None, exclude_if=lambda value: value is None)
    rejected_at: Timestamp | None = Field(default=None, exclude_if=lambda value: value is None)
    rejection_reason: str | None = Field(default=None, exclude_if=lambda value: value is None)


class ReceiptEvent(Receipt):
    """A receipt a long-poll wakes its sender for (``events=receipts``): a recipient acknowledged
    one of its messages (``outcome`` done or declined, with the ``note``)."""

    event_id: str
    message_id: str
    thread_id: str


class Waited(Inbox):
    """The long-poll's answer: new mail (``items``, as in the inbox) and, when asked for, the
    receipts of the caller's own messages that it has not been shown yet (``receipts``)."""

    receipts: list[ReceiptEvent] = Field(default_factory=list)


class AckRequest(Request):
    """Acknowledgements: done with these messages (acted on them, or declined)."""

    ids: list[str] = Field(
        description="dlv_ or msg_ ids.",
        json_schema_extra=bounds(minItems=1, maxItems="ack_batch_max"),
    )
    outcome: str | None = Field(
        default=None,
        description="done: you acted; declined: you will not.",
        json_schema_extra=choice(*OUTCOMES),
    )
    note: str | None = Field(
        default=None,
        description="For the sender, e.g. why you declined.",
        json_schema_extra=bounds(maxLength="note_max"),
    )


class ReadRequest(Request):
    """Read one message and, with ``ack``, acknowledge the caller's copy of it in the same call
    (``POST /v1/messages/{id}/read``): the way to acknowledge on reading."""

    ack: str | None = Field(
        default=None,
        description="done or declined: acknowledge it too; left out, only read it.",
        json_schema_extra=choice(*OUTCOMES),
    )
    note: str | None = Field(
        default=None,
        description="With ack: for the sender, e.g. why you declined.",
        json_schema_extra=bounds(maxLength="note_max"),
    )


class WorkingRequest(Request):
    """A "working on it" heartbeat for one delivery (``POST /v1/deliveries/{id}/working``)."""

    note: str | None = Field(
        default=None,
        description="How it is going, for the sender.",
        json_schema_extra=bounds(maxLength="note_max"),
    )


def _expired_field() -> Any:
    """``expired``: ids whose mail expired unacknowledged (its message's ttl_seconds passed), no
    longer the caller's. Written only when it holds an id, so every answer that meets no
    expired mail keeps the shape it had before expiry existed."""
    return Field(
        default_factory=list,
        exclude_if=lambda ids: not ids,
        description="Ids whose mail expired unacknowledged: no longer yours (only when any).",
    )


class WorkingResult(BaseModel):
    """``mark_working``: each id's delivery as it stands after the heartbeat, or why not."""

    working: list[DeliveryRead]  # heartbeats taken (working_at is now)
    already_acknowledged: list[str]  # done already: nothing to work on (HTTP answers 409)
    not_found: list[str]  # not a delivery of yours in a thread that is not closed
    expired: list[str] = _expired_field()  # (the single HTTP call answers 410 expired)


class ReplyAcknowledged(BaseModel):
    """A send's ``acknowledged``: the caller's delivery of the message it answers (``reply_to``),
    acknowledged with the send (``acknowledge``), and its outcome."""

    delivery_id: str
    outcome: str | None  # None only for a delivery acknowledged before, without an outcome


class AckResult(BaseModel):
    acknowledged: list[str]
    already: list[str]
    not_found: list[str]
    expired: list[str] = _expired_field()  # not acknowledged now


# notified: its URL answered 2xx (after any failure); failed: pushing it gave up (after any 2xx);
# pending: a push is owed; unsent: none was wanted (no webhook, or not subscribed to its type).
EVENT_STATES = ("notified", "failed", "pending", "unsent")


class EventRead(Model):
    """One event as the operator sees it: who was told of what, and how its push went."""

    id: str
    type: str
    recipient: str
    actor: str
    thread_id: str | None  # None for an operator's alert (its fields are in its notification)
    message_id: str | None
    delivery_id: str | None
    outcome: str | None
    note: str | None
    created_at: Timestamp
    shown_at: Timestamp | None
    state: str
    notified_at: Timestamp | None
    failed_at: Timestamp | None
    failure_reason: str | None
    publish_count: int
    last_published_at: Timestamp | None
    next_attempt_at: Timestamp | None
    # An operator's alert: its fields as its notification carries them (what it is about: the
    # thread, message, delivery or agent, and why); null for an agent's event.
    alert: dict[str, Any] | None = None


class EventDetail(EventRead):
    attempts: list[AttemptRead]


class EventPage(BaseModel):
    items: list[EventRead]
    next_cursor: str | None
