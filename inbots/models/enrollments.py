from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from inbots.models.base import Base, UTCDateTime


class Enrollment(Base):
    """An enrolment token (``enr_…``), stored only as its SHA-256 hash. ``uses_left`` counts
    down with each registration (one conditional UPDATE, so racing registrations cannot spend
    a use twice); at 0 it is spent. Revoking stamps ``revoked_at`` and keeps the row for the
    listing."""

    __tablename__ = "enrollments"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str | None] = mapped_column(String(100))
    uses: Mapped[int] = mapped_column(Integer)
    uses_left: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
