"""The renotify sweep: the safety net behind publish-after-commit (Celery beat ``delivery.renotify``
in production, a timer in the embedded default).

Each run, in bounded batches that claim their rows (``FOR UPDATE SKIP LOCKED`` on PostgreSQL;
SQLite serialises writers), so two runs at once never act on the same row:

- a webhook delivery whose publish was lost — not notified, not failed, not acknowledged, no
  attempt running or retry scheduled, last published longer ago than the publish-lost window —
  is published again, at most until ``publish_attempts`` publishes; then it is stamped failed;
- a delivery that is not acknowledged and not failed and has not moved for the stall threshold,
  with no stall stamp since it last moved, is stamped ``stalled_at``.

Both queries follow partial indexes whose predicates match them, so a run costs what it acts on.
A run that finishes stamps the ``renotify`` heartbeat, so any web process can tell how long ago
the last sweep ran, wherever it ran.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from sqlalchemy import Select, or_, select, update

from inbots.agents.models import Agent
from inbots.config import Settings
from inbots.db.engine import Database
from inbots.db.uow import unit_of_work
from inbots.deliveries.models import Delivery
from inbots.heartbeats import service as heartbeats
from inbots.jobs import Job
from inbots.kit.clock import utcnow
from inbots.observability import metrics

log = logging.getLogger(__name__)

EXHAUSTED = "publish attempts exhausted"


@dataclass(frozen=True)
class SweepReport:
    republished: int = 0
    exhausted: int = 0
    stalled: int = 0


def lost_publishes(now: datetime, settings: Settings) -> list[object]:
    """The WHERE clause of a lost publish (matches ``ix_deliveries_republish``)."""
    return [
        Delivery.publish_count > 0,
        Delivery.notified_at.is_(None),
        Delivery.failed_at.is_(None),
        Delivery.acknowledged_at.is_(None),
        Delivery.thread_closed_at.is_(None),
        Delivery.last_published_at < now - timedelta(seconds=settings.publish_lost_seconds),
        or_(Delivery.next_attempt_at.is_(None), Delivery.next_attempt_at < now),
        or_(Delivery.claimed_until.is_(None), Delivery.claimed_until < now),
    ]


def republish_batch(now: datetime, settings: Settings) -> Select[str, int]:
    """One batch of lost publishes, oldest first, claimed (read through
    ``ix_deliveries_republish``)."""
    return (
        select(Delivery.id, Delivery.publish_count)
        .join(Agent, Agent.id == Delivery.recipient_id)
        .where(
            *lost_publishes(now, settings),  # type: ignore[arg-type]
            Agent.webhook_url.is_not(None),
        )
        .order_by(Delivery.last_published_at)
        .limit(settings.renotify_batch_size)
        .with_for_update(of=Delivery, skip_locked=True)
    )


def stall_batch(now: datetime, settings: Settings) -> Select[str]:
    """One batch of deliveries that have not moved for the stall time, oldest first, claimed
    (read through ``ix_deliveries_stall``)."""
    cutoff = now - timedelta(seconds=settings.stall_seconds)
    return (
        select(Delivery.id)
        .where(
            Delivery.acknowledged_at.is_(None),
            Delivery.failed_at.is_(None),
            or_(Delivery.stalled_at.is_(None), Delivery.stalled_at < Delivery.moved_at),
            Delivery.thread_closed_at.is_(None),  # stamped in the transaction that closes it
            Delivery.moved_at < cutoff,
        )
        .order_by(Delivery.moved_at)
        .limit(settings.renotify_batch_size)
        .with_for_update(of=Delivery, skip_locked=True)
    )


def _republish(db: Database, settings: Settings, now: datetime) -> tuple[list[Job], int]:
    jobs: list[Job] = []
    exhausted = 0
    with unit_of_work(db) as uow:
        rows = uow.session.execute(republish_batch(now, settings)).all()
        give_up = [i for i, count in rows if count >= settings.publish_attempts]
        again = [(i, count + 1) for i, count in rows if count < settings.publish_attempts]
        if give_up:
            uow.session.execute(
                update(Delivery)
                .where(Delivery.id.in_(give_up), Delivery.failed_at.is_(None))
                .values(failed_at=now, failure_reason=EXHAUSTED, next_attempt_at=None)
                .execution_options(synchronize_session=False)
            )
            exhausted = len(give_up)
        for delivery_id, publish in again:
            uow.session.execute(
                update(Delivery)
                .where(Delivery.id == delivery_id)
                .values(publish_count=publish, last_published_at=now, next_attempt_at=None)
                .execution_options(synchronize_session=False)
            )
            jobs.append(Job(delivery_id, publish, "renotify"))
    return jobs, exhausted


def _mark_stalled(db: Database, settings: Settings, now: datetime) -> int:
    with unit_of_work(db) as uow:
        ids = uow.session.scalars(stall_batch(now, settings)).all()
        if ids:
            uow.session.execute(
                update(Delivery)
                .where(Delivery.id.in_(ids))
                .values(stalled_at=now)
                .execution_options(synchronize_session=False)
            )
    return len(ids)


def sweep(
    db: Database,
    settings: Settings,
    publish: Callable[[Sequence[Job]], None],
    now: datetime | None = None,
) -> SweepReport:
    """One renotify run, then its heartbeat. Publishing happens after the claiming transaction
    commits."""
    moment = now or utcnow()
    jobs, exhausted = _republish(db, settings, moment)
    if jobs:
        publish(jobs)
    stalled = _mark_stalled(db, settings, moment)
    with unit_of_work(db) as uow:  # the wall clock: when it ran, whatever ``now`` pretended
        heartbeats.beat(uow.session, heartbeats.RENOTIFY, utcnow())
    report = SweepReport(republished=len(jobs), exhausted=exhausted, stalled=stalled)
    metrics.observe_sweep(report.republished, report.exhausted, report.stalled)
    if jobs or exhausted or stalled:
        log.info("renotify sweep", extra=asdict(report))
    return report
