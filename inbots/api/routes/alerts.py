"""The operator's alert webhook (``/v1/operator/webhook``): see :mod:`inbots.alerts`."""

from __future__ import annotations

from fastapi import Response

from inbots.alerts import service
from inbots.alerts.schemas import AlertWebhookRead, AlertWebhookSet
from inbots.api.deps import ApiRouter, OperatorCtx

router = ApiRouter(tags=["alerts"])


@router.put("/operator/webhook", response_model=AlertWebhookRead)
def set_alert_webhook(ctx: OperatorCtx, body: AlertWebhookSet) -> AlertWebhookRead:
    """Set or change the operator's alert webhook URL and the alert types it receives
    (``events``; a new webhook receives them all). The signing secret is minted and shown in the
    first answer only."""
    return ctx.run(service.set_alert_webhook, body)


@router.get("/operator/webhook", response_model=AlertWebhookRead)
def get_alert_webhook(ctx: OperatorCtx) -> AlertWebhookRead:
    """The alert webhook's URL and alert types (never its secret); 404 when there is none."""
    return ctx.run(service.get_alert_webhook)


@router.delete("/operator/webhook", status_code=204)
def remove_alert_webhook(ctx: OperatorCtx) -> Response:
    """Remove the alert webhook and discard its secret for good."""
    ctx.run(service.remove_alert_webhook)
    return Response(status_code=204)


@router.post("/operator/webhook/rotate", response_model=AlertWebhookRead)
def rotate_alert_webhook(ctx: OperatorCtx) -> AlertWebhookRead:
    """Mint a new signing secret, shown in this answer only; the previous one keeps signing for
    the rotation overlap (24 hours by default)."""
    return ctx.run(service.rotate_alert_secret)
