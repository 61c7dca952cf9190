"""Time: timezone-aware UTC everywhere, RFC 3339 with a ``Z`` on the wire."""

from __future__ import annotations

from datetime import UTC, datetime

from inbots.errors import Invalid


def utcnow() -> datetime:
    return datetime.now(UTC)


def rfc3339(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def read_rfc3339(text: str) -> datetime:
    """An RFC 3339 time with its zone (``2026-11-29T18:10:00Z``, ``z`` too), in UTC.

    Raises ``ValueError`` whose message says what is wrong, worded to follow the field's name
    ("must carry a time zone …"), or is empty when the text is no time at all (the caller then
    says what it takes). A time without a zone names no moment; one outside the years 1 to 9999
    once in UTC cannot be held."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        raise ValueError("") from None
    if moment.tzinfo is None:
        raise ValueError("must carry a time zone (end it with Z for UTC)")
    utc = in_utc(moment)
    if utc is None:
        raise ValueError("must be a time within the years 1 to 9999 in UTC")
    return utc


def time_field(value: str, field: str, takes: str) -> datetime:
    """A caller's ``field`` read with :func:`read_rfc3339`, or 422 naming it: what is wrong with
    the time (no zone, out of range), else what the field takes (``takes``, worded to follow the
    field's name: "must be a message id or an RFC 3339 time …")."""
    try:
        return read_rfc3339(value)
    except ValueError as wrong:
        raise Invalid(f"{field} {str(wrong) or takes}.", field=field) from None


def in_utc(moment: datetime) -> datetime | None:
    """An aware time in UTC, or None when that falls outside the years a datetime holds
    (``0001-01-01T00:00:00+14:00`` is in the year 0 in UTC)."""
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        return None
