from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, ForeignKey, Index, String, Text, or_, text
from sqlalchemy.orm import Mapped, mapped_column

from inbots.models.base import Base, UTCDateTime
from inbots.vocabulary import APPROVED

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
        # The operator's approval queue (GET /v1/approvals): threads held, oldest first.
        Index(
            "ix_threads_held",
            "workspace_id",
            "created_at",
            sqlite_where=text("approval = 'held'"),
            postgresql_where=text("approval = 'held'"),
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
    # The approval gate: None (never held), "held", "approved" or "rejected". A thread its
    # opener opened while the policy held its sends (or a held direct send's thread) is held:
    # its title, goal, ref and participants are seen only by its opener and the operator until
    # the operator approves it or one of its messages; every message posted in it meanwhile is
    # held (inbots.approvals).
    approval: Mapped[str | None] = mapped_column(String(16))

    @classmethod
    def released(cls) -> ColumnElement[bool]:
        """SQL: visible to its participants (never held, or approved)."""
        return or_(cls.approval.is_(None), cls.approval == APPROVED)

    @property
    def is_released(self) -> bool:
        return self.approval is None or self.approval == APPROVED


class Participant(Base):
    __tablename__ = "participants"

    thread_id: Mapped[str] = mapped_column(ForeignKey("threads.id"), primary_key=True)
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id"), primary_key=True, index=True)
    added_at: Mapped[datetime] = mapped_column(UTCDateTime())
    added_by_id: Mapped[str | None] = mapped_column(ForeignKey("agents.id"))
