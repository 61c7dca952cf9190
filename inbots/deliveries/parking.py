"""Deliveries and events waiting for an in-flight slot of their URL (one line per URL, both kinds
of outbox row in it, oldest first; :mod:`.outbox`).

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

from sqlalchemy import bindparam, exists, func, select, union, update
from sqlalchemy.orm import Session

from inbots.deliveries.attempts import THIS_PUBLISH
from inbots.deliveries.outbox import KINDS, Kind, Row
from inbots.dispatch.jobs import Job

# The oldest parked deliveries of one URL, claimed: two wakers never take the same row (each kind
# has its own: ``Kind.oldest_parked``).
_OLDEST = KINDS[0].oldest_parked


def park(row: Row, key: str, now: datetime) -> None:
    """Put a loaded, locked row in ``key``'s line; parked again, it keeps its place."""
    row.parked_key = key
    if row.parked_at is None:
        row.parked_at = now
    row.claimed_until = None
    row.next_attempt_at = None


def unpark(row: Row) -> None:
    """Out of the line for good: an attempt starts, or the job is no longer wanted."""
    row.parked_key = None
    row.parked_at = None


_TRIED = {
    kind.name: select(exists().where(kind.owner == bindparam("row_id"), THIS_PUBLISH))
    for kind in KINDS
}


def _tried(session: Session, kind: Kind, row_id: str, publish: int) -> bool:
    """Whether this publish of the row has had an attempt (its job goes on the retry lane)."""
    return bool(session.scalar(_TRIED[kind.name], {"row_id": row_id, "publish": publish}))


def _oldest(session: Session, key: str, count: int) -> list[tuple[Kind, Any]]:
    """The ``count`` oldest rows parked on ``key``, of either kind, oldest first."""
    found = [
        (kind, row)
        for kind in KINDS
        for row in session.execute(kind.oldest_parked, {"key": key, "n": count}).all()
    ]
    found.sort(key=lambda pair: pair[1].parked_at)
    return found[:count]


# Which of some URLs have a line at all: one statement over both kinds' partial indexes.
_LINES = union(
    *(
        select(kind.model.parked_key).where(
            kind.model.parked_key.in_(bindparam("keys", expanding=True))
        )
        for kind in KINDS
    )
)


def with_lines(session: Session, keys: list[str]) -> set[str]:
    """Those of ``keys`` that have rows parked: attempts recorded together look once, and wake
    only where someone waits. (A row parked just after this look is woken by its own job, which
    checks for a free slot once it has parked.)"""
    if not keys:
        return set()
    return {key for (key,) in session.execute(_LINES, {"keys": keys})}


def wake(session: Session, key: str, count: int, now: datetime) -> list[Job]:
    """Take up to ``count`` of the oldest rows parked on ``key`` (deliveries and events: one line
    per URL) out of the line and return their jobs, to publish after the commit (on the retry
    lane when their publish has had an attempt). A woken row counts as published now
    (``last_published_at``), so the sweep gives its job the whole publish-lost window to arrive.
    Parked rows no longer owed a notification (notified, failed, acknowledged, thread closed)
    leave the line on the way."""
    jobs: list[Job] = []
    while len(jobs) < count:
        rows = _oldest(session, key, count - len(jobs))
        if not rows:
            break
        for kind in KINDS:
            mine = [row for k, row in rows if k is kind]
            gone = [row.id for row in mine if not kind.owed(row)]
            owed = [row.id for row in mine if kind.owed(row)]
            if gone:
                session.execute(
                    update(kind.model)
                    .where(kind.model.id.in_(gone))
                    .values(parked_key=None, parked_at=None)
                    .execution_options(synchronize_session=False)
                )
            if owed:
                session.execute(
                    update(kind.model)
                    .where(kind.model.id.in_(owed))
                    .values(parked_key=None, last_published_at=now)
                    .execution_options(synchronize_session=False)
                )
        for kind, row in rows:
            if kind.owed(row):
                tried = _tried(session, kind, row.id, row.publish_count)
                trigger = row.job_trigger or "publish"
                jobs.append(Job(row.id, row.publish_count, trigger, tried, row.alert))
    return jobs


def parked_keys(session: Session, limit: int) -> list[str]:
    """The URLs (keys) that have rows parked, the longest-waiting line first (read through
    ``ix_deliveries_parked`` and ``ix_events_parked``)."""
    oldest: dict[str, datetime] = {}
    for kind in KINDS:
        model = kind.model
        first = func.min(model.parked_at)
        rows = session.execute(
            select(model.parked_key, first)
            .where(model.parked_key.is_not(None))
            .group_by(model.parked_key)
            .order_by(first)
            .limit(limit)
        ).all()
        for key, at in rows:
            if key is not None and (key not in oldest or at < oldest[key]):
                oldest[key] = at
    return sorted(oldest, key=lambda k: oldest[k])[:limit]
