from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from inbots.deliveries.schemas import AttemptRead
from inbots.kit.schema import Model, Timestamp

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
