"""The operator's POSTs: the buttons (redeliver, close, approve, …) and the forms (register an
agent, set its webhook, open a thread, post, reply, acknowledge).

Each is checked first (the CSRF token, the Origin, the sign-in: :mod:`.auth`), then runs one
writing unit of work calling the same service functions as the API (or one of :mod:`.actions`,
when a form is more than one call). A button (:func:`_act`) goes back where it came from with a
message saying what happened. A form's fields become the API's request model (:func:`_request`);
a refusal shows the form again (:func:`~.views._page`) with what was typed and the service's
sentence, at its status. Secrets (a new agent's key, a webhook signing secret) are on the answer
to the POST only (:func:`_shown_once`). A form too large to be read gets the error page
(:func:`too_large_page`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Form, Request, Response
from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import DataError

from inbots.agents import service as agents_service
from inbots.agents.schemas import AgentCreate
from inbots.approvals import service as approvals
from inbots.approvals.schemas import DecisionRequest, PolicyUpdate
from inbots.dashboard import actions, pages
from inbots.dashboard.auth import (
    Csrf,
    LoginRequired,
    Next,
    SessionEnded,
    Text,
    as_operator,
    form_session,
    verified_post,
)
from inbots.dashboard.render import redirect, refusal_page, render_page
from inbots.dashboard.session import Session, local_path
from inbots.dashboard.views import show_page
from inbots.db.uow import run_unit
from inbots.deliveries import console
from inbots.deliveries import service as deliveries
from inbots.deliveries.schemas import AckRequest
from inbots.errors import InbotsError, Invalid, not_found
from inbots.kit.ids import kind_of
from inbots.kit.schema import refusal
from inbots.messages import service as messages
from inbots.messages.schemas import MessageCreate
from inbots.threads import service as threads
from inbots.threads.schemas import ThreadCreate
from inbots.webhooks.schemas import WebhookSet

log = logging.getLogger(__name__)
T = TypeVar("T")

router = APIRouter(include_in_schema=False)


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
    session = verified_post(request, csrf)
    if session.key is None:
        raise LoginRequired()
    state = request.app.state
    try:
        run_unit(state.db, state.dispatch, as_operator, session.key, fn, *args)
        session.say("ok", success)
    except SessionEnded:
        raise LoginRequired(ended=True) from None
    except InbotsError as exc:
        session.say("error", exc.message)
    return redirect(request, local_path(next_path), session)


def _write(request: Request, session: Session, fn: Callable[..., T], /, *args: Any) -> T:
    """One writing unit of work as the operator: ``fn(uow, caller, *args)``."""
    state = request.app.state
    try:
        result: T = run_unit(state.db, state.dispatch, as_operator, session.key, fn, *args)
    except SessionEnded:
        raise LoginRequired(ended=True) from None
    except DataError:  # a value the database cannot hold slipped past validation (as the API)
        log.warning("database refused a value of a dashboard form")
        raise Invalid("A value in the form cannot be stored; check it and try again.") from None
    return result


M = TypeVar("M", bound=BaseModel)


def _request(model: type[M], **values: Any) -> M:
    """The API's request model from form fields; a field it refuses is the API's 422, worded as
    the API words it (:func:`~inbots.kit.schema.refusal`)."""
    try:
        return model(**values)
    except ValidationError as exc:
        raise refusal(exc.errors()[0]) from None


def _optional(value: str) -> str | None:
    """An optional text field: left empty means left out (as omitting it from the API call)."""
    return value if value.strip() else None


def _shown_once(request: Request, session: Session, title: str, **context: Any) -> Response:
    """A page holding a secret (an API key, a signing secret): answered to the POST itself, so
    the secret is in no URL, never cached (``Cache-Control: no-store``), never shown again."""
    return render_page(request, session, "secret.html", section="agents", title=title, **context)


# --- buttons: one service call each, then back to the page they were on ------------------------


@router.post("/deliveries/{delivery_id}/redeliver")
def redeliver(request: Request, delivery_id: str, csrf: Csrf = "", next: Next = "/") -> Response:
    """Publish the delivery's notification again."""
    return _act(
        request,
        csrf,
        next,
        console.redeliver,
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


def _decided(ident: str, approved: bool) -> str:
    """What the flash says once the operator decided on ``ident`` (a message, thread or brief)."""
    what = kind_of(ident)
    if what == "thread":
        done = "its participants see it" if approved else "it stays hidden"
        return f"{'Approved' if approved else 'Rejected'} thread {ident}: {done}."
    if what == "agent":
        done = "every agent may read it" if approved else "it is removed"
        return f"{'Approved' if approved else 'Rejected'} the brief of agent {ident}: {done}."
    if approved:
        return f"Approved {ident}: its recipients have it now."
    return f"Rejected {ident}: it never reaches its recipients; its sender is told."


@router.post("/approvals/{ident}/approve")
def approval_approve(
    request: Request, ident: str, csrf: Csrf = "", next: Next = "/approvals"
) -> Response:
    """``POST /v1/approvals/{id}/approve``: a message's recipients get it now; a thread or a
    brief is seen by the others."""
    return _act(
        request, csrf, next, approvals.approve, ident, success=_decided(ident, approved=True)
    )


@router.post("/approvals/{ident}/reject")
def approval_reject(
    request: Request,
    ident: str,
    csrf: Csrf = "",
    next: Next = "/approvals",
    reason: Text = "",
) -> Response:
    """``POST /v1/approvals/{id}/reject`` with the reason typed (optional)."""
    try:
        rejection = _request(DecisionRequest, reason=_optional(reason))
    except InbotsError as exc:  # a reason that cannot be stored: said, nothing changed
        session = form_session(request, csrf)
        session.say("error", exc.message)
        return redirect(request, local_path(next), session)
    return _act(
        request,
        csrf,
        next,
        approvals.reject,
        ident,
        rejection,
        success=_decided(ident, approved=False),
    )


@router.post("/approvals/policy")
def approval_policy(
    request: Request,
    csrf: Csrf = "",
    kinds: Annotated[list[str] | None, Form()] = None,
    priorities: Annotated[list[str] | None, Form()] = None,
    senders: Text = "",
) -> Response:
    """``PUT /v1/policy``: the kinds and priorities ticked and the senders typed (usernames,
    separated by commas or spaces) replace the policy whole."""
    session = form_session(request, csrf)
    names = senders.replace(",", " ").split()
    try:
        rules = {"kinds": kinds or [], "priorities": priorities or [], "senders": names}
        _write(request, session, approvals.set_policy, _request(PolicyUpdate, approval=rules))
    except InbotsError as exc:
        form = {"form": "policy", **rules, "senders": senders}
        return show_page(
            request,
            "approvals.html",
            "approvals",
            "Approvals",
            pages.approvals_page,
            session=session,
            form=form,
            form_error=exc,
        )
    session.say("ok", "Approval policy saved: it holds what is sent from now on.")
    return redirect(request, "/approvals", session)


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
    session = form_session(request, csrf)
    form = {"name": name, "description": description, "webhook_url": webhook_url}
    try:
        body = _request(
            AgentCreate,
            name=name.strip(),
            description=_optional(description),
            webhook_url=_optional(webhook_url.strip()),
        )
        created = _write(request, session, agents_service.register_agent, body)
    except InbotsError as exc:
        return show_page(
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
    session = form_session(request, csrf)
    try:
        if confirm != "yes":
            raise Invalid(
                "Tick the box to confirm: archiving revokes the agent's keys at once.",
                field="confirm",
            )
        archived = _write(request, session, agents_service.archive_agent, agent_id)
    except InbotsError as exc:
        return show_page(
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
    return redirect(request, "/agents", session)


@router.post("/agents/{agent_id}/webhook")
def agent_webhook(request: Request, agent_id: str, csrf: Csrf = "", url: Text = "") -> Response:
    """``PUT /v1/agents/{id}/webhook``: a first URL mints the signing secret, shown once."""
    session = form_session(request, csrf)
    try:
        body = _request(WebhookSet, url=url.strip())
        result = _write(request, session, actions.set_webhook, agent_id, body)
    except InbotsError as exc:
        return show_page(
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
        return redirect(request, f"/agents/{agent_id}", session)
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
    session = form_session(request, csrf)
    try:
        result = _write(request, session, actions.rotate_secret, agent_id)
    except InbotsError as exc:
        return show_page(
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
    session = form_session(request, csrf)
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
        return show_page(
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
    return redirect(request, f"/threads/{opened.id}", session)


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
    session = form_session(request, csrf)
    form = {"body": body, "summary": summary, "kind": kind, "priority": priority}
    try:
        message = _request(MessageCreate, **_message_fields(body, summary, kind, priority))
        sent = _write(request, session, messages.send_message, thread_id, message)
    except InbotsError as exc:
        return show_page(
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
    return redirect(request, f"/threads/{thread_id}#{sent.message.id}", session)


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
    session = form_session(request, csrf)
    form = {"form": "reply", "body": body, "summary": summary, "kind": kind}
    try:
        message = _request(MessageCreate, **_message_fields(body, summary, kind, ""))
        _write(request, session, actions.reply, delivery_id, message)
    except InbotsError as exc:
        return show_page(
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
    return redirect(request, f"/inbox/{delivery_id}", session)


@router.post("/inbox/{delivery_id}/ack")
def inbox_ack(
    request: Request, delivery_id: str, csrf: Csrf = "", outcome: Text = "", note: Text = ""
) -> Response:
    """``POST /v1/acks`` for this delivery: done or declined, with an optional note."""
    session = form_session(request, csrf)
    form = {"form": "ack", "outcome": outcome, "note": note}
    try:
        ack = _request(
            AckRequest, ids=[delivery_id], outcome=_optional(outcome), note=_optional(note)
        )
        result = _write(request, session, deliveries.acknowledge, ack)
        if delivery_id in result.not_found:  # the API answers 200 and lists it; a page says so
            raise not_found("delivery", delivery_id)
    except InbotsError as exc:
        return show_page(
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
        return redirect(request, "/inbox", session)
    said = {"declined": "Declined"}.get(outcome, "Acknowledged")
    session.say("ok", f"{said}; the sender sees it with your note." if note.strip() else f"{said}.")
    return redirect(request, "/inbox", session)


async def too_large_page(request: Request, message: str) -> Response:
    """A form larger than the request body limit (refused before it was read): the dashboard's
    error page, as a browser should show it, rather than the API's JSON."""
    return refusal_page(
        request,
        413,
        "Too large to send",
        f"{message} Nothing was changed: go back, shorten what you typed and send again.",
    )
