from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    ColumnElement,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    or_,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from inbots.models.base import Base, UTCDateTime
from inbots.vocabulary import (  # noqa: F401 (the models' words, named here too)
    APPROVED,
    DEFAULT_KIND,
    HELD,
    KINDS,
    NORMAL,
    PRIORITIES,
    REJECTED,
    URGENT,
    priority_rank,
)


class Message(Base):
    __tablename__ = "messages"
    __table_args__ = (
        # Scoped to the sender; NULL keys never collide, on SQLite as on PostgreSQL.
        UniqueConstraint("sender_id", "idempotency_key"),
        Index(None, "thread_id", "id"),
        Index(None, "sender_id", "id"),  # the sender's outbox, newest first
        # The operator's approval queue (GET /v1/approvals), oldest first.
        Index(
            "ix_messages_held",
            "workspace_id",
            "id",
            sqlite_where=text("approval = 'held'"),
            postgresql_where=text("approval = 'held'"),
        ),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id"))
    thread_id: Mapped[str] = mapped_column(ForeignKey("threads.id"))
    sender_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    kind: Mapped[str] = mapped_column(String(16), default=DEFAULT_KIND)
    priority: Mapped[str] = mapped_column(String(16), default=NORMAL, server_default=NORMAL)
    summary: Mapped[str | None] = mapped_column(String(800))
    body: Mapped[str] = mapped_column(Text)
    reply_to_id: Mapped[str | None] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    idempotency_key: Mapped[str | None] = mapped_column(String(128))
    content_hash: Mapped[str | None] = mapped_column(String(64))
    # The sender's time to live: unacknowledged deliveries expire at expires_at (created_at +
    # ttl_seconds); both null when the message never expires.
    ttl_seconds: Mapped[int | None] = mapped_column(Integer)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The approval gate: None (never held), "held", "approved" or "rejected". Its deliveries
    # carry the stamps; this is what the queue lists and what hides the message from everyone
    # but its sender and the operator while it is held or rejected.
    approval: Mapped[str | None] = mapped_column(String(16))

    @classmethod
    def released(cls) -> ColumnElement[bool]:
        """SQL: visible to its recipients (never held, or approved)."""
        return or_(cls.approval.is_(None), cls.approval == APPROVED)


class CapLedger(Base):
    """What the caps count, kept cheap (``governance.py``): for a recipient (``sender_id`` ""),
    or a recipient and one sender, an upper bound of its deliveries that are unacknowledged,
    unexpired and in threads not closed. Sends add to it; a recount corrects it."""

    __tablename__ = "cap_ledger"

    recipient_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    sender_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    open_count: Mapped[int] = mapped_column(Integer)


class SendBucket(Base):
    """One agent's send rate-limit token bucket (``governance.py``): ``tokens`` as of ``stamp``
    (seconds since the epoch). Updated by one upsert in the sending transaction, so every web
    process shares it and a refused send (rolled back) spends nothing."""

    __tablename__ = "send_buckets"

    agent_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tokens: Mapped[float] = mapped_column(Float)
    stamp: Mapped[float] = mapped_column(Float)
