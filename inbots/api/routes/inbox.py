from __future__ import annotations

import asyncio
import contextlib

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from inbots.api.deps import AgentCtx, AuthFirstRoute, Ctx, OperatorCtx
from inbots.deliveries import service
from inbots.deliveries.schemas import AckRequest, AckResult, DeliveryRead, Inbox
from inbots.messages import service as messages
from inbots.messages.schemas import MessageWithDelivery

router = APIRouter(tags=["inbox"], route_class=AuthFirstRoute)


@router.get("/inbox", response_model=Inbox)
def inbox(ctx: AgentCtx, limit: str | None = None) -> Inbox:
    """Unacknowledged mail, oldest first, summaries only. Stamps delivered, never fetched."""
    return ctx.run(service.inbox, limit)


@router.get("/operator/inbox", response_model=Inbox)
def operator_inbox(ctx: OperatorCtx, limit: str | None = None) -> Inbox:
    """Deliveries addressed to the operator, as ``/v1/inbox``."""
    return ctx.run(service.inbox, limit)


def _wait_seconds(raw: str | None, default: float, maximum: float) -> float:
    try:
        value = float(raw) if raw is not None else default
    except ValueError:
        return default
    if value != value:  # NaN
        return default
    return min(max(value, 1.0), maximum)


@router.get("/inbox/wait", response_model=Inbox)
async def wait_for_mail(ctx: AgentCtx, timeout: str | None = None) -> Inbox:
    """Long-poll: answers as soon as there is unacknowledged mail not yet shown, or at the timeout
    (then ``items`` is empty). Waiting holds neither a database connection nor a thread."""
    settings = ctx.request.app.state.settings
    seconds = _wait_seconds(timeout, settings.wait_default_seconds, settings.wait_max_seconds)
    hub = ctx.request.app.state.dispatch.wakeups
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    with hub.listen(ctx.caller.agent_id) as woken:
        while not await run_in_threadpool(ctx.run, service.has_unshown):
            remaining = deadline - loop.time()
            if remaining <= 0:
                waiting = await run_in_threadpool(ctx.run, service.waiting_count)
                return Inbox(items=[], returned=0, waiting=waiting, more=waiting > 0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), timeout=remaining)
            woken.clear()
    return await run_in_threadpool(ctx.run, service.inbox, None, unshown_only=True)


@router.get("/messages/{message_or_delivery_id}", response_model=MessageWithDelivery)
def read_message(ctx: Ctx, message_or_delivery_id: str) -> MessageWithDelivery:
    """One message with its full body. Stamps the caller's delivery fetched."""
    return ctx.run(messages.read_message, message_or_delivery_id)


@router.post("/deliveries/{delivery_id}/received", response_model=DeliveryRead)
def received(ctx: Ctx, delivery_id: str) -> DeliveryRead:
    """A webhook handler confirms it woke its agent: stamps delivered."""
    return ctx.run(service.mark_received, delivery_id)


@router.post("/acks", response_model=AckResult)
def acknowledge(ctx: Ctx, body: AckRequest) -> AckResult:
    """Acknowledge 1–100 messages or deliveries (done or declined). Idempotent."""
    return ctx.run(service.acknowledge, body.ids, body.outcome, body.note)
