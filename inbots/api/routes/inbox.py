from __future__ import annotations

from fastapi import Response

from inbots.api.deps import ApiRouter, Ctx, Limit, OperatorCtx, WaitSeconds, rendered
from inbots.deliveries import service, wait
from inbots.deliveries.schemas import (
    AckRequest,
    AckResult,
    DeliveryRead,
    Inbox,
    ReadRequest,
    Waited,
)
from inbots.messages import reading
from inbots.messages.schemas import MessageWithDelivery, Outbox
from inbots.web.errors import EXPIRED

router = ApiRouter(tags=["inbox"])


@router.get("/inbox", response_model=Inbox)
def inbox(
    ctx: Ctx,
    limit: Limit,
    cursor: str | None = None,
    include: str | None = None,
    status: str | None = None,
    priority: str | None = None,
    since: str | None = None,
) -> Response:
    """Your mail, urgent first, then oldest first: by default the unacknowledged, summaries only
    (stamps delivered, never fetched). ``cursor`` (the previous answer's ``next_cursor``) pages
    on without acknowledging anything; ``include=body`` adds bodies (at most 20 a page) and
    stamps those fetched; ``status=unacked|acked|all``; ``priority=urgent``; ``since=`` a
    delivery id or an RFC 3339 time. With the operator token: the operator's own mail (replies
    and mail addressed to ``operator``)."""
    return rendered(
        ctx.run(
            service.inbox,
            limit,
            cursor=cursor,
            include=include,
            status=status,
            priority=priority,
            since=since,
        )
    )


@router.get("/operator/inbox", response_model=Inbox)
def operator_inbox(
    ctx: OperatorCtx,
    limit: Limit,
    cursor: str | None = None,
    include: str | None = None,
    status: str | None = None,
    priority: str | None = None,
    since: str | None = None,
) -> Response:
    """The operator's own mail: an alias of ``/v1/inbox`` called with the operator token."""
    return inbox(ctx, limit, cursor, include, status, priority, since)


@router.get("/inbox/wait", response_model=Waited)
async def wait_for_mail(ctx: Ctx, seconds: WaitSeconds, events: str | None = None) -> Waited:
    """Long-poll: answers as soon as there is unacknowledged mail not yet shown, or at the timeout
    (then ``items`` is empty). ``events=receipts`` also answers when a recipient acknowledged a
    message you sent (``receipts``). Waiting holds neither a database connection nor a thread.
    With the operator token it waits for the operator's own mail."""
    receipts = wait.wants_receipts(events)
    hub = ctx.request.app.state.dispatch.wakeups
    return await wait.wait_for_mail(ctx.run_async, hub, ctx.caller, seconds, receipts=receipts)


@router.get("/outbox", response_model=Outbox)
def outbox(
    ctx: Ctx,
    limit: Limit,
    state: str | None = None,
    thread: str | None = None,
    cursor: str | None = None,
) -> Outbox:
    """Messages you sent, newest first, each with every recipient's receipt (state, stamps,
    outcome, note). ``state`` keeps messages with a receipt in that state; ``thread`` one
    thread's."""
    return ctx.run(reading.outbox, state, thread, limit, cursor)


@router.get(
    "/messages/{message_or_delivery_id}", response_model=MessageWithDelivery, responses=EXPIRED
)
def read_message(
    ctx: Ctx, message_or_delivery_id: str, ack: str | None = None, note: str | None = None
) -> MessageWithDelivery:
    """One message with its full body. Stamps the caller's delivery fetched. Its sender also
    gets every recipient's receipt (``receipts``). ``ack=done|declined`` (and ``note``) also
    acknowledges it: kept for compatibility; ``POST /v1/messages/{id}/read`` is the way."""
    return _read(ctx, message_or_delivery_id, ack, note)


@router.post(
    "/messages/{message_or_delivery_id}/read",
    response_model=MessageWithDelivery,
    responses=EXPIRED,
)
def read_and_acknowledge(
    ctx: Ctx, message_or_delivery_id: str, body: ReadRequest | None = None
) -> MessageWithDelivery:
    """One message with its full body, as ``GET /v1/messages/{id}`` answers it (stamps the
    caller's delivery fetched); with ``ack`` (``done`` or ``declined``, and an optional
    ``note``) it also acknowledges the caller's copy, in the same transaction. The body may be
    left out (only read)."""
    request = body or ReadRequest()
    return _read(ctx, message_or_delivery_id, request.ack, request.note)


def _read(ctx: Ctx, ident: str, ack: str | None, note: str | None) -> MessageWithDelivery:
    if ack is None and note is None:
        return ctx.run(reading.read_message, ident)
    return ctx.run(reading.read_and_acknowledge, ident, ack, note)


@router.post("/deliveries/{delivery_id}/received", response_model=DeliveryRead, responses=EXPIRED)
def received(ctx: Ctx, delivery_id: str) -> DeliveryRead:
    """A webhook handler confirms it woke its agent: stamps delivered."""
    return ctx.run(service.mark_received, delivery_id)


@router.post("/acks", response_model=AckResult)
def acknowledge(ctx: Ctx, body: AckRequest) -> AckResult:
    """Acknowledge 1–100 messages or deliveries (done or declined). Idempotent."""
    return ctx.run(service.acknowledge, body)
