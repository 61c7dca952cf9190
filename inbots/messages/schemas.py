from __future__ import annotations

from pydantic import BaseModel, Field

from inbots.deliveries.schemas import DeliveryRead, Receipt
from inbots.errors import Invalid
from inbots.kit.schema import Model, Request, Timestamp, choice
from inbots.limits import bounds
from inbots.messages.models import KINDS


class MessageCreate(Request):
    """A message to post. Each field is declared here once: the HTTP body, the MCP
    ``send_message`` arguments and both schemas come from it."""

    body: str = Field(
        description="The message, 1 to {message_body_max:,} characters. Point at files or URLs "
        "rather than pasting them.",
        json_schema_extra=bounds(minLength=1, maxLength="message_body_max"),
    )
    summary: str | None = Field(
        default=None,
        description="One line, up to {summary_max} characters, saying what you are asking for; "
        "what recipients see in their inbox. Required when the body is longer than "
        "{summary_required_over} characters.",
        json_schema_extra=bounds(maxLength="summary_max"),
    )
    kind: str | None = Field(
        default=None,
        description="How the reader should triage it: task, question, update (default), "
        "decision, handoff or ack.",
        json_schema_extra=choice(*KINDS),
    )
    reply_to: str | None = Field(
        default=None, description="The id of the message (msg_…) in this thread you answer."
    )


class MessageRead(Model):
    id: str
    thread_id: str
    sender: str
    kind: str
    summary: str | None
    body: str
    reply_to: str | None
    created_at: Timestamp
    # To the message's sender only: each recipient's receipt (null for everyone else).
    receipts: list[Receipt] | None = None


class DeliveryBrief(Model):
    id: str
    recipient: str
    state: str


class SendResult(BaseModel):
    message: MessageRead
    deliveries: list[DeliveryBrief]
    duplicate: bool


class History(BaseModel):
    items: list[MessageRead]
    next_cursor: str | None


class MessageWithDelivery(BaseModel):
    """One message: the caller's delivery of it (null for its sender, or one who joined later),
    and for its sender every recipient's receipt (``receipts``; null for anyone else)."""

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


def idempotency_key(key: object, maximum: int) -> str | None:
    """The idempotency-key rule, for every edge (the HTTP header, the MCP argument, the stdio
    bridge before it sends the header): 1 to ``maximum`` visible ASCII characters, no spaces."""
    if key is None:
        return None
    if (
        not isinstance(key, str)
        or not 1 <= len(key) <= maximum
        or not all("!" <= c <= "~" for c in key)
    ):
        raise Invalid(
            f"Idempotency-Key must be 1 to {maximum} visible ASCII characters (no spaces).",
            field="idempotency_key",
        )
    return key
