"""The dashboard's HTTP side: sign-in and sign-out, the pages, and the operator's actions.

Every page and action runs in one unit of work that first re-resolves the session row and its
operator token (signed out, expired or revoked: the session has ended) and then calls the same
service functions as the API. Sign-in goes through the throttle (:mod:`inbots.auth.throttle`). Every
POST checks the session's CSRF token in constant time and the Origin (or Referer) before anything
else; a failed check answers 403 and changes nothing. Service errors become a friendly message;
a form's refusal shows the form again with what was typed and the service's sentence, at its
status. Secrets (a new agent's key, a webhook signing secret) are on the answer to the POST only.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable
from typing import Annotated, Any, TypeVar
from urllib.parse import quote

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import DataError

from inbots import __version__
from inbots.agents import service as agents_service
from inbots.agents.schemas import AgentCreate
from inbots.approvals import service as approvals
from inbots.approvals.schemas import DecisionRequest
from inbots.auth import sessions as auth_sessions
from inbots.auth.throttle import SCOPE_ADDRESS, Held
from inbots.caller import Caller
from inbots.dashboard import actions, pages
from inbots.dashboard.render import environment
from inbots.dashboard.session import Session, Sessions, local_path, same_origin
from inbots.db.uow import UnitOfWork, mostly_reads, reads, run_unit
from inbots.deliveries import service as deliveries
from inbots.deliveries.schemas import AckRequest
from inbots.errors import (
    InbotsError,
    Invalid,
    RateLimited,
    ServiceUnavailable,
    Unauthorized,
    not_found,
)
from inbots.messages import service as messages
from inbots.messages.schemas import MessageCreate
from inbots.threads import service as threads
from inbots.threads.schemas import ThreadCreate
from inbots.web.errors import envelope
from inbots.webhooks.schemas import WebhookSet

log = logging.getLogger(__name__)
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
    context.setdefault("form", {})
    context.setdefault("form_error", None)
    context.setdefault("inbox_waiting", None)
    context.setdefault("approvals_pending", None)
    page = environment.get_template(template)
    shared = dict(
        csrf=session.csrf,
        signed_in=session.key is not None,
        here=_here(request),
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


def _with_nav(uow: UnitOfWork, caller: Caller, data: dict[str, Any]) -> dict[str, Any]:
    """A page's data plus what the top bar shows: the operator's waiting mail."""
    data.setdefault("inbox_waiting", deliveries.waiting_count(uow, caller))
    data.setdefault("approvals_pending", approvals.pending_count(uow, caller))
    return data


def _build_page(
    uow: UnitOfWork, key: str | None, build: Callable[..., dict[str, Any]], /, *args: Any
) -> dict[str, Any]:
    return _as_operator(uow, key, lambda u, c, *a: _with_nav(u, c, build(u, c, *a)), *args)


@reads
def _page_as_operator(
    uow: UnitOfWork, key: str | None, build: Callable[..., dict[str, Any]], /, *args: Any
) -> dict[str, Any]:
    """A page's data, read only (a page changes nothing)."""
    return _build_page(uow, key, build, *args)


@mostly_reads
def _stamping_page_as_operator(
    uow: UnitOfWork, key: str | None, build: Callable[..., dict[str, Any]], /, *args: Any
) -> dict[str, Any]:
    """A page of the operator's own mail: showing it stamps it (delivered, or fetched when the
    body is shown), as ``GET /v1/inbox`` and ``GET /v1/messages/{id}`` do."""
    return _build_page(uow, key, build, *args)


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
    stamps: bool = False,
    live: bool = True,
    session: Session | None = None,
    form: dict[str, Any] | None = None,
    form_error: InbotsError | None = None,
) -> Response:
    """Sign-in check, one unit of work running ``build`` (read only, or ``stamps`` for the
    operator's own mail), then the template, refreshing itself when ``live``. With ``form`` (a
    POST whose service refused it): the same page, not live, showing the input again with
    ``form_error``."""
    if session is None:
        session = _signed_in(request)
    state = request.app.state
    unit = _stamping_page_as_operator if stamps else _page_as_operator
    try:
        data = run_unit(state.db, state.dispatch, unit, session.key, build, *args)
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
    if form is None:
        return _render(request, session, template, section=section, title=title, live=live, **data)
    return _render(
        request,
        session,
        template,
        http_status=form_error.status if form_error else 200,
        section=section,
        title=title,
        form=form,
        form_error=form_error,
        **data,
    )


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


def _form_session(request: Request, csrf: str) -> Session:
    """A form POST's signed-in session, after the CSRF and Origin checks."""
    session = _verified_post(request, csrf)
    if session.key is None:
        raise LoginRequired()
    return session


