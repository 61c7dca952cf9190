"""How the dashboard draws its answers: the Jinja environment and the small formatting filters
the templates share, then a template as the answer to a request (:func:`render_page`: the session's
flash and cookie, a live page's digest), a redirect (:func:`redirect`) and the error page of a
request refused before any service saw it (:func:`refusal_page`). Every answer carries the same
headers (:func:`harden`: never cached, never framed, no foreign code)."""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from inbots import __version__
from inbots.dashboard.session import Session, sessions_of
from inbots.deliveries.state import PROGRESS_STAMPS
from inbots.kit.clock import rfc3339, utcnow
from inbots.kit.text import cut

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
STATIC_PATH = "/dashboard/static"
LIVE_REFRESH_MS = 3000

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


# --- answers: a template drawn for a request, a redirect, a refusal ----------------------------

_CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


def harden(response: Response) -> Response:
    """Headers every dashboard answer carries: never cached, never framed, no foreign code."""
    response.headers["Cache-Control"] = "no-store"
    response.headers["Content-Security-Policy"] = _CSP
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["Vary"] = "Cookie, X-Partial"
    return response


def current_path(request: Request) -> str:
    """The request's path with its query: where to come back to."""
    query = request.url.query
    return request.url.path + ("?" + query if query else "")


def render_page(
    request: Request, session: Session, template: str, *, http_status: int = 200, **context: Any
) -> HTMLResponse:
    """``template`` drawn for the request (whole, or only its ``<main>`` for a live page's
    refresh), with the session's flash and cookie, at ``http_status``."""
    partial = request.headers.get("x-partial") == "1"
    flash = None if partial else session.take_flash()
    context.setdefault("live", False)
    context.setdefault("section", "")
    context.setdefault("form", {})
    context.setdefault("form_error", None)
    context.setdefault("inbox_waiting", None)
    context.setdefault("approvals_pending", None)
    page = environment.get_template(template)
    shared = dict(
        csrf=session.csrf,
        signed_in=session.key is not None,
        here=current_path(request),
        static=STATIC_PATH,
        version=__version__,
        refresh_ms=LIVE_REFRESH_MS,
        session_hours=_hours(sessions_of(request).max_age_seconds),
        **context,
    )
    # A live page's <main> carries the digest of its partial rendering, and every partial answer
    # names its own: the page's script swaps <main> only when they differ, so an unchanged page
    # is never replaced under the operator's cursor (or a test's element).
    body = page.render(partial=True, flash=None, **shared) if partial or context["live"] else ""
    digest = hashlib.sha256(body.encode()).hexdigest()[:16] if body else None
    html = body if partial else page.render(partial=False, flash=flash, digest=digest, **shared)
    response = HTMLResponse(html, status_code=http_status)
    if digest is not None:
        response.headers["X-Digest"] = digest
    if session.dirty:
        sessions_of(request).store(request, response, session)
    return harden(response)  # type: ignore[return-value]


def _hours(seconds: float) -> str:
    hours = seconds / 3600
    if hours >= 1:
        return f"{hours:g} hour{'s' if hours != 1 else ''}"
    return f"{max(1, round(seconds / 60))} minutes"


def redirect(request: Request, target: str, session: Session | None = None) -> Response:
    """303 to ``target``, storing ``session`` (its flash) when given."""
    response = RedirectResponse(target, status_code=303)
    if session is not None:
        sessions_of(request).store(request, response, session)
    return harden(response)


def refusal_page(request: Request, status: int, title: str, message: str) -> Response:
    """A form refused before any service saw it: the error page, with the session the cookie
    names (if any) for the top bar."""
    session = sessions_of(request).load(request) or Session(dirty=False)
    return render_page(
        request, session, "error.html", http_status=status, title=title, error=None, message=message
    )
