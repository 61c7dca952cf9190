from __future__ import annotations

from pydantic import Field

from inbots.kit.schema import Model, Request, Timestamp

PATHS_MAX = 100
PATH_MAX = 512
TTL_MIN = 60
TTL_MAX = 86_400
TTL_DEFAULT = 3_600


class ReservationCreate(Request):
    """Reserve repository paths: "I am changing these until the reservation expires"."""

    paths: list[str] = Field(description="Paths or globs: a/b.py, docs/*.md, src/**")
    ttl_seconds: int | None = Field(default=None, description=f"{TTL_MIN}-{TTL_MAX}")
    exclusive: bool = True
    reason: str | None = None


class ReservationRenew(Request):
    """Extend an active reservation from now."""

    ttl_seconds: int | None = Field(
        default=None,
        description=f"{TTL_MIN} to {TTL_MAX} seconds from now (default {TTL_DEFAULT}).",
    )


class ReservationCheck(Request):
    """Paths to check against the other agents' exclusive reservations."""

    paths: list[str] = Field(description=f"1 to {PATHS_MAX} repository-relative paths or globs.")


class ReservationRead(Model):
    """A reservation: ``agent`` intends to change ``paths`` until ``expires_at``. Active while
    ``released_at`` is null and ``expires_at`` is in the future."""

    id: str
    agent: str
    paths: list[str]
    exclusive: bool
    reason: str | None
    created_at: Timestamp
    expires_at: Timestamp
    released_at: Timestamp | None


class ReservationConflictRead(Model):
    """One of your paths (``path``) that another agent's active reservation holds: its
    ``pattern``, holder (``held_by``), id, expiry and reason."""

    path: str
    held_by: str
    pattern: str
    reservation_id: str
    expires_at: Timestamp
    reason: str | None


class ReservationResult(Model):
    """A reservation request's outcome: the reservation, or (nothing reserved) the conflicts."""

    reservation: ReservationRead | None
    conflicts: list[ReservationConflictRead]


class ConflictList(Model):
    conflicts: list[ReservationConflictRead]


class ReservationPage(Model):
    items: list[ReservationRead]
    next_cursor: str | None


class ReleasedList(Model):
    """The reservations a release ended."""

    released: list[ReservationRead]
