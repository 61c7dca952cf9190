from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Text
from sqlalchemy.orm import Mapped, mapped_column

from inbots.models.base import Base, UTCDateTime


class ApprovalPolicy(Base):
    """A workspace's approval policy: which messages are held for the operator. Each list is
    stored joined by commas (kinds, priorities and usernames never hold one); the empty string
    is an empty list. No row is the default: nothing is held."""

    __tablename__ = "approval_policies"

    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id"), primary_key=True)
    kinds: Mapped[str] = mapped_column(Text, default="")
    priorities: Mapped[str] = mapped_column(Text, default="")
    senders: Mapped[str] = mapped_column(Text, default="")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
