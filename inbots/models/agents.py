from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from inbots.models.base import Base, UTCDateTime

KIND_AGENT = "agent"
KIND_OPERATOR = "operator"
# What the directory calls each kind: agents are agents, the operator is the workspace's person.
KIND_PERSON = "person"
OPERATOR_USERNAME = "operator"


ARCHIVED = "archived"  # an archived agent's status


class Agent(Base):
    """A username; its keys are rows of ``agent_keys``. The workspace's operator has a row too
    (``kind='operator'``, username ``operator``, no key): it is a participant, sender and
    recipient like any agent, which keeps threads and deliveries to one shape. Listings of
    agents leave it out."""

    __tablename__ = "agents"
    __table_args__ = (
        UniqueConstraint("workspace_id", "username"),
        Index(None, "workspace_id", "kind", "last_seen_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id"))
    kind: Mapped[str] = mapped_column(String(16), default=KIND_AGENT)
    username: Mapped[str] = mapped_column(String(32))
    description: Mapped[str | None] = mapped_column(String(400))
    # Unused since migration 0013 moved every key to agent_keys (downgrade fills it again).
    key_hash: Mapped[str | None] = mapped_column(String(64), unique=True)
    status: Mapped[str] = mapped_column(String(16), default="active")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    archived_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_seen_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    webhook_url: Mapped[str | None] = mapped_column(String(2048))
    webhook_secret: Mapped[str | None] = mapped_column(String(128))
    webhook_previous_secret: Mapped[str | None] = mapped_column(String(128))
    webhook_previous_secret_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The notification types the webhook receives, comma-joined (inbots.webhooks.subscriptions).
    webhook_events: Mapped[str] = mapped_column(
        String(200), default="message.created", server_default="message.created"
    )
    # Webhook attempts that failed in a row (a success resets it): at
    # INBOTS_ALERT_WEBHOOK_FAILURES the operator is alerted, once a streak (inbots.alerts).
    webhook_failures: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    # What the agent does and how to work with it (Markdown, up to INBOTS_BRIEF_MAX characters);
    # any agent of the workspace may read it (GET /v1/agents/{username}/brief, read_brief).
    brief: Mapped[str | None] = mapped_column(Text)
    brief_updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # Set while the brief waits for the operator (written while the approval policy held the
    # agent's sends): other agents read no brief until the operator approves it.
    brief_held_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    @property
    def is_operator(self) -> bool:
        return self.kind == KIND_OPERATOR

    @property
    def archived(self) -> bool:
        return self.status == ARCHIVED


class AgentKey(Base):
    """One of an agent's API keys, stored only as its SHA-256 hash, with a label and the first
    characters of the key (``hint``) so that a person can tell keys apart. Revoking deletes the
    row: from the next request on, on every web process, the key resolves to no one."""

    __tablename__ = "agent_keys"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), index=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    hint: Mapped[str] = mapped_column(String(16))
    label: Mapped[str | None] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class AgentSession(Base):
    """One client of an agent: an MCP session (``session_key`` is the ``Mcp-Session-Id`` it was
    given) or a client that names itself with ``X-Inbots-Session`` (``session_key`` is
    ``label:<label>``). Upserted when the caller is resolved, at most once per
    ``INBOTS_LAST_SEEN_RESOLUTION_SECONDS``."""

    __tablename__ = "agent_sessions"
    __table_args__ = (
        UniqueConstraint("agent_id", "session_key"),
        Index(None, "agent_id", "last_seen_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    session_key: Mapped[str] = mapped_column(String(220))
    label: Mapped[str | None] = mapped_column(String(200))
    client: Mapped[str | None] = mapped_column(String(200))
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime())
