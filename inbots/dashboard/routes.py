"""The dashboard's HTTP side: sign-in and sign-out, the pages, and the operator's actions.

Every page and action runs in one unit of work that first re-resolves the session row and its
operator token (signed out, expired or revoked: the session has ended) and then calls the same
service functions as the API. Sign-in goes through the throttle (:mod:`inbots.auth.throttle`). Every
POST checks the session's CSRF token in constant time and the Origin (or Referer) before anything
else; a failed check answers 403 and changes nothing. Service errors become a friendly message.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any, TypeVar
from urllib.parse import quote

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from inbots import __version__
from inbots.api.errors import envelope
from inbots.auth import sessions as auth_sessions
from inbots.auth.service import Caller
from inbots.auth.throttle import SCOPE_ADDRESS, Held
from inbots.dashboard import pages
from inbots.dashboard.render import environment
from inbots.dashboard.session import Session, Sessions, local_path, same_origin
from inbots.db.uow import UnitOfWork, reads, run_unit
from inbots.deliveries import service as deliveries
from inbots.errors import InbotsError, RateLimited, ServiceUnavailable, Unauthorized
from inbots.threads import service as threads

T = TypeVar("T")
STATIC_PATH = "/dashboard/static"
LIVE_REFRESH_MS = 3000

router = APIRouter(include_in_schema=False)

_CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


class LoginRequired(Exception):
    """No (valid) session: redirect to the sign-in page. ``ended`` when the session was valid
    until its operator token disappeared or it expired."""

    def __init__(self, next_path: str | None = None, *, ended: bool = False) -> None:
        super().__init__("sign in")
        self.next_path = next_path
        self.ended = ended


class CsrfRejected(Exception):
    """A POST without the session's CSRF token, with a wrong one, or from another origin."""


class _SessionEnded(Exception):
    pass


def sessions_of(request: Request) -> Sessions:
    sessions: Sessions = request.app.state.dashboard_sessions
    return sessions


def harden(response: Response) -> Response:
    """Headers every dashboard answer carries: never cached, never framed, no foreign code."""
    response.headers["Cache-Control"] = "no-store"
    response.headers["Content-Security-Policy"] = _CSP
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["Vary"] = "Cookie, X-Partial"
    return response


def _here(request: Request) -> str:
    query = request.url.query
    return request.url.path + ("?" + query if query else "")


def _render(
    request: Request, session: Session, template: str, *, http_status: int = 200, **context: Any
) -> HTMLResponse:
    partial = request.headers.get("x-partial") == "1"
    flash = None if partial else session.take_flash()
    context.setdefault("live", False)
    context.setdefault("section", "")
    html = environment.get_template(template).render(
        partial=partial,
        csrf=session.csrf,
        flash=flash,
        signed_in=session.key is not None,
        here=_here(request),
        static=STATIC_PATH,
        version=__version__,
        refresh_ms=LIVE_REFRESH_MS,
        session_hours=_hours(sessions_of(request).max_age_seconds),
        **context,
    )
    response = HTMLResponse(html, status_code=http_status)
    if session.dirty:
        sessions_of(request).store(request, response, session)
    return harden(response)  # type: ignore[return-value]


def _hours(seconds: float) -> str:
    hours = seconds / 3600
    if hours >= 1:
        return f"{hours:g} hour{'s' if hours != 1 else ''}"
    return f"{max(1, round(seconds / 60))} minutes"


def _redirect(request: Request, target: str, session: Session | None = None) -> Response:
    response = RedirectResponse(target, status_code=303)
    if session is not None:
        sessions_of(request).store(request, response, session)
    return harden(response)


def _as_operator(
    uow: UnitOfWork, key: str | None, fn: Callable[..., T], /, *args: Any, **kwargs: Any
) -> T:
    if key is None:
        raise _SessionEnded
    try:
        caller: Caller = auth_sessions.session_caller(uow, key)
    except Unauthorized:
        raise _SessionEnded from None
    return fn(uow, caller, *args, **kwargs)


@reads
def _page_as_operator(
    uow: UnitOfWork, key: str | None, fn: Callable[..., T], /, *args: Any, **kwargs: Any
) -> T:
    """:func:`_as_operator` for a page: read only (a page changes nothing)."""
    return _as_operator(uow, key, fn, *args, **kwargs)


