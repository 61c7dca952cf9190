from __future__ import annotations

from pydantic import BaseModel

from inbots.deliveries.schemas import DeliveryRead
from inbots.kit.schema import Model, Request, Timestamp
from inbots.messages.schemas import MessageRead


class ThreadCreate(Request):
    title: str
    goal: str | None = None
    participants: list[str] = []


class ParticipantAdd(Request):
    username: str


class ThreadRead(Model):
    id: str
    title: str
    goal: str | None
    status: str
    opened_by: str
    participants: list[str]
    created_at: Timestamp
    last_activity_at: Timestamp
    close_requested_at: Timestamp | None
    closed_at: Timestamp | None


class ThreadList(BaseModel):
    items: list[ThreadRead]


class ThreadPage(ThreadList):
    """``GET /v1/threads``: one page."""

    next_cursor: str | None = None  # more threads: pass it back as ?cursor=


class MessageWithReceipts(MessageRead):
    deliveries: list[DeliveryRead]


class ThreadDetail(ThreadRead):
    """The operator's view: every message with each recipient's receipt."""

    messages: list[MessageWithReceipts] | None = None
