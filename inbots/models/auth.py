"""Dashboard sessions and failed sign-ins: the operator's browser state that every web process
must see, so it lives in the database."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from inbots.models.base import Base, UTCDateTime


class DashboardSession(Base):
    """One signed-in browser. The cookie holds a random key (signed); the row holds only its
    SHA-256 hash, so neither a stolen backup nor a leaked signing key alone opens a session.
    Signing out stamps ``revoked_at``; revoking the operator token stamps every session of it."""

    __tablename__ = "dashboard_sessions"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    token_id: Mapped[str] = mapped_column(
        ForeignKey("operator_tokens.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class SigninFailure(Base):
    """One refused dashboard sign-in: from where and when. Counted over a sliding window per
    client address and for the whole deployment (see :mod:`inbots.auth.throttle`); rows older
    than the window are deleted as new ones come."""

    __tablename__ = "signin_failures"
    __table_args__ = (Index(None, "address", "failed_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    address: Mapped[str] = mapped_column(String(64))
    failed_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
