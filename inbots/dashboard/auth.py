"""Who may use the dashboard: sign-in and sign-out, and the checks every page and POST makes
before anything else.

Sign-in goes through the throttle (:mod:`inbots.auth.throttle`) and starts a session: a database
row, named by a random key in the signed cookie (:mod:`.session`). Every page and action runs in
one unit of work that first re-resolves the session row and its operator token
(:func:`as_operator`): signed out, expired or revoked, the session has ended and the browser is
sent to sign in again (:class:`LoginRequired`). Every POST checks the session's CSRF token in
constant time and the Origin (or Referer) before anything else (:func:`verified_post`); a failed
check answers 403 and changes nothing (:class:`CsrfRejected`). The two exceptions' handlers are
installed by :func:`inbots.dashboard.install`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any, TypeVar
from urllib.parse import quote

from fastapi import APIRouter, Form, Request, Response

from inbots.auth import sessions as auth_sessions
from inbots.auth.throttle import SCOPE_ADDRESS, Held
from inbots.caller import Caller
from inbots.dashboard.render import current_path, redirect, refusal_page, render_page
from inbots.dashboard.session import Session, local_path, same_origin, sessions_of
from inbots.db.uow import UnitOfWork, run_unit
from inbots.errors import RateLimited, ServiceUnavailable, Unauthorized
from inbots.web.errors import envelope

T = TypeVar("T")

router = APIRouter(include_in_schema=False)


class LoginRequired(Exception):
    """No (valid) session: redirect to the sign-in page. ``ended`` when the session was valid
    until its operator token disappeared or it expired."""

    def __init__(self, next_path: str | None = None, *, ended: bool = False) -> None:
        super().__init__("sign in")
        self.next_path = next_path
        self.ended = ended


class CsrfRejected(Exception):
    """A POST without the session's CSRF token, with a wrong one, or from another origin."""


class SessionEnded(Exception):
    """Raised inside a unit of work: the session's row or its operator token is gone (signed out,
    expired, revoked). The page or form that ran it answers :class:`LoginRequired`."""


def as_operator(
    uow: UnitOfWork, key: str | None, fn: Callable[..., T], /, *args: Any, **kwargs: Any
) -> T:
    """``fn(uow, caller, *args, **kwargs)`` as the operator of the session ``key``, re-resolved
    in this unit of work; :class:`SessionEnded` when it no longer stands."""
    if key is None:
        raise SessionEnded
    try:
        caller: Caller = auth_sessions.session_caller(uow, key)
    except Unauthorized:
        raise SessionEnded from None
    return fn(uow, caller, *args, **kwargs)


def signed_in(request: Request) -> Session:
    """A page's session, signed in, else :class:`LoginRequired` (back here after a GET)."""
    session = sessions_of(request).load(request)
    if session is None or session.key is None:
        raise LoginRequired(current_path(request) if request.method == "GET" else None)
    return session


def verified_post(request: Request, csrf: str) -> Session:
    """The session of a POST whose CSRF token and origin check out, else :class:`CsrfRejected`."""
    session = sessions_of(request).load(request)
    if session is None or not same_origin(request) or not session.csrf_ok(csrf):
        raise CsrfRejected
    return session


def form_session(request: Request, csrf: str) -> Session:
    """A form POST's signed-in session, after the CSRF and Origin checks."""
    session = verified_post(request, csrf)
    if session.key is None:
        raise LoginRequired()
    return session


# The fields of the POSTs (here and in .forms): the session's CSRF token, which every one
# carries; the local path to go back to; any text typed.
Csrf = Annotated[str, Form()]
Next = Annotated[str, Form()]
Text = Annotated[str, Form()]


# --- sign-in -----------------------------------------------------------------------------------


@router.get("/login")
def login_form(request: Request, next: str = "/") -> Response:
    """The sign-in form. Already signed in: straight on."""
    session = sessions_of(request).load(request)
    if session is not None and session.key is not None:
        return redirect(request, local_path(next))
    if session is None:
        session = Session()
    return render_page(request, session, "login.html", title="Sign in", next=local_path(next))


@router.post("/login")
def login(
    request: Request, token: Annotated[str, Form()] = "", csrf: Csrf = "", next: Next = "/"
) -> Response:
    """Check the operator token (unless the throttle holds sign-ins back) and start a session:
    a database row, named by a random key in the signed cookie."""
    session = verified_post(request, csrf)
    state = request.app.state
    client = request.client.host if request.client else None
    try:
        outcome = run_unit(state.db, state.dispatch, auth_sessions.sign_in, token, client)
    except ServiceUnavailable as exc:  # the token may be right: say what is wrong instead
        return render_page(
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
        return render_page(
            request,
            session,
            "login.html",
            http_status=401,
            title="Sign in",
            next=local_path(next),
            error="That is not an operator token of this Inbots. Check it and try again.",
        )
    fresh = Session(key=outcome.key)  # a new CSRF token for the signed-in session
    return redirect(request, local_path(next), fresh)


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
    response = render_page(
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
    session = verified_post(request, csrf)
    if session.key is not None:
        state = request.app.state
        run_unit(state.db, state.dispatch, auth_sessions.end_session, session.key)
    farewell = Session()
    farewell.say("ok", "Signed out.")
    return redirect(request, "/login", farewell)


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
    return redirect(request, target, session)


async def on_csrf_rejected(request: Request, exc: Exception) -> Response:
    return refusal_page(
        request,
        403,
        "Form rejected",
        "This form was stale or did not come from this dashboard, so nothing was changed. "
        "Reload the page and try again.",
    )
