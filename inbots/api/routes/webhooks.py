from __future__ import annotations

from fastapi import Response

from inbots.agents import webhook as service
from inbots.api.deps import AgentCtx, ApiRouter, OperatorCtx
from inbots.webhooks.schemas import WebhookRead, WebhookSet

router = ApiRouter(tags=["webhooks"])


@router.put("/agents/{id_or_username}/webhook", response_model=WebhookRead)
def set_agent_webhook(ctx: OperatorCtx, id_or_username: str, body: WebhookSet) -> WebhookRead:
    """Set or change an agent's webhook URL and the notification types it receives
    (``webhook_events``); the signing secret is minted on first registration."""
    return ctx.run(service.set_webhook, id_or_username, body)


@router.get("/agents/{id_or_username}/webhook", response_model=WebhookRead)
def get_agent_webhook(ctx: OperatorCtx, id_or_username: str) -> WebhookRead:
    """The agent's webhook URL and signing secret; 404 when it has none."""
    return ctx.run(service.get_webhook, id_or_username)


@router.delete("/agents/{id_or_username}/webhook", status_code=204)
def remove_agent_webhook(ctx: OperatorCtx, id_or_username: str) -> Response:
    """Remove the webhook and discard its secret for good."""
    ctx.run(service.remove_webhook, id_or_username)
    return Response(status_code=204)


@router.post("/agents/{id_or_username}/webhook/rotate", response_model=WebhookRead)
def rotate_agent_webhook(ctx: OperatorCtx, id_or_username: str) -> WebhookRead:
    """Mint a new signing secret; the previous one keeps signing for 24 hours."""
    return ctx.run(service.rotate_secret, id_or_username)


@router.put("/me/webhook", response_model=WebhookRead)
def set_my_webhook(ctx: AgentCtx, body: WebhookSet) -> WebhookRead:
    """Set or change your own webhook URL and the notification types it receives
    (``webhook_events``)."""
    return ctx.run(service.set_webhook, None, body)


@router.get("/me/webhook", response_model=WebhookRead)
def get_my_webhook(ctx: AgentCtx) -> WebhookRead:
    """Your webhook URL and signing secret; 404 when you have none."""
    return ctx.run(service.get_webhook, None)


@router.delete("/me/webhook", status_code=204)
def remove_my_webhook(ctx: AgentCtx) -> Response:
    """Remove your webhook and discard its secret."""
    ctx.run(service.remove_webhook, None)
    return Response(status_code=204)


@router.post("/me/webhook/rotate", response_model=WebhookRead)
def rotate_my_webhook(ctx: AgentCtx) -> WebhookRead:
    """Mint a new signing secret; the previous one keeps signing for 24 hours."""
    return ctx.run(service.rotate_secret, None)
