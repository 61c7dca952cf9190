"""Read-only queries only the dashboard needs: webhook health, attempt logs and the context of
a list of deliveries. Each answers a whole page's worth of rows in one query."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import aliased

from inbots.agents.schemas import SessionRead
from inbots.agents.sessions import to_read as agent_session_read
from inbots.db.uow import UnitOfWork
from inbots.deliveries.schemas import AttemptRead
from inbots.deliveries.state_sql import state_filter
from inbots.kit.clock import utcnow
from inbots.kit.text import shown_summary
from inbots.models.agents import Agent, AgentSession
from inbots.models.deliveries import Delivery, DeliveryAttempt
from inbots.models.messages import Message
from inbots.models.threads import Thread

HEALTH_WINDOW = 20  # attempts per agent
HEALTH_PERIOD = timedelta(hours=24)

# The two roles an agent plays in a delivery's context, aliased once: SQLAlchemy adapts every
# column of a fresh alias anew, which cost the overview about a tenth of its time.
SENDER = aliased(Agent, name="sender")
RECIPIENT = aliased(Agent, name="recipient")


@dataclass
class WebhookHealth:
    """The latest attempts against an agent's current webhook URL."""

    ok: int = 0
    failed: int = 0
    last_reason: str | None = None
    last_status: int | None = None
    last_at: datetime | None = None
    # deliveries to the agent stamped failed in the period and still failed (not redelivered)
    failed_deliveries: int = 0

    @property
    def total(self) -> int:
        return self.ok + self.failed

    @property
    def level(self) -> str:
        """``none`` (no attempts), ``healthy``, ``degraded`` (some failed, last ok), ``failing``."""
        if self.total == 0:
            return "failing" if self.failed_deliveries else "none"
        if self.last_reason != "ok":
            return "failing"
        return "degraded" if self.failed or self.failed_deliveries else "healthy"


def webhook_health(
    uow: UnitOfWork, workspace_id: str, agent_ids: Sequence[str]
) -> dict[str, WebhookHealth]:
    """Health of each agent's webhook from its last attempts of the last 24 hours."""
    result = {agent_id: WebhookHealth() for agent_id in agent_ids}
    if not agent_ids:
        return result
    since = utcnow() - HEALTH_PERIOD
    rank = (
        func.row_number()
        .over(
            partition_by=Delivery.recipient_id,
            order_by=(DeliveryAttempt.started_at.desc(), DeliveryAttempt.id.desc()),
        )
        .label("rank")
    )
    ranked = (
        select(
            Delivery.recipient_id.label("agent_id"),
            DeliveryAttempt.reason,
            DeliveryAttempt.status_code,
            DeliveryAttempt.started_at,
            rank,
        )
        .join(Delivery, Delivery.id == DeliveryAttempt.delivery_id)
        .join(Agent, Agent.id == Delivery.recipient_id)
        .where(
            Delivery.workspace_id == workspace_id,
            Delivery.recipient_id.in_(agent_ids),
            DeliveryAttempt.started_at >= since,
            DeliveryAttempt.url == Agent.webhook_url,  # the URL it has now, not an old one
        )
        .subquery()
    )
    rows = uow.session.execute(
        select(ranked.c.agent_id, ranked.c.reason, ranked.c.status_code, ranked.c.started_at)
        .where(ranked.c.rank <= HEALTH_WINDOW)
        .order_by(ranked.c.agent_id, ranked.c.rank)
    ).all()
    for agent_id, reason, status_code, started_at in rows:
        health = result[agent_id]
        if health.last_at is None:
            health.last_reason, health.last_status, health.last_at = reason, status_code, started_at
        if reason == "ok":
            health.ok += 1
        else:
            health.failed += 1
    failed = uow.session.execute(
        select(Delivery.recipient_id, func.count())
        .where(
            Delivery.workspace_id == workspace_id,
            Delivery.recipient_id.in_(agent_ids),
            Delivery.failed_at >= since,
            state_filter(Delivery, "failed"),  # still failed: not one a redeliver got through
        )
        .group_by(Delivery.recipient_id)
    ).all()
    for agent_id, count in failed:
        result[agent_id].failed_deliveries = int(count)
    return result


