"""Text rules shared by listings and notifications."""

from __future__ import annotations

ELLIPSIS = "…"


def cut(text: str, limit: int) -> str:
    """Cut to at most ``limit`` code points, ending with an ellipsis when anything was dropped."""
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + ELLIPSIS


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def shown_summary(summary: str | None, body: str, limit: int) -> str:
    """What listings and notifications show: the summary, else the body's first line, cut."""
    return cut(summary if summary else first_line(body), limit)
