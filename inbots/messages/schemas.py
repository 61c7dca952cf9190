from __future__ import annotations

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from inbots.attachments.schemas import AttachmentCreate, AttachmentRead
from inbots.deliveries.schemas import OUTCOMES, DeliveryRead, Receipt, ReplyAcknowledged
from inbots.errors import IDEMPOTENCY_KEY, Invalid, Pointing
from inbots.kit.schema import Model, Request, Timestamp, choice
from inbots.limits import bounds
from inbots.threads.schemas import ThreadRead
from inbots.vocabulary import KINDS, PRIORITIES


class MessageCreate(Request):
    """A message to post. Each field is declared here once: the HTTP body, the MCP
    ``send_message`` arguments and both schemas come from it."""

    body: str = Field(
        description="Point at files or URLs rather than pasting them.",
        json_schema_extra=bounds(minLength=1, maxLength="message_body_max"),
    )
    summary: str | None = Field(
        default=None,
        description="One line: what you ask. Required for a body over {summary_required_over} "
        "characters.",
        json_schema_extra=bounds(maxLength="summary_max"),
    )
    kind: str | None = Field(
        default=None,
        description="Default update.",
        json_schema_extra=choice(*KINDS),
    )
    reply_to: str | None = Field(
        default=None, description="The message (msg_) of this thread you answer."
    )
    priority: str | None = Field(
        default=None,
        description="urgent comes first in inboxes (default normal).",
        json_schema_extra=choice(*PRIORITIES),
    )
    acknowledge: str | None = Field(
        default=None,
        description="With reply_to: also acknowledge your copy of it (this summary as note).",
        json_schema_extra=choice(*OUTCOMES),
    )
    ttl_seconds: int | None = Field(
        default=None,
        description="Seconds until unacknowledged copies expire.",
        json_schema_extra=bounds(minimum="ttl_min_seconds", maximum="ttl_max_seconds"),
    )
    attachments: list[AttachmentCreate] | None = Field(
        default=None,
        description="Files; data in base64.",
        json_schema_extra=bounds(maxItems="attachments_max"),
    )


class NewThread(Request):
    """What a send that opens its own thread says about that thread (besides who is in it)."""

    title: str | None = Field(
        default=None,
        description="With to: the thread's title (default: the summary).",
        json_schema_extra=bounds(maxLength="thread_title_max"),
    )
    ref: str | None = Field(
        default=None,
        description="With to: a task reference; the open thread of the same people and ref "
        "goes on.",
        json_schema_extra=bounds(minLength=1, maxLength="thread_ref_max"),
    )


class DirectMessageCreate(MessageCreate, NewThread):
    """``POST /v1/messages``: open a new thread with these recipients and post its first
    message, in one transaction."""

    to: list[str] = Field(
        description='Usernames of the recipients (from list_agents), or ["*"] for every agent '
        "of the workspace that is not archived, other than you. A new thread is opened with "
        "them and you.",
        json_schema_extra=bounds(minItems=1),
    )


class ForTheSender(BaseModel):
    """``receipts`` is for a message's sender only: left out of the JSON where it is None, so a
    message (and a read of one) looks to everybody else exactly as it always did."""

    # No return annotation on purpose: with one, the JSON schema would become a bare object.
    @model_serializer(mode="wrap")
    def _receipts_only_for_the_sender(self, handler: SerializerFunctionWrapHandler):
        data = handler(self)
        if isinstance(data, dict) and "receipts" in data and data["receipts"] is None:
            del data["receipts"]
        return data


class MessageRead(Model, ForTheSender):
    id: str
    thread_id: str
    sender: str
    kind: str
    priority: str
    summary: str | None
    body: str
    reply_to: str | None
    created_at: Timestamp
    ttl_seconds: int | None = None
    expires_at: Timestamp | None = None
    # What it carries (metadata; the bytes at GET /v1/attachments/{id}); absent when none.
    attachments: list[AttachmentRead] = Field(
        default_factory=list, exclude_if=lambda value: not value
    )
    # In the thread history, to the message's sender only: each recipient's receipt.
    receipts: list[Receipt] | None = None


class DeliveryBrief(Model):
    id: str
    recipient: str
    state: str


class Skipped(Model):
    """A recipient a send to several left out, having no delivery: ``inbox_full`` (it holds
    ``INBOTS_CAP_PER_RECIPIENT`` unacknowledged messages) or ``pair_full`` (it holds
    ``INBOTS_CAP_PER_PAIR`` of the sender's)."""

    recipient: str
    reason: str


class SendResult(BaseModel):
    message: MessageRead
    deliveries: list[DeliveryBrief]
    duplicate: bool
    # The workspace's approval policy held it: nobody sees it until the operator approves it.
    held: bool = False
    # A reply sent with acknowledge: the caller's delivery of reply_to, acknowledged with it.
    acknowledged: ReplyAcknowledged | None = Field(
        default=None, exclude_if=lambda value: value is None
    )
    # Recipients at a cap, left out of a send to several (absent when none was).
    skipped: list[Skipped] = Field(default_factory=list, exclude_if=lambda value: not value)
    # A send with to and ref went on in the open thread of the same people and ref, instead of
    # opening one (absent otherwise).
    reused_thread: bool = Field(default=False, exclude_if=lambda value: not value)


class History(BaseModel):
    items: list[MessageRead]
    next_cursor: str | None


class MessageWithDelivery(ForTheSender):
    """One message: the caller's delivery of it (null for its sender, or one who joined later),
    and for its sender every recipient's receipt (``receipts``; absent for anyone else)."""

    message: MessageRead
    delivery: DeliveryRead | None
    receipts: list[Receipt] | None = None


class OutboxItem(BaseModel):
    """A message the caller sent, with every recipient's receipt."""

    message: MessageRead
    receipts: list[Receipt]


class Outbox(BaseModel):
    """``GET /v1/outbox``: one page, newest first; ``next_cursor`` continues (null at the end)."""

    items: list[OutboxItem]
    next_cursor: str | None


def idempotency_key(key: str | None, maximum: int) -> str | None:
    """The idempotency-key rule, whichever edge it came from (the HTTP header, the MCP
    argument): 1 to ``maximum`` visible ASCII characters, no spaces."""
    if key is None:
        return None
    if not 1 <= len(key) <= maximum or not all("!" <= c <= "~" for c in key):
        raise Invalid(
            Pointing(
                "{} must be 1 to {maximum} visible ASCII characters (no spaces).",
                IDEMPOTENCY_KEY,
                maximum=maximum,
            ),
            field="idempotency_key",
        )
    return key


class MessageWithReceipts(MessageRead):
    deliveries: list[DeliveryRead]


class ThreadDetail(ThreadRead):
    """The operator's view: every message with each recipient's receipt."""

    messages: list[MessageWithReceipts] | None = None
