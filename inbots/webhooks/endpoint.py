"""An agent row's webhook endpoint: the URL policy at registration, minting the secret, and the
read model. No lookups, so registering an agent (:mod:`inbots.agents.service`) and managing its
webhook (:mod:`inbots.agents.webhook`) both build on it."""

from __future__ import annotations

from inbots.config import Settings
from inbots.errors import WebhookUrlRejected
from inbots.kit.clock import utcnow
from inbots.models.agents import Agent
from inbots.webhooks import signing, subscriptions, url_policy
from inbots.webhooks.schemas import WebhookRead


def check_url(url: str, settings: Settings, field: str = "url") -> str:
    """The URL policy at registration time; 422 ``webhook_url_rejected`` naming the field."""
    try:
        return url_policy.resolve(url, settings.webhook_allow_private).url
    except url_policy.RejectedURL as exc:
        raise WebhookUrlRejected(str(exc), field=field) from None


def to_read(agent: Agent) -> WebhookRead:
    assert agent.webhook_url and agent.webhook_secret
    expires = agent.webhook_previous_secret_expires_at
    if expires is not None and expires <= utcnow():
        expires = None
    return WebhookRead(
        url=agent.webhook_url,
        signing_secret=agent.webhook_secret,
        previous_secret_expires_at=expires,
        webhook_events=subscriptions.decode(agent.webhook_events),
    )


def apply_url(agent: Agent, url: str) -> None:
    """Point the agent's webhook at ``url`` (already checked), minting a secret if it has none."""
    agent.webhook_url = url
    if not agent.webhook_secret:
        agent.webhook_secret = signing.new_secret()
