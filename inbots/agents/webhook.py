"""An agent's webhook: its URL and signing secret, set by the operator or by the agent itself.

Registering a URL mints a secret if the agent has none; changing the URL keeps it; removing the
webhook discards it for good (and resets the notification types to the default). Which types the
webhook receives (``webhook_events``, :mod:`inbots.webhooks.subscriptions`) is chosen with the
URL and kept when a later change omits it. Rotating mints a new secret and keeps the previous one
signing for the overlap (24 h), so both signatures go out and a handler can switch without a gap.
"""

from __future__ import annotations

from datetime import timedelta

from inbots.agents.service import find_agent
from inbots.auth import rate_limit
from inbots.caller import Caller
from inbots.db.uow import UnitOfWork, reads
from inbots.errors import Conflict, NotFound
from inbots.kit.clock import utcnow
from inbots.models.agents import Agent
from inbots.webhooks import signing, subscriptions
from inbots.webhooks.endpoint import apply_url, check_url, to_read
from inbots.webhooks.schemas import WebhookRead, WebhookSet


def _target(uow: UnitOfWork, caller: Caller, agent_ref: str | None) -> Agent:
    """The operator names an agent; an agent can only ever mean itself."""
    if agent_ref is None:
        caller.require_agent()
        return uow.session.get_one(Agent, caller.agent_id)
    caller.require_operator()
    return find_agent(uow, caller, agent_ref)


def _live(agent: Agent) -> Agent:
    """An agent a webhook can serve: an archived one receives nothing ever again (409)."""
    if agent.archived:
        raise Conflict(
            f"Agent {agent.username!r} is archived: it receives no mail or events any more, so a "
            "webhook (or a new signing secret) would serve nothing. Register a new agent instead."
        )
    return agent


def _existing(agent: Agent) -> Agent:
    if not agent.webhook_url or not agent.webhook_secret:
        raise NotFound(f"Agent {agent.username!r} has no webhook.")
    return agent


def set_webhook(
    uow: UnitOfWork, caller: Caller, agent_ref: str | None, request: WebhookSet
) -> WebhookRead:
    """Set or change the webhook URL (the secret is kept, or minted on first registration) and,
    when given, the notification types it receives (kept when omitted)."""
    agent = _live(_target(uow, caller, agent_ref))
    url = check_url(request.url, uow.settings)
    chosen = request.webhook_events
    types = subscriptions.check(chosen) if chosen is not None else None
    rate_limit.spend(uow, caller)
    apply_url(agent, url)
    if types is not None:
        agent.webhook_events = subscriptions.encode(types)
    uow.session.flush()
    return to_read(agent)


@reads
def get_webhook(uow: UnitOfWork, caller: Caller, agent_ref: str | None) -> WebhookRead:
    """The URL and secret; 404 when the agent has no webhook."""
    return to_read(_existing(_target(uow, caller, agent_ref)))


def remove_webhook(uow: UnitOfWork, caller: Caller, agent_ref: str | None) -> None:
    """Remove the URL and discard the secret for good (a later URL gets a new one). Idempotent."""
    agent = _target(uow, caller, agent_ref)
    rate_limit.spend(uow, caller)
    agent.webhook_url = None
    agent.webhook_secret = None
    agent.webhook_previous_secret = None
    agent.webhook_previous_secret_expires_at = None
    agent.webhook_events = subscriptions.DEFAULT_STORED  # a later webhook starts afresh
    uow.session.flush()


def rotate_secret(uow: UnitOfWork, caller: Caller, agent_ref: str | None) -> WebhookRead:
    """Mint a new secret; the previous one keeps signing (second signature) for the overlap."""
    agent = _existing(_live(_target(uow, caller, agent_ref)))
    rate_limit.spend(uow, caller)
    agent.webhook_previous_secret = agent.webhook_secret
    agent.webhook_previous_secret_expires_at = utcnow() + timedelta(
        seconds=signing.ROTATION_OVERLAP_SECONDS
    )
    agent.webhook_secret = signing.new_secret()
    uow.session.flush()
    return to_read(agent)
