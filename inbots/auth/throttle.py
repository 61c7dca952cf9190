"""The sign-in throttle: failed dashboard sign-ins counted over a sliding window, per client
address and for the whole deployment, in the database so every web process sees the same count.

A wrong token names no workspace (tokens carry no workspace id, and telling which workspace it
was meant for would tell a guesser which tokens exist), so the per-workspace bucket is the
deployment's: every failed sign-in counts toward ``INBOTS_SIGNIN_MAX_FAILURES`` as well as its
address's ``INBOTS_SIGNIN_MAX_FAILURES_PER_ADDRESS``. While either is full, sign-ins are refused
before the token is even looked at (the right token too) until the oldest failure in the full
bucket leaves the window (``INBOTS_SIGNIN_WINDOW_SECONDS``).

The count and the new failure are read and written under one lock (PostgreSQL: a transaction
advisory lock; SQLite: its one writer), so a burst of parallel guesses gets no more tries than a
sequential one. Only failures are stored, never a token; a throttled attempt stores nothing,
which bounds the table by the two limits.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select, text

from inbots.db.uow import UnitOfWork
from inbots.kit.ids import new_id
from inbots.models.auth import SigninFailure

SCOPE_ADDRESS = "address"
SCOPE_DEPLOYMENT = "deployment"
_LOCK_KEY = 0x1B075161  # any constant: the one advisory lock sign-ins take on PostgreSQL


@dataclass(frozen=True)
class Held:
    """Sign-ins are held back: which bucket is full, and when it has room again."""

    scope: str
    retry_after_seconds: float


def client_bucket(host: str | None) -> str:
    """The address a failure is counted against: the IPv4 address, or the IPv6 /64 (one host
    usually holds a whole /64, so counting single IPv6 addresses would count nothing)."""
    if not host:
        return "unknown"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host[:64]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def serialize(uow: UnitOfWork) -> None:
    """Hold the sign-in lock for the rest of the transaction (SQLite's writer lock already is
    one: write units begin IMMEDIATE)."""
    if uow.session.get_bind().dialect.name == "postgresql":
        uow.session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})


def held(uow: UnitOfWork, bucket: str, now: datetime) -> Held | None:
    """Whether sign-ins from ``bucket`` are held back now, and until when."""
    settings = uow.settings
    window = timedelta(seconds=settings.signin_window_seconds)
    since = now - window
    for scope, limit, where in (
        (
            SCOPE_ADDRESS,
            settings.signin_max_failures_per_address,
            (SigninFailure.address == bucket, SigninFailure.failed_at > since),
        ),
        (SCOPE_DEPLOYMENT, settings.signin_max_failures, (SigninFailure.failed_at > since,)),
    ):
        count = uow.session.scalar(select(func.count()).select_from(SigninFailure).where(*where))
        if count is None or count < limit:
            continue
        # Room again once enough of the oldest failures have left the window.
        freed_by = uow.session.scalar(
            select(SigninFailure.failed_at)
            .where(*where)
            .order_by(SigninFailure.failed_at)
            .offset(count - limit)
            .limit(1)
        )
        wait = (freed_by + window - now).total_seconds() if freed_by else window.total_seconds()
        return Held(scope, max(wait, 1.0))
    return None


def record_failure(uow: UnitOfWork, bucket: str, now: datetime) -> None:
    """Count one failed sign-in from ``bucket``, and forget failures that left the window."""
    since = now - timedelta(seconds=uow.settings.signin_window_seconds)
    uow.session.execute(delete(SigninFailure).where(SigninFailure.failed_at <= since))
    uow.session.add(SigninFailure(id=new_id("sif"), address=bucket, failed_at=now))
    uow.session.flush()
