"""The renotify sweep: the safety net behind publish-after-commit (Celery beat ``delivery.renotify``
in production, a timer in the embedded default).

Each run, in bounded batches that claim their rows (``FOR UPDATE SKIP LOCKED`` on PostgreSQL;
SQLite serialises writers), so two runs at once never act on the same row:

- a webhook delivery or event (:mod:`.outbox`: both kinds of outbox row, the same rule) whose
  publish was lost — not notified, not failed, not acknowledged, not parked, no attempt running
  or retry scheduled, last published longer ago than the publish-lost window **and** before the
  oldest job still waiting in the broker (:mod:`inbots.dispatch.backlog`: a job published since
  may be waiting its turn, however long the workers were away), its recipient still receiving
  its type — is published again, at most until ``publish_attempts`` publishes; then it is
  stamped failed. If it still carries a claim that ran out, the worker making that attempt died:
  the attempt is logged as ``worker_lost`` first. When the broker cannot be read, this step waits
  for a run that can;
- a delivery or event whose attempt's claim ran out lately (its worker died mid-attempt) gets a
  job for its current publish at once: the job logs the lost attempt as ``worker_lost`` and goes
  on, costing no publish (read through ``ix_deliveries_claimed`` and ``ix_events_claimed``);
- deliveries and events parked for an in-flight slot (:mod:`.parking`) are woken, as many per
  URL as that URL has free slots: the safety net behind the wake-up that every released slot
  makes. Parking is not a lost publish and costs no publish attempt, however long the line;
- a delivery that is not acknowledged and not failed and has not moved for the stall threshold,
  with no stall stamp since it last moved, is stamped ``stalled_at``; one its recipient marked
  working only once the working stall time has also passed since its last heartbeat. Each stamp
  (and each delivery failed above) counts toward the operator's alert about its recipient
  (:mod:`inbots.alerts`: one per agent per interval), and the alerts whose interval ended are
  raised, published with the rest;
- a delivery whose message's ``ttl_seconds`` has passed unacknowledged is stamped ``expired_at``
  (read through ``ix_deliveries_expiring``, in batches until none is left): it leaves the inbox,
  is never notified again and no longer counts toward the caps;
- with ``retention_days`` set, closed threads past the window are deleted (:mod:`.retention`).

Both queries follow partial indexes whose predicates match them, so a run costs what it acts on.
A run that finishes stamps the ``renotify`` heartbeat, so any web process can tell how long ago
the last sweep ran, wherever it ran.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any, cast

from sqlalchemy import Select, Table, bindparam, or_, select, update

from inbots.alerts import service as alerts
from inbots.config import Settings
from inbots.db.engine import Database
from inbots.db.uow import UnitOfWork, unit_of_work
from inbots.deliveries import retention
from inbots.deliveries.attempts import record_lost_attempt
from inbots.deliveries.outbox import DELIVERY, KINDS, Kind
from inbots.deliveries.parking import parked_keys, wake
from inbots.dispatch.backlog import Backlog
from inbots.dispatch.jobs import Job
from inbots.dispatch.limiter import Limiter
from inbots.heartbeats import service as heartbeats
from inbots.kit.clock import utcnow
from inbots.models.agents import Agent
from inbots.models.deliveries import Delivery
from inbots.observability import metrics
from inbots.webhooks.wanted import wants

log = logging.getLogger(__name__)

EXHAUSTED = "publish attempts exhausted"
# A publish is stamped in its transaction and its job sent after the commit, a moment later: a
# publish this much older than the oldest job still waiting may be that very job.
WAITING_MARGIN_SECONDS = 60.0


@dataclass(frozen=True)
class SweepReport:
    republished: int = 0
    exhausted: int = 0
    stalled: int = 0
    woken: int = 0
    worker_lost: int = 0
    resumed: int = 0
    expired: int = 0
    purged_threads: int = 0


def lost_before(
    now: datetime, settings: Settings, waiting_since: datetime | None = None
) -> datetime:
    """A publish not attempted by now is lost if it was made before this: longer ago than the
    publish-lost window, and (when jobs wait in the broker) before the oldest of them was
    published, less :data:`WAITING_MARGIN_SECONDS` (or the window, if shorter)."""
    window = timedelta(seconds=settings.publish_lost_seconds)
    cutoff = now - window
    if waiting_since is not None:
        margin = min(timedelta(seconds=WAITING_MARGIN_SECONDS), window)
        cutoff = min(cutoff, waiting_since - margin)
    return cutoff


# The sweep's statements are built once per kind and batch size, with the moment of the run and
# its cut-offs as bound parameters: an idle sweep (most runs) costs its round trips, not the
# building of its queries. ``republish_batch`` and ``stall_batch`` build one with values bound
# (the tests' EXPLAIN of their indexes).


def _param(name: str, values: Mapping[str, Any] | None) -> Any:
    return bindparam(name) if values is None else bindparam(name, values[name])


@cache
def _once(build: Callable[..., Select[Any]], *key: Any) -> Select[Any]:
    """``build(*key)`` with its parameters unbound, built once."""
    return build(*key)


def lost_publishes(kind: Kind = DELIVERY, values: Mapping[str, Any] | None = None) -> list[Any]:
    """The WHERE clause of a lost publish (matches ``ix_deliveries_republish`` and
    ``ix_events_republish``), at ``now`` for publishes before ``lost_before`` (see
    :func:`lost_before`)."""
    model = kind.model
    now = _param("now", values)
    where = [
        model.publish_count > 0,
        model.notified_at.is_(None),
        model.failed_at.is_(None),
        model.thread_closed_at.is_(None),
        model.parked_key.is_(None),
        model.last_published_at < _param("lost_before", values),
        or_(model.next_attempt_at.is_(None), model.next_attempt_at < now),
        or_(model.claimed_until.is_(None), model.claimed_until < now),
    ]
    if kind is DELIVERY:
        where.insert(3, Delivery.acknowledged_at.is_(None))
        where.append(Delivery.expired_at.is_(None))
    return where


def _republish_query(
    kind_name: str, batch: int, values: Mapping[str, Any] | None = None
) -> Select[Any]:
    kind = _KIND[kind_name]
    model = kind.model
    return (
        select(
            model.id,
            model.publish_count,
            model.claimed_until,
            model.job_trigger,
            Agent.webhook_url,
            model.message_id,  # named in a worker_lost attempt's log line
            model.thread_id,
            kind.is_alert.label("alert"),  # an alert's job goes on the alerts' lane
        )
        .join(Agent, Agent.id == model.recipient_id)
        .where(
            *lost_publishes(kind, values),
            Agent.webhook_url.is_not(None),
            wants(Agent.webhook_events, kind.event_type),
        )
        .order_by(model.last_published_at)
        .limit(batch)
        .with_for_update(of=model, skip_locked=True)
    )


def _republish_values(
    now: datetime, settings: Settings, waiting_since: datetime | None
) -> dict[str, Any]:
    return {"now": now, "lost_before": lost_before(now, settings, waiting_since)}


def republish_batch(
    now: datetime, settings: Settings, kind: Kind = DELIVERY, waiting_since: datetime | None = None
) -> Select[Any]:
    """One batch of lost publishes of one kind of row, oldest first, claimed (read through its
    republish index). A row whose recipient no longer has a webhook, or no longer receives its
    type, is not republished: nothing is owed to it any more."""
    values = _republish_values(now, settings, waiting_since)
    return _republish_query(kind.name, settings.renotify_batch_size, values)


def _lost_claims_query(kind_name: str, batch: int) -> Select[Any]:
    """Rows whose attempt's claim ran out unrecorded lately (its worker died mid-attempt), still
    owed a notification (read through ``ix_deliveries_claimed`` / ``ix_events_claimed``)."""
    kind = _KIND[kind_name]
    model = kind.model
    where: list[Any] = [
        model.claimed_until.is_not(None),
        model.claimed_until < bindparam("now"),
        model.claimed_until >= bindparam("since"),
        model.notified_at.is_(None),
        model.failed_at.is_(None),
        model.thread_closed_at.is_(None),
    ]
    if kind is DELIVERY:
        where += [Delivery.acknowledged_at.is_(None), Delivery.expired_at.is_(None)]
    return (
        select(model.id, model.publish_count, model.job_trigger, kind.is_alert.label("alert"))
        .where(*where)
        .order_by(model.claimed_until)
        .limit(batch)
    )


def _lost_claims_values(now: datetime, settings: Settings) -> dict[str, Any]:
    """Only claims that ran out within two sweep intervals and a claim's length: each is resumed
    by a sweep or two, and one the sweeps missed is a lost publish in time, as before."""
    window = timedelta(seconds=2 * settings.renotify_interval_seconds + settings.claim_seconds)
    return {"now": now, "since": now - window}


def _resumed(rows: Sequence[Any]) -> list[Job]:
    """A job for each row whose claim ran out unrecorded, for the publish it was on: the job
    logs the dead worker's attempt as ``worker_lost`` and goes on (or fails the delivery when
    that was its last attempt), as the task coming back from the broker would, but a claim's
    length after the worker died rather than the visibility timeout or the publish-lost window
    later. It costs no publish. A duplicate of such a job (two sweeps, or the broker's task as
    well) finds the claim taken or the row notified, and does nothing twice."""
    return [
        Job(row.id, row.publish_count, row.job_trigger or "publish", True, row.alert)
        for row in rows
    ]


def _resume_lost_claims(db: Database, settings: Settings, now: datetime) -> list[Job]:
    """The jobs that resume lost claims, on a run that republishes nothing."""
    claims = _lost_claims_values(now, settings)
    jobs: list[Job] = []
    with unit_of_work(db, readonly=True) as uow:
        for kind in KINDS:
            query = _once(_lost_claims_query, kind.name, settings.renotify_batch_size)
            jobs += _resumed(uow.session.execute(query, claims).all())
    return jobs


def _stall_query(batch: int, values: Mapping[str, Any] | None = None) -> Select[Any]:
    return (
        select(Delivery.id)
        .where(
            Delivery.acknowledged_at.is_(None),
            Delivery.failed_at.is_(None),
            or_(Delivery.stalled_at.is_(None), Delivery.stalled_at < Delivery.moved_at),
            Delivery.thread_closed_at.is_(None),  # stamped in the transaction that closes it
            Delivery.expired_at.is_(None),
            Delivery.released(),  # held for approval: nothing to stall (ix_deliveries_stall)
            Delivery.moved_at < _param("cutoff", values),
            or_(
                Delivery.working_at.is_(None),
                Delivery.working_at < _param("working_cutoff", values),
            ),
        )
        .order_by(Delivery.moved_at)
        .limit(batch)
        .with_for_update(of=Delivery, skip_locked=True)
    )


def _stall_values(now: datetime, settings: Settings) -> dict[str, Any]:
    return {
        "cutoff": now - timedelta(seconds=settings.stall_seconds),
        "working_cutoff": now - timedelta(seconds=settings.working_stall_seconds),
    }


def stall_batch(now: datetime, settings: Settings) -> Select[Any]:
    """One batch of deliveries that have not moved for the stall time, oldest first, claimed
    (read through ``ix_deliveries_stall``). A working heartbeat also moves a delivery, and holds
    off the stall for the working stall time (default 2 h) rather than the stall time."""
    return _stall_query(settings.renotify_batch_size, _stall_values(now, settings))


def _give_up(kind: Kind) -> Any:
    table = kind.model.__table__
    return (
        update(table)
        .where(table.c.id.in_(bindparam("ids", expanding=True)), table.c.failed_at.is_(None))
        .values(
            failed_at=bindparam("now"),
            failure_reason=EXHAUSTED,
            next_attempt_at=None,
            claimed_until=None,
        )
    )


def _publish_again(kind: Kind) -> Any:
    table = kind.model.__table__
    return (
        update(table)
        .where(table.c.id == bindparam("row_id"))
        .values(
            publish_count=bindparam("publish"),
            last_published_at=bindparam("now"),
            next_attempt_at=None,
            claimed_until=None,
            parked_at=None,
        )
    )


def _republish(
    db: Database, settings: Settings, now: datetime, waiting_since: datetime | None
) -> tuple[list[Job], int, int, list[Job], int, list[Job]]:
    """The jobs published again, the rows of either kind given up, the lost claims logged, the
    operator's delivery.failed alerts, of the rows given up those that are deliveries, and the
    jobs that resume lost claims (read after this run cleared its own)."""
    jobs: list[Job] = []
    raised: list[Job] = []  # the operator's delivery.failed alerts
    resumed: list[Job] = []
    exhausted = lost_claims = failed_deliveries = 0
    batch = settings.renotify_batch_size
    republish = _republish_values(now, settings, waiting_since)
    claims = _lost_claims_values(now, settings)
    for kind in KINDS:
        with unit_of_work(db) as uow:
            session = uow.session
            rows = session.execute(_once(_republish_query, kind.name, batch), republish).all()
            lost = [row for row in rows if row.claimed_until is not None]  # ran out: see query
            for row in lost:
                record_lost_attempt(session, settings, row, row.webhook_url or "")
            give_up = [row.id for row in rows if row.publish_count >= settings.publish_attempts]
            again = [row for row in rows if row.publish_count < settings.publish_attempts]
            if give_up:
                session.execute(_GIVE_UP[kind.name], {"ids": give_up, "now": now})
                if kind is DELIVERY:
                    raised += alerts.deliveries_failed(uow, give_up, now, EXHAUSTED)
                    failed_deliveries += len(give_up)
            if again:
                values = [
                    {"row_id": r.id, "publish": r.publish_count + 1, "now": now} for r in again
                ]
                session.execute(_PUBLISH_AGAIN[kind.name], values)
            jobs += [Job(r.id, r.publish_count + 1, "renotify", alert=r.alert) for r in again]
            resumed += _resumed(
                session.execute(_once(_lost_claims_query, kind.name, batch), claims).all()
            )
        exhausted += len(give_up)
        lost_claims += len(lost)
    return jobs, exhausted, lost_claims, raised, failed_deliveries, resumed


def _wake_parked(db: Database, settings: Settings, limiter: Limiter, now: datetime) -> list[Job]:
    """For each URL with deliveries parked, wake as many as it has free slots (bounded by the
    batch size in all)."""
    with unit_of_work(db, readonly=True) as uow:
        keys = parked_keys(uow.session, settings.renotify_batch_size)
    jobs: list[Job] = []
    for key in keys:
        room = min(limiter.free(key), settings.renotify_batch_size - len(jobs))
        if room > 0:
            with unit_of_work(db) as uow:
                jobs += wake(uow.session, key, room, now)
    return jobs


def _expiry_query(batch: int) -> Select[Any]:
    """One batch of deliveries whose message expired unacknowledged, claimed (read through
    ``ix_deliveries_expiring``)."""
    return (
        select(Delivery.id)
        .where(
            Delivery.expires_at.is_not(None),
            Delivery.expired_at.is_(None),
            Delivery.acknowledged_at.is_(None),
            Delivery.expires_at <= bindparam("now"),
        )
        .order_by(Delivery.expires_at)
        .limit(batch)
        .with_for_update(of=Delivery, skip_locked=True)
    )


_TABLE = cast(Table, Delivery.__table__)
_EXPIRE = (
    update(_TABLE)
    .where(_TABLE.c.id.in_(bindparam("ids", expanding=True)), _TABLE.c.acknowledged_at.is_(None))
    .values(expired_at=bindparam("now"), next_attempt_at=None)
)
_STALL = (
    update(_TABLE)
    .where(_TABLE.c.id.in_(bindparam("ids", expanding=True)))
    .values(stalled_at=bindparam("now"))
)
_KIND = {kind.name: kind for kind in KINDS}
_GIVE_UP = {kind.name: _give_up(kind) for kind in KINDS}
_PUBLISH_AGAIN = {kind.name: _publish_again(kind) for kind in KINDS}


def expire(db: Database, settings: Settings, now: datetime | None = None) -> int:
    """Stamp ``expired_at`` on every delivery whose message's ttl has passed unacknowledged, a
    batch a transaction; returns how many."""
    moment = now or utcnow()
    batch = settings.renotify_batch_size
    total = 0
    while True:
        with unit_of_work(db) as uow:
            ids = uow.session.scalars(_once(_expiry_query, batch), {"now": moment}).all()
            if ids:
                uow.session.execute(_EXPIRE, {"ids": ids, "now": moment})
        total += len(ids)
        if len(ids) < batch:
            return total


def _mark_stalled(uow: UnitOfWork, settings: Settings, now: datetime) -> tuple[int, list[Job]]:
    """Stamp a batch stalled; with the operator's ``delivery.stalled`` alerts' jobs (one per
    delivery per stall: the next sweep's batch leaves out what is stalled and has not moved)."""
    query = _once(_stall_query, settings.renotify_batch_size)
    ids = uow.session.scalars(query, _stall_values(now, settings)).all()
    if not ids:
        return 0, []
    uow.session.execute(_STALL, {"ids": ids, "now": now})
    return len(ids), alerts.deliveries_stalled(uow, ids, now)


def sweep(
    db: Database,
    settings: Settings,
    publish: Callable[[Sequence[Job]], None],
    now: datetime | None = None,
    limiter: Limiter | None = None,
    backlog: Callable[[], Backlog | None] | None = None,
) -> SweepReport:
    """One renotify run, then its heartbeat. Publishing happens after the claiming transaction
    commits. Without a ``limiter`` (the URLs' in-flight slots) parked deliveries are left to the
    wake-ups. ``backlog`` reads what waits in the broker (without it, nothing does); when it
    cannot be read (``None``), no publish is taken for lost this run."""
    moment = now or utcnow()
    waiting = backlog() if backlog is not None else Backlog({})
    jobs: list[Job] = []
    failed_alerts: list[Job] = []
    resumed: list[Job] = []
    exhausted = lost = failed_deliveries = 0
    if waiting is None:
        log.info("renotify: the broker's backlog could not be read; republishing waits")
        resumed = _resume_lost_claims(db, settings, moment)
    else:
        jobs, exhausted, lost, failed_alerts, failed_deliveries, resumed = _republish(
            db, settings, moment, waiting.waiting_since()
        )
    if jobs or failed_alerts or resumed:
        publish([*jobs, *failed_alerts, *resumed])
    woken = _wake_parked(db, settings, limiter, moment) if limiter is not None else []
    if woken:
        publish(woken)
    expired = expire(db, settings, moment)
    purged = retention.purge(db, settings).threads if settings.retention_days else 0
    with unit_of_work(db) as uow:
        stalled, stalled_alerts = _mark_stalled(uow, settings, moment)
        stalled_alerts += alerts.paced_alerts(uow, moment)  # held back by their pace
        # The wall clock: when it ran, whatever ``now`` pretended.
        heartbeats.beat(uow.session, heartbeats.RENOTIFY, utcnow())
    if stalled_alerts:
        publish(stalled_alerts)
    report = SweepReport(
        republished=len(jobs),
        exhausted=exhausted,
        stalled=stalled,
        woken=len(woken),
        worker_lost=lost,
        resumed=len(resumed),
        expired=expired,
        purged_threads=purged,
    )
    metrics.observe_sweep(
        report.republished,
        report.exhausted,
        report.stalled,
        report.woken,
        report.worker_lost,
        failed_deliveries,
        report.resumed,
    )
    if jobs or exhausted or stalled or woken or lost or resumed or expired or purged:
        log.info("renotify sweep", extra=asdict(report))
    return report
