"""What each page shows, built in the request's unit of work from the same service functions the
API calls (plus :mod:`inbots.dashboard.queries`). Each returns the template's variables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inbots.agents import service as agents
from inbots.agents.schemas import AgentRead
from inbots.approvals import service as approvals
from inbots.caller import Caller
from inbots.dashboard import queries
from inbots.db.uow import UnitOfWork
from inbots.deliveries import console
from inbots.deliveries import service as deliveries
from inbots.deliveries.schemas import OUTCOMES, AttemptRead, DeliveryRead
from inbots.dispatch.backlog import Backlog
from inbots.errors import not_found
from inbots.messages import reading
from inbots.models.agents import ARCHIVED
from inbots.models.messages import KINDS, PRIORITIES
from inbots.models.threads import CLOSE_REQUESTED
from inbots.reservations import service as reservations
from inbots.stats.service import get_stats
from inbots.threads import service as threads

# The choices of a message form: left at the default, the field is left out of the call.
MESSAGE_OPTIONS = {
    "kind_options": [("", "update (default)"), *((k, k) for k in KINDS if k != "update")],
    "priority_options": [("", "normal (default)"), *((p, p) for p in PRIORITIES if p != "normal")],
    "outcomes": OUTCOMES,
}

OPS_LIMIT = 50  # stalled and failed deliveries listed on the overview, each


@dataclass(frozen=True)
class OpsRow:
    delivery: DeliveryRead
    context: queries.DeliveryContext | None
    attempts: list[AttemptRead]


def _ops_rows(uow: UnitOfWork, caller: Caller, items: list[DeliveryRead]) -> list[OpsRow]:
    ids = [d.id for d in items]
    context = queries.delivery_context(uow, caller.workspace_id, ids)
    attempts = queries.attempts_for(uow, ids)
    return [OpsRow(d, context.get(d.id), attempts.get(d.id, [])) for d in items]


# The overview's chips: every derived state, in the order mail moves through them, then the
# approval gate's and expiry's (tests check that none of STATES is left out).
STATE_CHIPS = (
    "accepted",
    "notified",
    "delivered",
    "fetched",
    "working",
    "acknowledged",
    "stalled",
    "failed",
    "held",
    "rejected",
    "expired",
)


def overview(uow: UnitOfWork, caller: Caller, waiting: Backlog | None) -> dict[str, Any]:
    """Counters, and the stalled and failed deliveries with their attempt logs (``waiting``:
    the backlog, read before the unit began)."""
    stats = get_stats(uow, caller, waiting)
    stalled = console.list_deliveries(uow, caller, state="stalled", limit=OPS_LIMIT).items
    failed = console.list_deliveries(uow, caller, state="failed", limit=OPS_LIMIT).items
    return {
        "stats": stats,
        "stalled": _ops_rows(uow, caller, stalled),
        "failed": _ops_rows(uow, caller, failed),
        "ops_limit": OPS_LIMIT,
        "state_chips": STATE_CHIPS,
        "reservations_active": reservations.active_count(uow, caller),
    }


def _activity_rank(agent: AgentRead) -> int:
    if agent.active:
        return 0
    if agent.never_connected:
        return 2
    return 1


def agent_list(uow: UnitOfWork, caller: Caller) -> dict[str, Any]:
    """Agents grouped (current, archived) with each webhook's health and their latest
    sessions."""
    everyone = agents.list_agents(uow, caller)
    current = sorted(
        (a for a in everyone if a.status != ARCHIVED),
        key=lambda a: (_activity_rank(a), a.username),
    )
    archived = [a for a in everyone if a.status == ARCHIVED]
    health = queries.webhook_health(
        uow, caller.workspace_id, [a.id for a in everyone if a.webhook_url]
    )
    return {
        "current": current,
        "archived": archived,
        "health": health,
        "briefs": agents.briefs(uow, caller),
        "sessions": queries.agent_sessions(uow, [a.id for a in current]),
        "counts": {
            "active": sum(1 for a in current if a.active),
            "never_connected": sum(1 for a in current if a.never_connected),
            "archived": len(archived),
            "webhooks": sum(1 for a in current if a.webhook_url),
        },
        "health_window": queries.HEALTH_WINDOW,
    }


def thread_list(uow: UnitOfWork, caller: Caller, status: str | None) -> dict[str, Any]:
    """Threads (optionally of one status), and the pending close requests."""
    limit = uow.settings.list_max
    items = threads.list_threads(uow, caller, status=status, limit=limit)
    pending = (
        items
        if status == CLOSE_REQUESTED
        else threads.list_threads(uow, caller, status=CLOSE_REQUESTED, limit=limit)
    )
    return {"threads": items, "pending": pending, "status": status or "", "limit": limit}


def delivery_view(uow: UnitOfWork, caller: Caller, delivery_id: str) -> dict[str, Any]:
    """One receipt and its whole attempt log."""
    detail = console.get_delivery(uow, caller, delivery_id)
    context = queries.delivery_context(uow, caller.workspace_id, [detail.id]).get(detail.id)
    return {"delivery": detail, "context": context}


def agent_view(uow: UnitOfWork, caller: Caller, agent_ref: str) -> dict[str, Any]:
    """One agent: what the agents page says of it, plus its webhook forms and archive button."""
    agent = agents.get_agent(uow, caller, agent_ref)
    health = queries.webhook_health(
        uow, caller.workspace_id, [agent.id] if agent.webhook_url else []
    )
    return {"agent": agent, "health": health.get(agent.id)}


def agent_form(uow: UnitOfWork, caller: Caller) -> dict[str, Any]:
    """The register form needs nothing but the operator (checked here, as the API would)."""
    caller.require_operator()
    return {}


def thread_form(uow: UnitOfWork, caller: Caller) -> dict[str, Any]:
    """Who a new thread can be opened with: every agent that can receive mail."""
    everyone = agents.list_agents(uow, caller)
    return {
        "recipients": sorted(a.username for a in everyone if a.status != ARCHIVED),
        **MESSAGE_OPTIONS,
    }


def thread_view(uow: UnitOfWork, caller: Caller, thread_id: str) -> dict[str, Any]:
    """One thread, every message, every recipient's receipt, and the operator's post form."""
    return {
        "thread": reading.get_thread(uow, caller, thread_id),
        **MESSAGE_OPTIONS,
    }


INBOX_TABS = (("unacked", "Waiting"), ("acked", "Acknowledged"), ("all", "All"))


def inbox_page(
    uow: UnitOfWork, caller: Caller, status: str | None, cursor: str | None
) -> dict[str, Any]:
    """The operator's own mail (``GET /v1/inbox`` with the operator token): listing it stamps it
    delivered, as for any recipient."""
    page = deliveries.inbox(uow, caller, None, cursor=cursor, status=status)
    return {
        "inbox": page,
        "status": status or "unacked",
        "tabs": INBOX_TABS,
        "cursor": cursor or "",
    }


def inbox_message(uow: UnitOfWork, caller: Caller, delivery_id: str) -> dict[str, Any]:
    """One message of the operator's inbox with its whole body (``GET /v1/messages/{id}``:
    stamps it fetched), and the reply and acknowledge forms."""
    read = reading.read_message(uow, caller, delivery_id)
    if read.delivery is None or read.delivery.id != delivery_id:
        raise not_found("delivery", delivery_id)
    thread = threads.get_thread(uow, caller, read.message.thread_id)
    return {
        "read": read,
        "thread": thread,
        **MESSAGE_OPTIONS,
    }


def approvals_page(uow: UnitOfWork, caller: Caller) -> dict[str, Any]:
    """The approval queue: what waits for the operator, oldest first, each with Approve and
    Reject (``GET /v1/approvals``), and the policy that holds it, with its form."""
    return {
        "approvals": approvals.list_pending(uow, caller).items,
        "policy": approvals.get_policy(uow, caller).approval,
        "kinds": KINDS,
        "priorities": PRIORITIES,
    }


RESERVATIONS_SHOWN = 200


def reservations_page(uow: UnitOfWork, caller: Caller) -> dict[str, Any]:
    """The agents' active reservations, newest first (``GET /v1/reservations?active=true``)."""
    page = reservations.list_reservations(uow, caller, active=True, limit=RESERVATIONS_SHOWN)
    return {"reservations": page.items, "more": page.next_cursor is not None}
