"""The dashboard's pages (the GETs): each route names its template and the function that builds
its data (:mod:`.pages`).

:func:`show_page` runs the builder in one unit of work as the signed-in operator (:mod:`.auth`) —
read only, or stamping for the operator's own mail, as the API's reads of it do — adds what the
top bar shows, and draws the template, refreshing itself when live. A service's error becomes the
error page, at its status. A form its service refused is shown again through :func:`show_page` too
(:mod:`.forms`), with what was typed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response

from inbots.approvals import service as approvals
from inbots.caller import Caller
from inbots.dashboard import pages
from inbots.dashboard.auth import LoginRequired, SessionEnded, as_operator, signed_in
from inbots.dashboard.render import current_path, render_page
from inbots.dashboard.session import Session
from inbots.db.uow import UnitOfWork, mostly_reads, reads, run_unit
from inbots.deliveries import service as deliveries
from inbots.errors import InbotsError

router = APIRouter(include_in_schema=False)


def _with_nav(uow: UnitOfWork, caller: Caller, data: dict[str, Any]) -> dict[str, Any]:
    """A page's data plus what the top bar shows: the operator's waiting mail."""
    data.setdefault("inbox_waiting", deliveries.waiting_count(uow, caller))
    data.setdefault("approvals_pending", approvals.pending_count(uow, caller))
    return data


def _build_page(
    uow: UnitOfWork, key: str | None, build: Callable[..., dict[str, Any]], /, *args: Any
) -> dict[str, Any]:
    return as_operator(uow, key, lambda u, c, *a: _with_nav(u, c, build(u, c, *a)), *args)


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


def show_page(
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
        session = signed_in(request)
    state = request.app.state
    unit = _stamping_page_as_operator if stamps else _page_as_operator
    try:
        data = run_unit(state.db, state.dispatch, unit, session.key, build, *args)
    except SessionEnded:
        raise LoginRequired(current_path(request), ended=True) from None
    except InbotsError as exc:
        return render_page(
            request,
            session,
            "error.html",
            http_status=exc.status,
            section=section,
            title="Not found" if exc.status == 404 else "Something is not right",
            error=exc,
        )
    if form is None:
        return render_page(
            request, session, template, section=section, title=title, live=live, **data
        )
    return render_page(
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


# --- pages -------------------------------------------------------------------------------------


@router.get("/")
def overview(request: Request) -> Response:
    """Counters, and the stalled and failed deliveries with their attempt logs."""
    waiting = request.app.state.dispatch.backlog()
    return show_page(request, "overview.html", "overview", "Overview", pages.overview, waiting)


@router.get("/agents")
def agents(request: Request) -> Response:
    """Every agent: activity, webhook URL and webhook health."""
    return show_page(request, "agents.html", "agents", "Agents", pages.agent_list)


@router.get("/agents/new")
def agent_new(request: Request) -> Response:
    """The form registering an agent."""
    return show_page(
        request, "agent_new.html", "agents", "Register an agent", pages.agent_form, live=False
    )


@router.get("/agents/{agent_id}")
def agent_view(request: Request, agent_id: str) -> Response:
    """One agent: its webhook (set the URL, rotate the secret) and archiving."""
    return show_page(request, "agent.html", "agents", "Agent", pages.agent_view, agent_id)


@router.get("/inbox")
def inbox(request: Request, status: str = "", cursor: str = "") -> Response:
    """The operator's own mail, as ``GET /v1/inbox`` answers the operator token."""
    return show_page(
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
    return show_page(
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
    return show_page(request, "approvals.html", "approvals", "Approvals", pages.approvals_page)


@router.get("/reservations")
def reservation_list(request: Request) -> Response:
    """The agents' active reservations of repository paths: holder, paths, reason, expiry."""
    return show_page(
        request, "reservations.html", "reservations", "Reservations", pages.reservations_page
    )


@router.get("/threads/new")
def thread_new(request: Request) -> Response:
    """The form opening a thread as the operator."""
    return show_page(
        request, "thread_new.html", "threads", "Open a thread", pages.thread_form, live=False
    )


@router.get("/threads")
def thread_list(request: Request, status: str = "") -> Response:
    """Threads with participants and status, and the close requests waiting for the operator."""
    return show_page(
        request, "threads.html", "threads", "Threads", pages.thread_list, status or None
    )


@router.get("/threads/{thread_id}")
def thread_view(request: Request, thread_id: str) -> Response:
    """One thread: each message with every recipient's receipt."""
    return show_page(request, "thread.html", "threads", "Thread", pages.thread_view, thread_id)


@router.get("/deliveries/{delivery_id}")
def delivery_view(request: Request, delivery_id: str) -> Response:
    """One delivery: its stamps and its attempt log."""
    return show_page(
        request, "delivery.html", "overview", "Delivery", pages.delivery_view, delivery_id
    )
