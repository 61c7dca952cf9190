"""Retention: closed threads older than ``retention_days`` are deleted with everything of theirs.

A thread goes when it is closed and its ``closed_at`` is older than the window; with it go its
messages, their deliveries, the events about it, every webhook attempt of those deliveries and
events, and its participants. Threads are taken oldest close first, ``retention_batch_size`` a
transaction, each batch claimed (``FOR UPDATE SKIP LOCKED`` on PostgreSQL) and deleted in one
short transaction, so no lock is held for long and two sweeps never fight over a batch.

Everything is deleted with plain SQL ``DELETE`` statements, children before parents (attempts,
events, deliveries, attachments, messages, participants, threads): row triggers on those tables
(a search index kept by triggers on ``messages``) fire for every row, so what they maintain
follows. The caps count deliveries, so they follow too (nothing to adjust).

The operator's alerts (events about no thread, :mod:`inbots.alerts`) go by their own age: those
raised before the cutoff are deleted with their attempts, in batches of the same size. So do
reservations (:mod:`inbots.reservations`) released or expired before the cutoff, in one statement.

The renotify sweep runs it when ``retention_days`` is set; ``inbots purge`` runs it now (or
counts what would go, ``--dry-run``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, Delete, Select, delete, func, or_, select
from sqlalchemy.orm import Session

from inbots.config import Settings
from inbots.db.engine import Database
from inbots.db.uow import unit_of_work
from inbots.deliveries import tallies
from inbots.kit.clock import utcnow
from inbots.models.attachments import Attachment
from inbots.models.deliveries import Delivery, DeliveryAttempt
from inbots.models.events import Event
from inbots.models.messages import Message
from inbots.models.reservations import Reservation
from inbots.models.threads import CLOSED, Participant, Thread

log = logging.getLogger(__name__)


@dataclass
class PurgeReport:
    """What a purge deleted (or, for a dry run, would delete)."""

    cutoff: datetime | None = None  # threads closed before this go
    threads: int = 0
    messages: int = 0
    deliveries: int = 0
    events: int = 0
    attempts: int = 0
    reservations: int = 0  # released or expired before the cutoff
    batches: int = 0
    dry_run: bool = False

    def add(self, other: PurgeReport) -> None:
        names = ("threads", "messages", "deliveries", "events", "attempts", "reservations")
        for name in (*names, "batches"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def cutoff_of(days: float, now: datetime | None = None) -> datetime:
    return (now or utcnow()) - timedelta(days=days)


def _expired_threads(cutoff: datetime) -> Select[str]:
    """Closed threads past the window, oldest close first (``ix_threads_closed``)."""
    return (
        select(Thread.id)
        .where(Thread.closed_at.is_not(None), Thread.closed_at < cutoff, Thread.status == CLOSED)
        .order_by(Thread.closed_at, Thread.id)
    )


def _ended_reservations(cutoff: datetime) -> Any:
    """Reservations (coordination.md §1) released or expired before the cutoff."""
    return or_(Reservation.released_at < cutoff, Reservation.expires_at < cutoff)


def _count_of(session: Session, where: Any) -> int:
    return int(session.scalar(select(func.count()).select_from(Reservation).where(where)) or 0)


def _expired_alerts(cutoff: datetime) -> Select[str]:
    """The operator's alerts raised before the cutoff (``ix_events_thread_id``: no thread)."""
    return select(Event.id).where(Event.thread_id.is_(None), Event.created_at < cutoff)


def _count_alerts(session: Session, cutoff: datetime) -> PurgeReport:
    ids = _expired_alerts(cutoff)
    events = session.scalar(select(func.count()).select_from(ids.subquery()))
    attempts = session.scalar(select(func.count()).where(DeliveryAttempt.event_id.in_(ids)))
    return PurgeReport(events=int(events or 0), attempts=int(attempts or 0))


def _delete_alerts(session: Session, ids: list[str]) -> PurgeReport:
    attempts = session.execute(
        delete(DeliveryAttempt)
        .where(DeliveryAttempt.event_id.in_(ids))
        .execution_options(synchronize_session=False)
    )
    events = session.execute(
        delete(Event).where(Event.id.in_(ids)).execution_options(synchronize_session=False)
    )
    return PurgeReport(
        events=int(cast(CursorResult[Any], events).rowcount or 0),
        attempts=int(cast(CursorResult[Any], attempts).rowcount or 0),
    )


