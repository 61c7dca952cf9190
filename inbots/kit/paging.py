"""Page sizes: how many items a list answers with. Where a page ended is a cursor
(:mod:`inbots.kit.cursor`).

A limit is lenient on purpose, at every edge: one out of range, or (over HTTP, where it is query
text) not a whole number, means the list's default, never an error. The edges resolve it with
:func:`page_size` against the settings, and the services take the number.
"""

from __future__ import annotations


def page_size(limit: int | None, default: int, maximum: int) -> int:
    """``limit`` when it is 1 to ``maximum``; otherwise (None, or out of range) ``default``."""
    if limit is None or not 1 <= limit <= maximum:
        return default
    return limit


def whole_number(text: str | None) -> int | None:
    """Query text read as a whole number (``"20"``, ``" 20 "``), or None when it is not one."""
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None
