"""Deliveries waiting for an in-flight slot of their URL.

A notify job refused by its URL's cap (:mod:`inbots.dispatch.limiter`) does not come back a
moment later to ask again: it **parks** its delivery — the URL's key, since when, and the job's
trigger — and ends. No job for it exists anywhere while it waits, so a receiver with a long
backlog costs the broker and the workers nothing. Whoever frees a slot **wakes** the oldest
delivery parked on that URL and publishes its job again:

- the attempt that releases a slot, in the transaction that records it (one per slot it sees
  free);
- the job that has just parked, when a slot came free while it was parking (otherwise that slot's
  wake-up could find nothing parked yet, and the delivery would wait for the next one);
- the renotify sweep, for every URL that has deliveries parked and slots free (a worker died
  between releasing and waking, or the URL's leases expired with nobody releasing them).

A woken job that finds the URL full again (a newcomer took the slot first) parks again and keeps
its place in the line: ``parked_at`` stays until an attempt actually starts. Parked deliveries are
not lost publishes: the sweep's republish query (and its partial index) leave them out, so a long
backlog burns no publish attempts.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, exists, func, select, update
from sqlalchemy.orm import Session

from inbots.deliveries.models import Delivery, DeliveryAttempt
from inbots.dispatch.jobs import Job

# The oldest parked deliveries of one URL, claimed: two wakers never take the same row.
_OLDEST = (
    select(
        Delivery.id,
        Delivery.publish_count,
        Delivery.job_trigger,
        Delivery.notified_at,
        Delivery.failed_at,
        Delivery.acknowledged_at,
        Delivery.thread_closed_at,
    )
    .where(Delivery.parked_key == bindparam("key"))
    .order_by(Delivery.parked_at)
    .limit(bindparam("n"))
    .with_for_update(skip_locked=True)
)
_TRIED = select(
    exists().where(
        DeliveryAttempt.delivery_id == bindparam("delivery_id"),
        DeliveryAttempt.publish == bindparam("publish"),
    )
)


def park(delivery: Delivery, key: str, now: datetime) -> None:
    """Put a loaded, locked delivery in ``key``'s line; parked again, it keeps its place."""
    delivery.parked_key = key
    if delivery.parked_at is None:
        delivery.parked_at = now
    delivery.claimed_until = None
    delivery.next_attempt_at = None


def unpark(delivery: Delivery) -> None:
    """Out of the line for good: an attempt starts, or the job is no longer wanted."""
    delivery.parked_key = None
    delivery.parked_at = None


def _owed(row: Any) -> bool:
    return (
        row.notified_at is None
        and row.failed_at is None
        and row.acknowledged_at is None
        and row.thread_closed_at is None
    )


def wake(session: Session, key: str, count: int, now: datetime) -> list[Job]:
    """Take up to ``count`` of the oldest deliveries parked on ``key`` out of the line and return
    their jobs, to publish after the commit (on the retry lane when their publish has had an
    attempt). A woken delivery counts as published now (``last_published_at``), so the sweep
    gives its job the whole publish-lost window to arrive. Parked deliveries no longer owed a
    notification (notified, failed, acknowledged, thread closed) leave the line on the way."""
    jobs: list[Job] = []
    while len(jobs) < count:
        rows = session.execute(_OLDEST, {"key": key, "n": count - len(jobs)}).all()
        if not rows:
            break
        owed = [row for row in rows if _owed(row)]
        gone = [row.id for row in rows if not _owed(row)]
        if gone:
            session.execute(
                update(Delivery)
                .where(Delivery.id.in_(gone))
                .values(parked_key=None, parked_at=None)
                .execution_options(synchronize_session=False)
            )
        if owed:
            session.execute(
                update(Delivery)
                .where(Delivery.id.in_([row.id for row in owed]))
                .values(parked_key=None, last_published_at=now)
                .execution_options(synchronize_session=False)
            )
        for row in owed:
            tried = session.scalar(_TRIED, {"delivery_id": row.id, "publish": row.publish_count})
            jobs.append(Job(row.id, row.publish_count, row.job_trigger or "publish", bool(tried)))
    return jobs


def parked_keys(session: Session, limit: int) -> list[str]:
    """The URLs (keys) that have deliveries parked, the longest-waiting line first (read through
    ``ix_deliveries_parked``)."""
    oldest = func.min(Delivery.parked_at)
    keys = session.scalars(
        select(Delivery.parked_key)
        .where(Delivery.parked_key.is_not(None))
        .group_by(Delivery.parked_key)
        .order_by(oldest)
        .limit(limit)
    ).all()
    return [key for key in keys if key is not None]
