"""Dashboard actions that are more than one service call, each run in one unit of work.

Nothing here decides anything the services do not: each function calls the same service
functions as the HTTP API, in the order a client of the API would, so one transaction holds
what the operator did with one form (a thread and its first message commit together or not at
all).
"""

from __future__ import annotations

from dataclasses import dataclass

from inbots.agents import service as agents
from inbots.agents import webhook as webhooks
from inbots.caller import Caller
from inbots.db.uow import UnitOfWork
from inbots.deliveries import service as deliveries
from inbots.messages import service as messages
from inbots.messages.schemas import MessageCreate, SendResult
from inbots.threads import service as threads
from inbots.threads.schemas import ThreadCreate, ThreadRead
from inbots.webhooks.schemas import WebhookRead, WebhookSet


def open_thread(
    uow: UnitOfWork, caller: Caller, thread: ThreadCreate, first: MessageCreate | None
) -> ThreadRead:
    """``POST /v1/threads``, then (with a first message) ``POST /v1/threads/{id}/messages``."""
    opened = threads.open_thread(uow, caller, thread)
    if first is not None:
        messages.send_message(uow, caller, opened.id, first)
    return opened


def reply(uow: UnitOfWork, caller: Caller, delivery_id: str, answer: MessageCreate) -> SendResult:
    """The reply form of a message in the operator's inbox: ``POST /v1/threads/{id}/messages``
    in its delivery's thread with ``reply_to`` its message, both read from the operator's own
    delivery (404 if it is not one), never taken from the form."""
    delivery = deliveries.own_delivery(uow, caller, delivery_id)
    answer = answer.model_copy(update={"reply_to": delivery.message_id})
    return messages.send_message(uow, caller, delivery.thread_id, answer)


@dataclass(frozen=True)
class WebhookResult:
    agent: str  # the agent's username
    webhook: WebhookRead
    minted: bool  # the signing secret is new: shown this once


def set_webhook(
    uow: UnitOfWork, caller: Caller, agent_ref: str, request: WebhookSet
) -> WebhookResult:
    """``PUT /v1/agents/{id}/webhook``, saying whether the signing secret is new."""
    before = agents.get_agent(uow, caller, agent_ref)
    webhook = webhooks.set_webhook(uow, caller, agent_ref, request)
    return WebhookResult(before.username, webhook, minted=before.webhook_url is None)


def rotate_secret(uow: UnitOfWork, caller: Caller, agent_ref: str) -> WebhookResult:
    """``POST /v1/agents/{id}/webhook/rotate``, with the agent's username for the page."""
    webhook = webhooks.rotate_secret(uow, caller, agent_ref)
    agent = agents.get_agent(uow, caller, agent_ref)
    return WebhookResult(agent.username, webhook, minted=True)