def _signed_in(request: Request) -> Session:
    session = sessions_of(request).load(request)
    if session is None or session.key is None:
        raise LoginRequired(_here(request) if request.method == "GET" else None)
    return session


def _page(
    request: Request,
    template: str,
    section: str,
    title: str,
    build: Callable[..., dict[str, Any]],
    *args: Any,
    **kwargs: Any,
) -> Response:
    """Sign-in check, one read-only unit of work running ``build``, then the template."""
    session = _signed_in(request)
    state = request.app.state
    try:
        data = run_unit(
            state.db,
            state.dispatch,
            _page_as_operator,
            session.key,
            build,
            *args,
            **kwargs,
        )
    except _SessionEnded:
        raise LoginRequired(_here(request), ended=True) from None
    except InbotsError as exc:
        return _render(
            request,
            session,
            "error.html",
            http_status=exc.status,
            section=section,
            title="Not found" if exc.status == 404 else "Something is not right",
            error=exc,
        )
    return _render(request, session, template, section=section, title=title, live=True, **data)


def _verified_post(request: Request, csrf: str) -> Session:
    """The session of a POST whose CSRF token and origin check out, else :class:`CsrfRejected`."""
    session = sessions_of(request).load(request)
    if session is None or not same_origin(request) or not session.csrf_ok(csrf):
        raise CsrfRejected
    return session


def _act(
    request: Request,
    csrf: str,
    next_path: str,
    fn: Callable[..., Any],
    *args: Any,
    success: str,
) -> Response:
    """One operator action (POST): CSRF, sign-in, one unit of work, then back where it came from
    with a message saying what happened."""
    session = _verified_post(request, csrf)
    if session.key is None:
        raise LoginRequired()
    state = request.app.state
    try:
        run_unit(state.db, state.dispatch, _as_operator, session.key, fn, *args)
        session.say("ok", success)
    except _SessionEnded:
        raise LoginRequired(ended=True) from None
    except InbotsError as exc:
        session.say("error", exc.message)
    return _redirect(request, local_path(next_path), session)


Csrf = Annotated[str, Form()]
Next = Annotated[str, Form()]


# --- sign-in -----------------------------------------------------------------------------------


@router.get("/login")
def login_form(request: Request, next: str = "/") -> Response:
    """The sign-in form. Already signed in: straight on."""
    session = sessions_of(request).load(request)
    if session is not None and session.key is not None:
        return _redirect(request, local_path(next))
    if session is None:
        session = Session()
    return _render(request, session, "login.html", title="Sign in", next=local_path(next))


@router.post("/login")
def login(
    request: Request, token: Annotated[str, Form()] = "", csrf: Csrf = "", next: Next = "/"
) -> Response:
    """Check the operator token (unless the throttle holds sign-ins back) and start a session:
    a database row, named by a random key in the signed cookie."""
    session = _verified_post(request, csrf)
    state = request.app.state
    client = request.client.host if request.client else None
    try:
        outcome = run_unit(state.db, state.dispatch, auth_sessions.sign_in, token, client)
    except ServiceUnavailable as exc:  # the token may be right: say what is wrong instead
        return _render(
            request,
            session,
            "login.html",
            http_status=exc.status,
            title="Sign in",
            next=local_path(next),
            error=exc.message,
        )
    if outcome.held is not None:
        return _throttled(request, session, outcome.held, next)
    if outcome.key is None:
        return _render(
            request,
            session,
            "login.html",
            http_status=401,
            title="Sign in",
            next=local_path(next),
            error="That is not an operator token of this Inbots. Check it and try again.",
        )
    fresh = Session(key=outcome.key)  # a new CSRF token for the signed-in session
    return _redirect(request, local_path(next), fresh)


