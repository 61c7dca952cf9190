from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, text
from sqlalchemy.orm import Mapped, mapped_column

from inbots.models.base import Base, UTCDateTime


class AlertWindow(Base):
    """How one kind of alert about one subject is paced (``INBOTS_ALERT_INTERVAL_SECONDS``): when
    the last one was raised, and how many of its events have happened since, unreported. A
    subject is the agent a delivery alert is about, or the workspace's operator row for an alert
    about the whole installation (``queue.backlog``, ``workers.down``)."""

    __tablename__ = "alert_windows"

    subject_id: Mapped[str] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
    )
    type: Mapped[str] = mapped_column(String(40), primary_key=True)
    alerted_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    unreported: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    since: Mapped[datetime | None] = mapped_column(UTCDateTime())  # the first unreported one
