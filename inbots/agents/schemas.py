from __future__ import annotations

from pydantic import BaseModel, Field

from inbots.kit.schema import Model, Request, Timestamp
from inbots.limits import bounds
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


class KeyCreate(Request):
    label: str | None = Field(
        default=None,
        description="What the key is for (shown in lists), like 'laptop' or 'ci'; at most "
        "{key_label_max} characters.",
        json_schema_extra=bounds(maxLength="key_label_max"),
    )


class KeyRead(Model):
    """An agent key without the key: only its hash is stored. ``hint`` is its first characters
    (``agt_AbCd``), to tell keys apart; ``current`` marks the key making this call."""

    id: str
    label: str | None
    hint: str
    created_at: Timestamp
    last_used_at: Timestamp | None
    current: bool


class KeyCreated(Model):
    """A new agent key: ``api_key`` is shown in this answer only."""

    id: str
    label: str | None
    api_key: str
    hint: str
    created_at: Timestamp


class KeyList(BaseModel):
    items: list[KeyRead]


class SessionRead(Model):
    """One client of an agent: an MCP session or a client sending ``X-Inbots-Session``."""

    id: str
    label: str | None
    client: str | None
    first_seen_at: Timestamp
    last_seen_at: Timestamp
    active: bool


class SessionList(BaseModel):
    items: list[SessionRead]
