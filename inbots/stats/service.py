"""Counts over deliveries, agents and threads, each answered by one aggregate query, plus when
the renotify sweep last ran and whether the broker answers.

The query functions take an optional workspace: ``GET /v1/stats`` asks for one workspace, the
``/metrics`` gauges for the whole installation. Both read through these, so the two never
disagree about what "stalled" or "still owed a notification" means.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Select, func, literal, select, true
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from inbots.caller import Caller
from inbots.config import Settings
from inbots.db.uow import UnitOfWork, reads
from inbots.deliveries import tallies
from inbots.deliveries.state import STATES
from inbots.deliveries.state_sql import state_filter, state_sql
from inbots.dispatch.backlog import Backlog
from inbots.dispatch.broker import BrokerState
from inbots.heartbeats.service import RENOTIFY, last_beat
from inbots.kit.clock import utcnow
from inbots.models.agents import ARCHIVED, KIND_AGENT, Agent
from inbots.models.deliveries import Delivery, DeliveryAttempt
from inbots.models.messages import HELD, Message
from inbots.models.threads import CLOSE_REQUESTED, CLOSED, OPEN, Thread
from inbots.stats.schemas import AgentCounts, QueueCounts, Stats, ThreadCounts

HOUR = timedelta(hours=1)
Reader = Session | Connection


def _in(column: Any, workspace_id: str | None) -> ColumnElement[bool]:
    return true() if workspace_id is None else column == workspace_id


def seconds_since(now: datetime, then: datetime | None) -> float | None:
    return None if then is None else round(max((now - then).total_seconds(), 0.0), 3)


def delivery_counts(db: Reader, workspace_id: str | None) -> dict[str, int]:
    """Deliveries in each derived state (every state, zeros included) and their ``total``,
    exact: the rows not yet acknowledged grouped by state (``ix_deliveries_open``), and the
    acknowledged ones from their tally (:mod:`inbots.deliveries.tallies`). So the cost follows
    the mail still open, not the history kept."""
    state = state_sql(Delivery).label("state")
    rows = db.execute(
        select(state, func.count())
        .where(_in(Delivery.workspace_id, workspace_id), Delivery.acknowledged_at.is_(None))
        .group_by(state)
    ).all()
    counts = dict.fromkeys(STATES, 0)
    counts.update({name: int(n) for name, n in rows})
    counts["acknowledged"] = tallies.count(db, workspace_id)
    counts["total"] = sum(counts[s] for s in STATES)
    return counts


def approvals_pending(db: Reader, workspace_id: str | None) -> int:
    """Messages the approval gate holds, waiting for the operator (``ix_messages_held``)."""
    found = db.execute(
        select(func.count())
        .select_from(Message)
        .where(_in(Message.workspace_id, workspace_id), Message.approval == HELD)
    ).scalar()
    return int(found or 0)


@dataclass(frozen=True)
class Ages:
    oldest_stalled: datetime | None  # when the longest-stuck stalled delivery last moved
    oldest_unnotified: datetime | None  # acceptance of the oldest notification still owed


def oldest(db: Reader, workspace_id: str | None) -> Ages:
    stalled = db.scalar(
        select(func.min(Delivery.moved_at)).where(
            _in(Delivery.workspace_id, workspace_id), state_filter(Delivery, "stalled")
        )
    )
    # Owed: what the renotify sweep would still publish — a webhook recipient, an open thread,
    # not yet notified, failed or acknowledged. (A closed thread or a removed webhook owes none.)
    # The constants are written into the SQL: as parameters of a prepared statement (psycopg
    # prepares a statement run often) PostgreSQL's generic plan guessed "status <> $n" matched
    # one thread and looped over every thread, 40 times slower than the plan for the values.
    owed = db.scalar(
        select(func.min(Delivery.accepted_at))
        .join(Thread, Thread.id == Delivery.thread_id)
        .join(Agent, Agent.id == Delivery.recipient_id)
        .where(
            _in(Delivery.workspace_id, workspace_id),
            Delivery.publish_count > literal(0, literal_execute=True),
            Delivery.notified_at.is_(None),
            Delivery.failed_at.is_(None),
            Delivery.acknowledged_at.is_(None),
            Thread.status != literal(CLOSED, literal_execute=True),
            Agent.webhook_url.is_not(None),
        )
    )
    return Ages(stalled, owed)


def agent_counts(
    db: Reader, workspace_id: str | None, settings: Settings, now: datetime
) -> AgentCounts:
    current = Agent.status == "active"
    total, active, never, archived = db.execute(
        select(
            func.count().filter(current),
            func.count().filter(
                current, Agent.last_seen_at > now - timedelta(seconds=settings.active_seconds)
            ),
            func.count().filter(
                current,
                Agent.last_seen_at.is_(None),
                Agent.created_at <= now - timedelta(seconds=settings.new_agent_grace_seconds),
            ),
            func.count().filter(Agent.status == ARCHIVED),
        ).where(_in(Agent.workspace_id, workspace_id), Agent.kind == KIND_AGENT)
    ).one()
    return AgentCounts(total=total, active=active, never_connected=never, archived=archived)


def attempts_failed_since(workspace_id: str, since: datetime) -> Select[int]:
    """How many of the workspace's webhook attempts since ``since`` failed: read through
    ``ix_delivery_attempts_started_at``, so the cost is the window's, not the log's."""
    return (
        select(func.count())
        .select_from(DeliveryAttempt)
        .join(Delivery, Delivery.id == DeliveryAttempt.delivery_id)
        .where(
            Delivery.workspace_id == workspace_id,
            DeliveryAttempt.started_at >= since,
            DeliveryAttempt.reason != "ok",
        )
    )


def queue_counts(waiting: Backlog | None) -> QueueCounts | None:
    if waiting is None:
        return None
    return QueueCounts(
        depth=waiting.depth,
        oldest_age_seconds=waiting.oldest_age(time.time()),
        queues={name: lane.depth for name, lane in waiting.lanes.items()},
    )


@reads
def get_stats(uow: UnitOfWork, caller: Caller, waiting: Backlog | None = None) -> Stats:
    """The workspace's counts, with the installation's sweep and backlog. ``waiting``: the
    backlog, read by the caller before the unit of work began (so no database connection is held
    while a broker that does not answer is waited for); ``None``: the broker did not answer."""
    caller.require_operator()
    broker: BrokerState = (
        "embedded" if uow.settings.embedded else "down" if waiting is None else "up"
    )
    session, ws = uow.session, caller.workspace_id
    now = utcnow()
    threads = dict(
        session.execute(
            select(Thread.status, func.count())
            .where(Thread.workspace_id == ws)
            .group_by(Thread.status)
        ).all()
    )
    ages = oldest(session, ws)
    failed_last_hour = session.scalar(
        select(func.count()).where(Delivery.workspace_id == ws, Delivery.failed_at >= now - HOUR)
    )
    attempts_failed = session.scalar(attempts_failed_since(ws, now - HOUR))
    swept = last_beat(session, RENOTIFY)  # installation-wide: one sweep serves every workspace
    return Stats(
        deliveries=delivery_counts(session, ws),
        agents=agent_counts(session, ws, uow.settings, now),
        threads=ThreadCounts(
            open=threads.get(OPEN, 0),
            close_requested=threads.get(CLOSE_REQUESTED, 0),
            closed=threads.get(CLOSED, 0),
        ),
        oldest_stalled_seconds=seconds_since(now, ages.oldest_stalled),
        oldest_unnotified_seconds=seconds_since(now, ages.oldest_unnotified),
        failed_last_hour=failed_last_hour or 0,
        attempts_failed_last_hour=attempts_failed or 0,
        last_sweep_at=swept,
        last_sweep_age_seconds=seconds_since(now, swept),
        broker=broker,
        queue=queue_counts(waiting),
        generated_at=now,
    )
