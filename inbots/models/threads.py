from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from inbots.models.base import Base, UTCDateTime

OPEN = "open"
CLOSE_REQUESTED = "close_requested"
CLOSED = "closed"
STATUSES = (OPEN, CLOSE_REQUESTED, CLOSED)


class Thread(Base):
    __tablename__ = "threads"
    __table_args__ = (
        Index(None, "workspace_id", "last_activity_at"),
        Index(None, "workspace_id", "ref"),  # GET /v1/threads?ref=
        # Retention: closed threads, oldest close first.
        Index(
            "ix_threads_closed",
            "closed_at",
            sqlite_where=text("closed_at IS NOT NULL"),
            postgresql_where=text("closed_at IS NOT NULL"),
        ),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id"))
    title: Mapped[str] = mapped_column(String(400))
    goal: Mapped[str | None] = mapped_column(Text)
    # A task reference set at opening (a ticket id, a scan id): what ?ref= finds threads by.
    ref: Mapped[str | None] = mapped_column(String(128))
    status: Mapped[str] = mapped_column(String(20), default=OPEN)
    opened_by_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_activity_at: Mapped[datetime] = mapped_column(UTCDateTime())
    close_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class Participant(Base):
    __tablename__ = "participants"

    thread_id: Mapped[str] = mapped_column(ForeignKey("threads.id"), primary_key=True)
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id"), primary_key=True, index=True)
    added_at: Mapped[datetime] = mapped_column(UTCDateTime())
    added_by_id: Mapped[str | None] = mapped_column(ForeignKey("agents.id"))
