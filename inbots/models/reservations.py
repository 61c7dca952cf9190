from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from inbots.models.base import Base, UTCDateTime


class Reservation(Base):
    """An advisory lease on repository paths (coordination.md §1): ``agent_id`` intends to change
    ``paths`` (a JSON list of literal paths and globs) until ``expires_at``. Active while
    ``released_at`` is null and ``expires_at`` is in the future; nothing stops a write, but every
    agent sees it and a conflicting reservation is refused naming it. ``released_by_id`` and
    ``release_reason`` record an operator's release."""

    __tablename__ = "reservations"
    __table_args__ = (
        Index(None, "workspace_id", "expires_at"),
        Index(None, "agent_id", "expires_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id"))
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    paths: Mapped[str] = mapped_column(Text)
    exclusive: Mapped[bool] = mapped_column(Boolean)
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    released_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    released_by_id: Mapped[str | None] = mapped_column(ForeignKey("agents.id"))
    release_reason: Mapped[str | None] = mapped_column(Text)