def _write(request: Request, session: Session, fn: Callable[..., T], /, *args: Any) -> T:
    """One writing unit of work as the operator: ``fn(uow, caller, *args)``."""
    state = request.app.state
    try:
        result: T = run_unit(state.db, state.dispatch, _as_operator, session.key, fn, *args)
    except _SessionEnded:
        raise LoginRequired(ended=True) from None
    except DataError:  # a value the database cannot hold slipped past validation (as the API)
        log.warning("database refused a value of a dashboard form")
        raise Invalid("A value in the form cannot be stored; check it and try again.") from None
    return result


M = TypeVar("M", bound=BaseModel)


def _request(model: type[M], **values: Any) -> M:
    """The API's request model from form fields; a field it refuses is a 422 like the API's."""
    try:
        return model(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first.get("loc") else None
        raise Invalid(f"{field or 'The form'}: {first['msg']}.", field=field) from None


def _optional(value: str) -> str | None:
    """An optional text field: left empty means left out (as omitting it from the API call)."""
    return value if value.strip() else None


def _shown_once(request: Request, session: Session, title: str, **context: Any) -> Response:
    """A page holding a secret (an API key, a signing secret): answered to the POST itself, so
    the secret is in no URL, never cached (``Cache-Control: no-store``), never shown again."""
    return _render(request, session, "secret.html", section="agents", title=title, **context)


Csrf = Annotated[str, Form()]
Next = Annotated[str, Form()]
Text = Annotated[str, Form()]


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
    waiting = request.app.state.dispatch.backlog()
    return _page(request, "overview.html", "overview", "Overview", pages.overview, waiting)


@router.get("/agents")
def agents(request: Request) -> Response:
    """Every agent: activity, webhook URL and webhook health."""
    return _page(request, "agents.html", "agents", "Agents", pages.agent_list)


@router.get("/agents/new")
def agent_new(request: Request) -> Response:
    """The form registering an agent."""
    return _page(
        request, "agent_new.html", "agents", "Register an agent", pages.agent_form, live=False
    )


@router.get("/agents/{agent_id}")
def agent_view(request: Request, agent_id: str) -> Response:
    """One agent: its webhook (set the URL, rotate the secret) and archiving."""
    return _page(request, "agent.html", "agents", "Agent", pages.agent_view, agent_id)


@router.get("/inbox")
def inbox(request: Request, status: str = "", cursor: str = "") -> Response:
    """The operator's own mail, as ``GET /v1/inbox`` answers the operator token."""
    return _page(
        request,
        "inbox.html",
        "inbox",
        "Inbox",
        pages.inbox_page,
        status or None,
        cursor or None,
        stamps=True,
    )


@router.get("/inbox/{delivery_id}")
def inbox_message(request: Request, delivery_id: str) -> Response:
    """One message of the operator's inbox, whole, with the reply and acknowledge forms."""
    return _page(
        request,
        "message.html",
        "inbox",
        "Message",
        pages.inbox_message,
        delivery_id,
        stamps=True,
    )


@router.get("/approvals")
def approval_queue(request: Request) -> Response:
    """The held messages waiting for the operator (``GET /v1/approvals``), with Approve and
    Reject."""
    return _page(request, "approvals.html", "approvals", "Approvals", pages.approvals_page)


@router.get("/threads/new")
def thread_new(request: Request) -> Response:
    """The form opening a thread as the operator."""
    return _page(
        request, "thread_new.html", "threads", "Open a thread", pages.thread_form, live=False
    )


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


@router.post("/approvals/{message_id}/approve")
def approval_approve(
    request: Request, message_id: str, csrf: Csrf = "", next: Next = "/approvals"
) -> Response:
    """``POST /v1/approvals/{id}/approve``: its recipients get it now."""
    return _act(
        request,
        csrf,
        next,
        approvals.approve,
        message_id,
        success=f"Approved {message_id}: its recipients have it now.",
    )


@router.post("/approvals/{message_id}/reject")
def approval_reject(
    request: Request,
    message_id: str,
    csrf: Csrf = "",
    next: Next = "/approvals",
    reason: Text = "",
) -> Response:
    """``POST /v1/approvals/{id}/reject`` with the reason typed (optional)."""
    try:
        rejection = _request(DecisionRequest, reason=_optional(reason))
    except InbotsError as exc:  # a reason that cannot be stored: said, nothing changed
        session = _form_session(request, csrf)
        session.say("error", exc.message)
        return _redirect(request, local_path(next), session)
    return _act(
        request,
        csrf,
        next,
        approvals.reject,
        message_id,
        rejection,
        success=f"Rejected {message_id}: it never reaches its recipients; its sender is told.",
    )


# --- forms: each a service of the API; a refusal shows the form again with the input --------


@router.post("/agents/new")
def agent_register(
    request: Request,
    csrf: Csrf = "",
    name: Text = "",
    description: Text = "",
    webhook_url: Text = "",
) -> Response:
    """``POST /v1/agents``: the API key (and the signing secret, with a webhook) shown once."""
    session = _form_session(request, csrf)
    form = {"name": name, "description": description, "webhook_url": webhook_url}
    try:
        body = _request(
            AgentCreate,
            name=name.strip(),
            description=_optional(description),
            webhook_url=_optional(webhook_url.strip()),
        )
        created = _write(
            request,
            session,
            agents_service.register_agent,
            body.name,
            body.description,
            body.webhook_url,
        )
    except InbotsError as exc:
        return _page(
            request,
            "agent_new.html",
            "agents",
            "Register an agent",
            pages.agent_form,
            session=session,
            form=form,
            form_error=exc,
        )
    return _shown_once(
        request,
        session,
        f"Agent {created.username} registered",
        kind="registered",
        agent=created.username,
        agent_id=created.id,
        api_key=created.api_key,
        webhook=created.webhook,
    )


@router.post("/agents/{agent_id}/archive")
def agent_archive(request: Request, agent_id: str, csrf: Csrf = "", confirm: Text = "") -> Response:
    """``POST /v1/agents/{id}/archive``, once the operator ticked the confirmation."""
    session = _form_session(request, csrf)
    try:
        if confirm != "yes":
            raise Invalid(
                "Tick the box to confirm: archiving revokes the agent's keys at once.",
                field="confirm",
            )
        archived = _write(request, session, agents_service.archive_agent, agent_id)
    except InbotsError as exc:
        return _page(
            request,
            "agent.html",
            "agents",
            "Agent",
            pages.agent_view,
            agent_id,
            session=session,
            form={"form": "archive"},
            form_error=exc,
        )
    session.say("ok", f"Agent {archived.username} archived: its keys no longer work.")
    return _redirect(request, "/agents", session)


@router.post("/agents/{agent_id}/webhook")
def agent_webhook(request: Request, agent_id: str, csrf: Csrf = "", url: Text = "") -> Response:
    """``PUT /v1/agents/{id}/webhook``: a first URL mints the signing secret, shown once."""
    session = _form_session(request, csrf)
    try:
        body = _request(WebhookSet, url=url.strip())
        result = _write(request, session, actions.set_webhook, agent_id, body)
    except InbotsError as exc:
        return _page(
            request,
            "agent.html",
            "agents",
            "Agent",
            pages.agent_view,
            agent_id,
            session=session,
            form={"form": "webhook", "url": url},
            form_error=exc,
        )
    if not result.minted:
        session.say("ok", f"Webhook URL of {result.agent} set; its signing secret is unchanged.")
        return _redirect(request, f"/agents/{agent_id}", session)
    return _shown_once(
        request,
        session,
        f"Webhook of {result.agent} set",
        kind="webhook",
        agent=result.agent,
        agent_id=agent_id,
        api_key=None,
        webhook=result.webhook,
    )


@router.post("/agents/{agent_id}/webhook/rotate")
def agent_webhook_rotate(request: Request, agent_id: str, csrf: Csrf = "") -> Response:
    """``POST /v1/agents/{id}/webhook/rotate``: the new secret shown once; the previous one
    keeps signing for the overlap."""
    session = _form_session(request, csrf)
    try:
        result = _write(request, session, actions.rotate_secret, agent_id)
    except InbotsError as exc:
        return _page(
            request,
            "agent.html",
            "agents",
            "Agent",
            pages.agent_view,
            agent_id,
            session=session,
            form={"form": "rotate"},
            form_error=exc,
        )
    return _shown_once(
        request,
        session,
        f"New signing secret for {result.agent}",
        kind="rotated",
        agent=result.agent,
        agent_id=agent_id,
        api_key=None,
        webhook=result.webhook,
    )


def _message_fields(body: str, summary: str, kind: str, priority: str) -> dict[str, Any]:
    return {
        "body": body,
        "summary": _optional(summary),
        "kind": _optional(kind),
        "priority": _optional(priority),
    }


@router.post("/threads/new")
def thread_open(
    request: Request,
    csrf: Csrf = "",
    title: Text = "",
    goal: Text = "",
    ref: Text = "",
    participants: Annotated[list[str] | None, Form()] = None,
    body: Text = "",
    summary: Text = "",
    kind: Text = "",
    priority: Text = "",
) -> Response:
    """``POST /v1/threads`` and, with a first message, ``POST /v1/threads/{id}/messages``, in
    one transaction."""
    session = _form_session(request, csrf)
    chosen = participants or []
    form = {
        "title": title,
        "goal": goal,
        "ref": ref,
        "participants": chosen,
        "body": body,
        "summary": summary,
        "kind": kind,
        "priority": priority,
    }
    try:
        thread = _request(
            ThreadCreate,
            title=title.strip(),
            goal=_optional(goal),
            ref=_optional(ref.strip()),
            participants=chosen,
        )
        first = None
        if body.strip() or summary.strip():
            first = _request(MessageCreate, **_message_fields(body, summary, kind, priority))
        opened = _write(request, session, actions.open_thread, thread, first)
    except InbotsError as exc:
        return _page(
            request,
            "thread_new.html",
            "threads",
            "Open a thread",
            pages.thread_form,
            session=session,
            form=form,
            form_error=exc,
        )
    session.say("ok", "Thread opened" + (" and your message sent." if first else "."))
    return _redirect(request, f"/threads/{opened.id}", session)


@router.post("/threads/{thread_id}")
def thread_post(
    request: Request,
    thread_id: str,
    csrf: Csrf = "",
    body: Text = "",
    summary: Text = "",
    kind: Text = "",
    priority: Text = "",
) -> Response:
    """``POST /v1/threads/{id}/messages`` as the operator (who joins the thread)."""
    session = _form_session(request, csrf)
    form = {"body": body, "summary": summary, "kind": kind, "priority": priority}
    try:
        message = _request(MessageCreate, **_message_fields(body, summary, kind, priority))
        sent = _write(request, session, messages.send_message, thread_id, message)
    except InbotsError as exc:
        return _page(
            request,
            "thread.html",
            "threads",
            "Thread",
            pages.thread_view,
            thread_id,
            session=session,
            form=form,
            form_error=exc,
        )
    count = len(sent.deliveries)
    session.say("ok", f"Message sent to {count} recipient{'s' if count != 1 else ''}.")
    return _redirect(request, f"/threads/{thread_id}#{sent.message.id}", session)


@router.post("/inbox/{delivery_id}/reply")
def inbox_reply(
    request: Request,
    delivery_id: str,
    csrf: Csrf = "",
    body: Text = "",
    summary: Text = "",
    kind: Text = "",
) -> Response:
    """A reply in the message's thread: ``POST /v1/threads/{id}/messages`` with ``reply_to``,
    the thread and the message those of the delivery in the path (the operator's own)."""
    session = _form_session(request, csrf)
    form = {"form": "reply", "body": body, "summary": summary, "kind": kind}
    try:
        message = _request(MessageCreate, **_message_fields(body, summary, kind, ""))
        _write(request, session, actions.reply, delivery_id, message)
    except InbotsError as exc:
        return _page(
            request,
            "message.html",
            "inbox",
            "Message",
            pages.inbox_message,
            delivery_id,
            stamps=True,
            session=session,
            form=form,
            form_error=exc,
        )
    session.say("ok", "Reply sent.")
    return _redirect(request, f"/inbox/{delivery_id}", session)


@router.post("/inbox/{delivery_id}/ack")
def inbox_ack(
    request: Request, delivery_id: str, csrf: Csrf = "", outcome: Text = "", note: Text = ""
) -> Response:
    """``POST /v1/acks`` for this delivery: done or declined, with an optional note."""
    session = _form_session(request, csrf)
    form = {"form": "ack", "outcome": outcome, "note": note}
    try:
        ack = _request(
            AckRequest, ids=[delivery_id], outcome=_optional(outcome), note=_optional(note)
        )
        result = _write(request, session, deliveries.acknowledge, ack)
        if delivery_id in result.not_found:  # the API answers 200 and lists it; a page says so
            raise not_found("delivery", delivery_id)
    except InbotsError as exc:
        return _page(
            request,
            "message.html",
            "inbox",
            "Message",
            pages.inbox_message,
            delivery_id,
            stamps=True,
            session=session,
            form=form,
            form_error=exc,
        )
    if delivery_id in result.already:
        session.say("ok", "It was already acknowledged; nothing changed.")
        return _redirect(request, "/inbox", session)
    said = {"declined": "Declined"}.get(outcome, "Acknowledged")
    session.say("ok", f"{said}; the sender sees it with your note." if note.strip() else f"{said}.")
    return _redirect(request, "/inbox", session)


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


def _refusal_page(request: Request, status: int, title: str, message: str) -> Response:
    """A form refused before any service saw it: the error page, with the session the cookie
    names (if any) for the top bar."""
    session = sessions_of(request).load(request) or Session(dirty=False)
    return _render(
        request, session, "error.html", http_status=status, title=title, error=None, message=message
    )


async def too_large_page(request: Request, message: str) -> Response:
    """A form larger than the request body limit (refused before it was read): the dashboard's
    error page, as a browser should show it, rather than the API's JSON."""
    return _refusal_page(
        request,
        413,
        "Too large to send",
        f"{message} Nothing was changed: go back, shorten what you typed and send again.",
    )


async def on_csrf_rejected(request: Request, exc: Exception) -> Response:
    return _refusal_page(
        request,
        403,
        "Form rejected",
        "This form was stale or did not come from this dashboard, so nothing was changed. "
        "Reload the page and try again.",
    )
