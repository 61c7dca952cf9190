from __future__ import annotations

from fastapi import Response

from inbots.api.deps import (
    AgentCtx,
    ApiRouter,
    Ctx,
    IdempotencyKey,
    Limit,
    OperatorCtx,
    rendered,
)
from inbots.messages import reading
from inbots.messages import service as messages
from inbots.messages.schemas import (
    DirectMessageCreate,
    History,
    MessageCreate,
    SendResult,
    ThreadDetail,
)
from inbots.threads import service
from inbots.threads.schemas import (
    ParticipantAdd,
    ThreadCreate,
    ThreadPage,
    ThreadRead,
)
from inbots.web.errors import RATE_LIMITED

router = ApiRouter(tags=["threads"])


@router.post("/threads", status_code=201, response_model=ThreadRead)
def open_thread(ctx: Ctx, body: ThreadCreate) -> ThreadRead:
    """Open a thread for one task. The caller is its opener and a participant."""
    return ctx.run(service.open_thread, body)


@router.get("/threads", response_model=ThreadPage)
def list_threads(
    ctx: Ctx,
    limit: Limit,
    status: str | None = None,
    cursor: str | None = None,
    ref: str | None = None,
    query: str | None = None,
) -> ThreadPage:
    """Agents: threads they are in that are not closed. Operator: every thread (``?status=``).
    Most recent activity first; follow ``next_cursor`` for more. ``ref`` finds threads by task
    reference; ``query`` matches text in titles and goals (any case, taken literally)."""
    return ctx.run(service.thread_page, status, limit, cursor, ref=ref, query=query)


@router.get("/threads/{thread_id}", response_model=ThreadDetail, response_model_exclude_none=False)
def get_thread(ctx: Ctx, thread_id: str) -> ThreadDetail:
    """One thread with its participants; for the operator, every message with its receipts."""
    return ctx.run(reading.get_thread, thread_id)


@router.post("/threads/{thread_id}/participants", response_model=ThreadRead)
def add_participant(ctx: Ctx, thread_id: str, body: ParticipantAdd) -> ThreadRead:
    """Add an agent to the thread (idempotent)."""
    return ctx.run(service.add_participant, thread_id, body.username)


@router.post(
    "/threads/{thread_id}/messages",
    status_code=201,
    response_model=SendResult,
    responses={
        200: {
            "model": SendResult,
            "description": "A repeat of an earlier send with the same Idempotency-Key: the "
            "original message and deliveries, with duplicate set.",
        },
        429: RATE_LIMITED,
    },
)
def post_message(
    ctx: Ctx,
    thread_id: str,
    body: MessageCreate,
    idempotency_key: IdempotencyKey,
) -> Response:
    """Post to a thread. Repeating an ``Idempotency-Key`` answers 200 with the original."""
    result = ctx.run(messages.send_message, thread_id, body, idempotency_key)
    return rendered(result, 200 if result.duplicate else 201)


@router.post(
    "/messages",
    status_code=201,
    response_model=SendResult,
    tags=["messages"],
    responses={
        200: {
            "model": SendResult,
            "description": "A repeat of an earlier send with the same Idempotency-Key: the "
            "original message (and its thread) and deliveries, with duplicate set.",
        },
        429: RATE_LIMITED,
    },
)
def send_direct(
    ctx: Ctx,
    body: DirectMessageCreate,
    idempotency_key: IdempotencyKey,
) -> Response:
    """Open a new thread with ``to`` (usernames, or ``["*"]`` for every agent) and post its
    first message, in one transaction; ``message.thread_id`` is the new thread. Repeating an
    ``Idempotency-Key`` answers 200 with the original."""
    result = ctx.run(messages.send_direct, body, idempotency_key)
    return rendered(result, 200 if result.duplicate else 201)


@router.get("/threads/{thread_id}/messages", response_model=History)
def thread_history(
    ctx: Ctx,
    thread_id: str,
    limit: Limit,
    since: str | None = None,
    cursor: str | None = None,
) -> History:
    """History with full bodies, oldest first. Stamps the caller's deliveries fetched."""
    return ctx.run(reading.history, thread_id, since, limit, cursor)


@router.post("/threads/{thread_id}/close-request", status_code=202, response_model=ThreadRead)
def request_close(ctx: AgentCtx, thread_id: str) -> ThreadRead:
    """Ask the operator to close a thread you opened."""
    return ctx.run(service.request_close, thread_id)


@router.post("/threads/{thread_id}/close", response_model=ThreadRead)
def close_thread(ctx: OperatorCtx, thread_id: str) -> ThreadRead:
    """Close a thread (confirming a request, or outright)."""
    return ctx.run(service.close_thread, thread_id)


@router.post("/threads/{thread_id}/close/dismiss", response_model=ThreadRead)
def dismiss_close(ctx: OperatorCtx, thread_id: str) -> ThreadRead:
    """Dismiss a pending close request; the thread is open again."""
    return ctx.run(service.dismiss_close, thread_id)