def attempts_for(uow: UnitOfWork, delivery_ids: Sequence[str]) -> dict[str, list[AttemptRead]]:
    """Every delivery's attempt log, in order."""
    result: dict[str, list[AttemptRead]] = defaultdict(list)
    if not delivery_ids:
        return result
    rows = uow.session.scalars(
        select(DeliveryAttempt)
        .where(DeliveryAttempt.delivery_id.in_(delivery_ids))
        .order_by(DeliveryAttempt.delivery_id, DeliveryAttempt.number)
    ).all()
    for attempt in rows:
        if attempt.delivery_id is not None:  # always, by the query: the log also holds events'
            result[attempt.delivery_id].append(AttemptRead.model_validate(attempt))
    return result


@dataclass(frozen=True)
class DeliveryContext:
    """What a delivery is about: its thread, message and sender, and whether its recipient has a
    webhook (without one there is nothing to redeliver)."""

    thread_title: str
    message_kind: str
    summary: str
    sender: str
    recipient_webhook: str | None


def delivery_context(
    uow: UnitOfWork, workspace_id: str, delivery_ids: Sequence[str]
) -> dict[str, DeliveryContext]:
    if not delivery_ids:
        return {}
    sender, recipient = SENDER, RECIPIENT
    rows = uow.session.execute(
        select(
            Delivery.id,
            Thread.title,
            Message.kind,
            Message.summary,
            func.substr(Message.body, 1, 400),
            sender.username,
            recipient.webhook_url,
        )
        .join(Message, Message.id == Delivery.message_id)
        .join(Thread, Thread.id == Delivery.thread_id)
        .join(sender, sender.id == Message.sender_id)
        .join(recipient, recipient.id == Delivery.recipient_id)
        .where(Delivery.workspace_id == workspace_id, Delivery.id.in_(delivery_ids))
    ).all()
    limit = uow.settings.summary_shown
    return {
        row[0]: DeliveryContext(
            thread_title=row[1],
            message_kind=row[2],
            summary=shown_summary(row[3], row[4] or "", limit),
            sender=row[5],
            recipient_webhook=row[6],
        )
        for row in rows
    }


SESSIONS_SHOWN = 3  # per agent on the agents page, most recently seen first


def agent_sessions(
    uow: UnitOfWork, agent_ids: Sequence[str]
) -> dict[str, tuple[list[SessionRead], int]]:
    """Each agent's most recently seen sessions (at most :data:`SESSIONS_SHOWN`) and how many
    it has in all, in two queries whatever the number of agents."""
    if not agent_ids:
        return {}
    totals = dict(
        uow.session.execute(
            select(AgentSession.agent_id, func.count())
            .where(AgentSession.agent_id.in_(agent_ids))
            .group_by(AgentSession.agent_id)
        ).all()
    )
    ranked = (
        select(
            AgentSession.id,
            func.row_number()
            .over(
                partition_by=AgentSession.agent_id,
                order_by=(AgentSession.last_seen_at.desc(), AgentSession.id),
            )
            .label("rank"),
        )
        .where(AgentSession.agent_id.in_(agent_ids))
        .subquery()
    )
    rows = uow.session.scalars(
        select(AgentSession)
        .join(ranked, ranked.c.id == AgentSession.id)
        .where(ranked.c.rank <= SESSIONS_SHOWN)
        .order_by(AgentSession.agent_id, AgentSession.last_seen_at.desc(), AgentSession.id)
    ).all()
    shown: dict[str, list[SessionRead]] = defaultdict(list)
    for row in rows:
        shown[row.agent_id].append(agent_session_read(row, uow.settings))
    return {agent_id: (shown[agent_id], int(total)) for agent_id, total in totals.items()}
