"""The Jinja environment and the small formatting filters the templates share."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from inbots.deliveries.state import PROGRESS_STAMPS
from inbots.kit.clock import rfc3339, utcnow
from inbots.kit.text import cut

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"

# A receipt's stamps in the order a delivery moves through them, then the two that need the
# operator, each with its column label ("notified_at" -> "notified").
STAMPS: tuple[tuple[str, str], ...] = tuple(
    (stamp, stamp.removesuffix("_at")) for stamp in (*PROGRESS_STAMPS, "failed_at", "stalled_at")
)


def duration(seconds: float | None) -> str:
    """``42 s``, ``3 min``, ``2 h 5 min``, ``3 d 4 h``."""
    if seconds is None:
        return "—"
    s = int(max(seconds, 0))
    if s < 60:
        return f"{s} s"
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if s < 3600:
        return f"{minutes} min"
    if s < 86400:
        rest = minutes % 60
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    rest = hours % 24
    return f"{days} d {rest} h" if rest else f"{days} d"


def ago(value: datetime | None) -> str:
    """Relative to now: ``just now``, ``3 min ago``, ``in 12 s``."""
    if value is None:
        return "—"
    delta = (utcnow() - value).total_seconds()
    if abs(delta) < 5:
        return "just now"
    return f"{duration(abs(delta))} ago" if delta > 0 else f"in {duration(-delta)}"


def short_id(ident: str | None) -> str:
    """``dlv_…k3x9qp``: the type prefix and the random tail (ids are time-ordered, so their heads
    look alike)."""
    if not ident:
        return "—"
    prefix, sep, body = ident.partition("_")
    if not sep or len(body) <= 8:
        return ident
    return f"{prefix}_…{body[-6:]}"


def is_future(value: datetime | None) -> bool:
    return value is not None and value > utcnow()


def excerpt(text: str | None, limit: int = 400) -> str:
    return cut(text or "", limit)


def build_environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html"], default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        ago=ago, rfc3339=rfc3339, duration=duration, short_id=short_id, excerpt=excerpt
    )
    env.tests["future"] = is_future
    env.globals["STAMPS"] = STAMPS
    return env


environment = build_environment()
