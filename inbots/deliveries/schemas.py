from __future__ import annotations

from pydantic import BaseModel

from inbots.kit.schema import Model, Request, Timestamp


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
    acknowledged_at: Timestamp | None
    failed_at: Timestamp | None
    failure_reason: str | None
    stalled_at: Timestamp | None
    publish_count: int
    last_published_at: Timestamp | None
    next_attempt_at: Timestamp | None
    outcome: str | None
    note: str | None


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
    sender: str
    kind: str
    summary: str
    sent_at: Timestamp
    state: str


class Inbox(BaseModel):
    items: list[InboxItem]
    returned: int
    waiting: int
    more: bool


class AckRequest(Request):
    ids: list[str]
    outcome: str | None = None
    note: str | None = None


class AckResult(BaseModel):
    acknowledged: list[str]
    already: list[str]
    not_found: list[str]