def _throttled(request: Request, session: Session, held: Held, next_path: str) -> Response:
    """429: the sign-in form again saying when to retry (the error envelope for a client that
    asks for JSON), with ``Retry-After``."""
    minutes = max(1, math.ceil(held.retry_after_seconds / 60))
    who = "from your address" if held.scope == SCOPE_ADDRESS else "to this Inbots"
    message = (
        f"Too many failed sign-ins {who} recently, so sign-in is paused; "
        f"try again in {minutes} minute{'s' if minutes != 1 else ''}."
    )
    retry_after = {"Retry-After": str(math.ceil(held.retry_after_seconds))}
    if _wants_json(request):
        limited = RateLimited(message)
        return envelope(limited.status, limited.code, limited.message, headers=retry_after)
    response = _render(
        request,
        session,
        "login.html",
        http_status=429,
        title="Sign in",
        next=local_path(next_path),
        error=message,
    )
    response.headers.update(retry_after)
    return response


def _wants_json(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


@router.post("/logout")
def logout(request: Request, csrf: Csrf = "") -> Response:
    """End the session on the server (a POST, so a link elsewhere cannot sign the operator
    out): the cookie stops working everywhere, copies included."""
    session = _verified_post(request, csrf)
    if session.key is not None:
        state = request.app.state
        run_unit(state.db, state.dispatch, auth_sessions.end_session, session.key)
    farewell = Session()
    farewell.say("ok", "Signed out.")
    return _redirect(request, "/login", farewell)


# --- pages -------------------------------------------------------------------------------------


@router.get("/")
def overview(request: Request) -> Response:
    """Counters, and the stalled and failed deliveries with their attempt logs."""
    return _page(request, "overview.html", "overview", "Overview", pages.overview)


@router.get("/agents")
def agents(request: Request) -> Response:
    """Every agent: activity, webhook URL and webhook health."""
    return _page(request, "agents.html", "agents", "Agents", pages.agent_list)


@router.get("/threads")
def thread_list(request: Request, status: str = "") -> Response:
    """Threads with participants and status, and the close requests waiting for the operator."""
    return _page(request, "threads.html", "threads", "Threads", pages.thread_list, status or None)


@router.get("/threads/{thread_id}")
def thread_view(request: Request, thread_id: str) -> Response:
    """One thread: each message with every recipient's receipt."""
    return _page(request, "thread.html", "threads", "Thread", pages.thread_view, thread_id)


@router.get("/deliveries/{delivery_id}")
def delivery_view(request: Request, delivery_id: str) -> Response:
    """One delivery: its stamps and its attempt log."""
    return _page(request, "delivery.html", "overview", "Delivery", pages.delivery_view, delivery_id)


# --- actions -----------------------------------------------------------------------------------


@router.post("/deliveries/{delivery_id}/redeliver")
def redeliver(request: Request, delivery_id: str, csrf: Csrf = "", next: Next = "/") -> Response:
    """Publish the delivery's notification again."""
    return _act(
        request,
        csrf,
        next,
        deliveries.redeliver,
        delivery_id,
        success=f"Redelivery of {delivery_id} queued.",
    )


@router.post("/threads/{thread_id}/close")
def confirm_close(request: Request, thread_id: str, csrf: Csrf = "", next: Next = "/") -> Response:
    """Close the thread (confirming its close request)."""
    return _act(request, csrf, next, threads.close_thread, thread_id, success="Thread closed.")


@router.post("/threads/{thread_id}/dismiss")
def dismiss_close(request: Request, thread_id: str, csrf: Csrf = "", next: Next = "/") -> Response:
    """Turn the close request down; the thread is open again."""
    return _act(
        request,
        csrf,
        next,
        threads.dismiss_close,
        thread_id,
        success="Close request dismissed; the thread is open again.",
    )


# --- exception handlers (installed by inbots.dashboard.install) --------------------------------


async def on_login_required(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, LoginRequired)
    target = "/login"
    if exc.next_path and exc.next_path != "/" and request.headers.get("x-partial") != "1":
        target += "?next=" + quote(exc.next_path, safe="/")
    session = None
    if exc.ended:
        session = Session()
        session.say("error", "Your session has ended; sign in again.")
    return _redirect(request, target, session)


async def on_csrf_rejected(request: Request, exc: Exception) -> Response:
    session = sessions_of(request).load(request) or Session(dirty=False)
    return _render(
        request,
        session,
        "error.html",
        http_status=403,
        title="Form rejected",
        error=None,
        message=(
            "This form was stale or did not come from this dashboard, so nothing was changed. "
            "Reload the page and try again."
        ),
    )
