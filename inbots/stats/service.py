"""Counts over one workspace, each answered by one aggregate query."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func, select

from inbots.agents.models import KIND_AGENT, Agent
from inbots.auth.service import Caller
from inbots.db.uow import UnitOfWork
from inbots.deliveries.models import Delivery, DeliveryAttempt
from inbots.deliveries.state import STATES, state_filter, state_sql
from inbots.kit.clock import utcnow
from inbots.stats.schemas import AgentCounts, Stats, ThreadCounts
from inbots.threads.models import CLOSE_REQUESTED, CLOSED, OPEN, Thread

HOUR = timedelta(hours=1)


def _age(now: datetime, then: datetime | None) -> float | None:
    return None if then is None else round(max((now - then).total_seconds(), 0.0), 3)


def delivery_counts(uow: UnitOfWork, workspace_id: str) -> dict[str, int]:
    state = state_sql(Delivery).label("state")
    rows = uow.session.execute(
        select(state, func.count()).where(Delivery.workspace_id == workspace_id).group_by(state)
    ).all()
    counts = dict.fromkeys(STATES, 0)
    counts.update({name: int(n) for name, n in rows})
    counts["total"] = sum(counts[s] for s in STATES)
    return counts


def get_stats(uow: UnitOfWork, caller: Caller) -> Stats:
    caller.require_operator()
    session, settings, ws = uow.session, uow.settings, caller.workspace_id
    now = utcnow()

    agents = session.execute(
        select(
            func.count().filter(Agent.status == "active"),
            func.count().filter(
                Agent.status == "active",
                Agent.last_seen_at > now - timedelta(seconds=settings.active_seconds),
            ),
            func.count().filter(
                Agent.status == "active",
                Agent.last_seen_at.is_(None),
                Agent.created_at <= now - timedelta(seconds=settings.new_agent_grace_seconds),
            ),
            func.count().filter(Agent.status == "archived"),
        ).where(Agent.workspace_id == ws, Agent.kind == KIND_AGENT)
    ).one()

    threads = dict(
        session.execute(
            select(Thread.status, func.count())
            .where(Thread.workspace_id == ws)
            .group_by(Thread.status)
        ).all()
    )

    oldest_stalled = session.scalar(
        select(func.min(Delivery.moved_at)).where(
            Delivery.workspace_id == ws, state_filter(Delivery, "stalled")
        )
    )
    oldest_unnotified = session.scalar(
        select(func.min(Delivery.accepted_at)).where(
            Delivery.workspace_id == ws,
            Delivery.publish_count > 0,
            Delivery.notified_at.is_(None),
            Delivery.failed_at.is_(None),
            Delivery.acknowledged_at.is_(None),
        )
    )
    failed_last_hour = session.scalar(
        select(func.count()).where(Delivery.workspace_id == ws, Delivery.failed_at >= now - HOUR)
    )
    attempts_failed = session.scalar(
        select(func.count())
        .select_from(DeliveryAttempt)
        .join(Delivery, Delivery.id == DeliveryAttempt.delivery_id)
        .where(
            Delivery.workspace_id == ws,
            DeliveryAttempt.started_at >= now - HOUR,
            DeliveryAttempt.reason != "ok",
        )
    )
    return Stats(
        deliveries=delivery_counts(uow, ws),
        agents=AgentCounts(
            total=agents[0], active=agents[1], never_connected=agents[2], archived=agents[3]
        ),
        threads=ThreadCounts(
            open=threads.get(OPEN, 0),
            close_requested=threads.get(CLOSE_REQUESTED, 0),
            closed=threads.get(CLOSED, 0),
        ),
        oldest_stalled_seconds=_age(now, oldest_stalled),
        oldest_unnotified_seconds=_age(now, oldest_unnotified),
        failed_last_hour=failed_last_hour or 0,
        attempts_failed_last_hour=attempts_failed or 0,
        generated_at=now,
    )
