from __future__ import annotations

from pydantic import BaseModel

from inbots.deliveries.schemas import DeliveryRead
from inbots.kit.schema import Model, Request, Timestamp


class MessageCreate(Request):
    body: str
    summary: str | None = None
    kind: str | None = None
    reply_to: str | None = None


class MessageRead(Model):
    id: str
    thread_id: str
    sender: str
    kind: str
    summary: str | None
    body: str
    reply_to: str | None
    created_at: Timestamp


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
    message: MessageRead
    delivery: DeliveryRead | None
