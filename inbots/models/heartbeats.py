from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from inbots.models.base import Base, UTCDateTime


class Heartbeat(Base):
    """The last finished run of one periodic job, by the job's name. Written by the job wherever
    it runs (a Celery worker for beat's schedule, the embedded timer), read by every web process:
    a job that stopped running shows as a growing age, not as silence."""

    __tablename__ = "heartbeats"

    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    beat_at: Mapped[datetime] = mapped_column(UTCDateTime())
