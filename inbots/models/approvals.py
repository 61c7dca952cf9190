from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Text
from sqlalchemy.orm import Mapped, Session, mapped_column

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

    def holds(self, kind: str | None, priority: str | None, username: str) -> bool:
        """Whether this policy holds what ``username`` writes: a message of ``kind`` and
        ``priority``, or (both None) what is no message, such as a thread it opens or its brief,
        which only the senders list holds."""
        return (
            (kind is not None and kind in split(self.kinds))
            or (priority is not None and priority in split(self.priorities))
            or username in split(self.senders)
        )


def split(stored: str) -> list[str]:
    """One of the policy's lists, as stored (comma-joined), as a list."""
    return [v for v in stored.split(",") if v]


def holds_writer(session: Session, workspace_id: str, username: str) -> bool:
    """Whether the workspace's policy holds what ``username`` writes that is no message (a
    thread it opens, its brief): it is among the policy's senders."""
    policy = session.get(ApprovalPolicy, workspace_id)
    return policy is not None and policy.holds(None, None, username)
