"""Time: timezone-aware UTC everywhere, RFC 3339 with a ``Z`` on the wire."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def rfc3339(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_rfc3339(text: str) -> datetime | None:
    """An RFC 3339 time with its zone (``2026-11-29T18:10:00Z``), in UTC; None for anything else
    (no zone included: a time without one names no moment; nor one that is outside years
    1 to 9999 once in UTC)."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return in_utc(moment)


def in_utc(moment: datetime) -> datetime | None:
    """An aware time in UTC, or None when that falls outside the years a datetime holds
    (``0001-01-01T00:00:00+14:00`` is in the year 0 in UTC)."""
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        return None
