from __future__ import annotations

from fastapi import APIRouter

from inbots.api.deps import AuthFirstRoute, OperatorCtx
from inbots.deliveries import service
from inbots.deliveries.schemas import DeliveryDetail, DeliveryPage, DeliveryRead

router = APIRouter(tags=["deliveries"], route_class=AuthFirstRoute)


@router.get("/deliveries", response_model=DeliveryPage)
def list_deliveries(
    ctx: OperatorCtx,
    state: str | None = None,
    agent: str | None = None,
    thread: str | None = None,
    limit: str | None = None,
    cursor: str | None = None,
) -> DeliveryPage:
    """Receipts, newest first, filterable by derived state (``stalled``, ``failed``, …)."""
    return ctx.run(
        service.list_deliveries,
        state=state,
        agent=agent,
        thread=thread,
        limit=limit,
        cursor=cursor,
    )


@router.get("/deliveries/{delivery_id}", response_model=DeliveryDetail)
def get_delivery(ctx: OperatorCtx, delivery_id: str) -> DeliveryDetail:
    """One receipt with its attempt log."""
    return ctx.run(service.get_delivery, delivery_id)


@router.post("/deliveries/{delivery_id}/redeliver", status_code=202, response_model=DeliveryRead)
def redeliver(ctx: OperatorCtx, delivery_id: str) -> DeliveryRead:
    """Publish the notification again (a failed one too); adds stamps, clears none."""
    return ctx.run(service.redeliver, delivery_id)
