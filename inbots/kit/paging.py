"""Pagination: lenient limits and opaque cursors."""

from __future__ import annotations

import base64
import binascii

from inbots.errors import Invalid


def clamp_limit(raw: object, default: int, maximum: int) -> int:
    """A limit outside 1..maximum, or not a number, falls back to the default (not an error)."""
    try:
        value = int(str(raw)) if raw is not None else default
    except ValueError:
        return default
    if value < 1 or value > maximum:
        return default
    return value


def encode_cursor(last_id: str) -> str:
    return base64.urlsafe_b64encode(last_id.encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    if not cursor:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = base64.urlsafe_b64decode(padded.encode()).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise Invalid("cursor is not one this server gave out.", field="cursor") from None
    if not value or "_" not in value or not value.isascii():
        raise Invalid("cursor is not one this server gave out.", field="cursor")
    return value
