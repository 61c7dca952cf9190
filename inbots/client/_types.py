"""The closed sets of values some parameters take (checked by mypy; the server checks too), and
how a time is written for the server. Nothing here needs pydantic."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

Kind = Literal["task", "question", "update", "decision", "handoff", "ack"]
Outcome = Literal["done", "declined"]
Priority = Literal["normal", "urgent"]
InboxStatus = Literal["unacked", "acked", "all"]
Include = Literal["body"]
Events = Literal["receipts"]
When = str | datetime  # a message or delivery id, or a time (sent as RFC 3339)


def _rfc3339(value: datetime) -> str:
    """A time as the API writes one: RFC 3339 in UTC, microseconds, with a ``Z``."""
    return value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