def _count(session: Session, ids: Select[str] | list[str]) -> PurgeReport:
    in_threads = ids
    delivery_ids = select(Delivery.id).where(Delivery.thread_id.in_(in_threads))
    event_ids = select(Event.id).where(Event.thread_id.in_(in_threads))

    def count(stmt: Select[int]) -> int:
        return int(session.scalar(stmt) or 0)

    return PurgeReport(
        threads=count(select(func.count()).select_from(Thread).where(Thread.id.in_(in_threads))),
        messages=count(select(func.count()).where(Message.thread_id.in_(in_threads))),
        deliveries=count(select(func.count()).where(Delivery.thread_id.in_(in_threads))),
        events=count(select(func.count()).where(Event.thread_id.in_(in_threads))),
        attempts=count(
            select(func.count()).where(
                or_(
                    DeliveryAttempt.delivery_id.in_(delivery_ids),
                    DeliveryAttempt.event_id.in_(event_ids),
                )
            )
        ),
    )


def _delete_batch(session: Session, ids: list[str]) -> PurgeReport:
    """Delete these threads and everything of theirs, children first."""

    def gone(stmt: Delete) -> int:
        result = session.execute(stmt.execution_options(synchronize_session=False))
        return int(cast(CursorResult[Any], result).rowcount or 0)

    delivery_ids = select(Delivery.id).where(Delivery.thread_id.in_(ids))
    event_ids = select(Event.id).where(Event.thread_id.in_(ids))
    attempts = gone(delete(DeliveryAttempt).where(DeliveryAttempt.delivery_id.in_(delivery_ids)))
    attempts += gone(delete(DeliveryAttempt).where(DeliveryAttempt.event_id.in_(event_ids)))
    events = gone(delete(Event).where(Event.thread_id.in_(ids)))
    acknowledged = session.execute(
        select(Delivery.workspace_id, func.count())
        .where(Delivery.thread_id.in_(ids), Delivery.acknowledged_at.is_not(None))
        .group_by(Delivery.workspace_id)
    ).all()
    tallies.purged(session, [(workspace_id, n) for workspace_id, n in acknowledged])
    deliveries = gone(delete(Delivery).where(Delivery.thread_id.in_(ids)))
    message_ids = select(Message.id).where(Message.thread_id.in_(ids))
    gone(delete(Attachment).where(Attachment.message_id.in_(message_ids)))  # their bytes too
    messages = gone(delete(Message).where(Message.thread_id.in_(ids)))
    gone(delete(Participant).where(Participant.thread_id.in_(ids)))
    threads = gone(delete(Thread).where(Thread.id.in_(ids)))
    return PurgeReport(
        threads=threads,
        messages=messages,
        deliveries=deliveries,
        events=events,
        attempts=attempts,
        batches=1,
    )


def _in_batches(
    db: Database,
    report: PurgeReport,
    expired: Select[str],
    locked: type[Thread] | type[Event],
    size: int,
    delete_batch: Callable[[Session, list[str]], PurgeReport],
) -> None:
    """Delete what ``expired`` selects, ``size`` rows per short transaction (rows another purge
    holds are skipped), until a batch comes back short."""
    while True:
        with unit_of_work(db) as uow:
            ids = list(
                uow.session.scalars(
                    expired.limit(size).with_for_update(of=locked, skip_locked=True)
                )
            )
            if ids:
                report.add(delete_batch(uow.session, ids))
        if len(ids) < size:
            return


def purge(
    db: Database,
    settings: Settings,
    *,
    days: float | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
) -> PurgeReport:
    """Delete the closed threads whose ``closed_at`` is more than ``days`` (default
    ``retention_days``) old, ``retention_batch_size`` threads a transaction; with ``dry_run``
    only count what would go. ``days`` 0 (retention off) deletes nothing."""
    window = settings.retention_days if days is None else days
    report = PurgeReport(dry_run=dry_run)
    if window <= 0:
        return report
    cutoff = cutoff_of(window, now)
    report.cutoff = cutoff
    if dry_run:
        with unit_of_work(db, readonly=True) as uow:
            counted = _count(uow.session, _expired_threads(cutoff))
            counted.add(_count_alerts(uow.session, cutoff))
            counted.reservations = _count_of(uow.session, _ended_reservations(cutoff))
        report.add(counted)
        return report
    batch = settings.retention_batch_size
    _in_batches(db, report, _expired_threads(cutoff), Thread, batch, _delete_batch)
    _in_batches(db, report, _expired_alerts(cutoff), Event, batch, _delete_alerts)
    with unit_of_work(db) as uow:
        ended = delete(Reservation).where(_ended_reservations(cutoff))
        report.reservations = cast(CursorResult[Any], uow.session.execute(ended)).rowcount
    if report.threads or report.events or report.reservations:
        done = {k: v for k, v in asdict(report).items() if k != "cutoff"}
        log.info("retention purge", extra=done)
    return report
