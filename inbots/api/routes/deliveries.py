from __future__ import annotations

from inbots.api.deps import ApiRouter, Ctx, Limit, OperatorCtx
from inbots.deliveries import console, service
from inbots.deliveries.schemas import DeliveryDetail, DeliveryPage, DeliveryRead, WorkingRequest
from inbots.web.errors import EXPIRED

router = ApiRouter(tags=["deliveries"])


@router.get("/deliveries", response_model=DeliveryPage)
def list_deliveries(
    ctx: OperatorCtx,
    limit: Limit,
    state: str | None = None,
    agent: str | None = None,
    thread: str | None = None,
    cursor: str | None = None,
) -> DeliveryPage:
    """Receipts, newest first, filterable by derived state (``stalled``, ``failed``, …)."""
    return ctx.run(
        console.list_deliveries,
        state=state,
        agent=agent,
        thread=thread,
        limit=limit,
        cursor=cursor,
    )


@router.get("/deliveries/{delivery_id}", response_model=DeliveryDetail)
def get_delivery(ctx: OperatorCtx, delivery_id: str) -> DeliveryDetail:
    """One receipt with its attempt log."""
    return ctx.run(console.get_delivery, delivery_id)


@router.post("/deliveries/{delivery_id}/redeliver", status_code=202, response_model=DeliveryRead)
def redeliver(ctx: OperatorCtx, delivery_id: str) -> DeliveryRead:
    """Publish the notification again (a failed one too); adds stamps, clears none."""
    return ctx.run(console.redeliver, delivery_id)


@router.post("/deliveries/{delivery_id}/working", response_model=DeliveryRead, responses=EXPIRED)
def working(ctx: Ctx, delivery_id: str, body: WorkingRequest | None = None) -> DeliveryRead:
    """The recipient is working on this delivery: stamps ``working_at`` again on every call (a
    heartbeat; not stalled until ``INBOTS_WORKING_STALL_SECONDS`` pass without one), with an
    optional ``note`` its sender sees in the receipt. Someone else's delivery: 404; an
    acknowledged one: 409 ``already_acknowledged``."""
    return ctx.run(service.working, delivery_id, body or WorkingRequest())
