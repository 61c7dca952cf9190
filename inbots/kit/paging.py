"""Page sizes: how many items a list answers with. Where a page ended is a cursor
(:mod:`inbots.kit.cursor`)."""

from __future__ import annotations


def clamp_limit(raw: object, default: int, maximum: int) -> int:
    """A limit outside 1..maximum, or not a number, falls back to the default (not an error)."""
    try:
        value = int(str(raw)) if raw is not None else default
    except ValueError:
        return default
    if value < 1 or value > maximum:
        return default
    return value
