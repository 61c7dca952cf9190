from __future__ import annotations

from pydantic import BaseModel

from inbots.kit.schema import Model, Request, Timestamp
from inbots.webhooks.schemas import WebhookRead


class AgentCreate(Request):
    name: str
    description: str | None = None
    webhook_url: str | None = None


class AgentRead(Model):
    id: str
    name: str
    username: str
    description: str | None
    status: str
    created_at: Timestamp
    last_seen_at: Timestamp | None
    active: bool
    never_connected: bool
    webhook_url: str | None
    unread: int


class AgentCreated(AgentRead):
    api_key: str
    webhook: WebhookRead | None


class AgentList(BaseModel):
    items: list[AgentRead]


class DirectoryEntry(Model):
    username: str
    description: str | None
    active: bool
    last_seen_at: Timestamp | None


class Directory(BaseModel):
    items: list[DirectoryEntry]
