"""The acknowledged tally: how many of each workspace's deliveries are acknowledged, kept exact
in the transactions that change it, so that the operator's counts by state
(:func:`inbots.stats.service.delivery_counts`) read the rows not yet acknowledged and this tally
instead of every delivery ever stored.

A delivery's ``acknowledged_at`` is set once and never cleared, and an acknowledged delivery is in
no other state; so the tally moves in exactly two places, both here: an acknowledgement adds the
rows it stamped (:func:`acknowledged`), and retention subtracts the acknowledged rows it deletes
(:func:`purged`). Migration 0020 counted the rows that were there before. Anything that writes
acknowledged rows another way (a bulk load) calls :func:`recount` after it.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from sqlalchemy import delete, func, insert, literal, select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from inbots.db.engine import upsert_for
from inbots.models.deliveries import Delivery, DeliveryTally

# Rows per workspace: acknowledgements of agents on different shards never wait for each other.
SHARDS = 8


def shard_of(key: str) -> int:
    return zlib.crc32(key.encode()) % SHARDS


def _add(db: Session | Connection, workspace_id: str, shard: int, n: int) -> None:
    """``n`` more acknowledged deliveries (fewer, when negative): one upsert."""
    stmt = upsert_for(db)(DeliveryTally).values(
        workspace_id=workspace_id, shard=shard, acknowledged=n
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=[DeliveryTally.workspace_id, DeliveryTally.shard],
        set_={"acknowledged": DeliveryTally.acknowledged + stmt.excluded.acknowledged},
    )
    db.execute(stmt)


def acknowledged(session: Session, workspace_id: str, agent_id: str, n: int) -> None:
    """``agent_id`` acknowledged ``n`` deliveries of ``workspace_id`` in this transaction (the
    rows its UPDATE stamped, not those acknowledged already)."""
    if n:
        _add(session, workspace_id, shard_of(agent_id), n)


def purged(session: Session, counts: Iterable[tuple[str, int]]) -> None:
    """Retention deleted these many acknowledged deliveries of each workspace."""
    for workspace_id, n in counts:
        if n:
            _add(session, workspace_id, 0, -n)


def count(db: Session | Connection, workspace_id: str | None) -> int:
    """The acknowledged deliveries of ``workspace_id`` (None: of every workspace)."""
    stmt = select(func.coalesce(func.sum(DeliveryTally.acknowledged), 0))
    if workspace_id is not None:
        stmt = stmt.where(DeliveryTally.workspace_id == workspace_id)
    return int(db.execute(stmt).scalar_one())


def recount(db: Session | Connection) -> None:
    """Count every workspace's acknowledged deliveries afresh (a full scan, in the caller's
    transaction): after a bulk load of deliveries, or to repair the tally."""
    db.execute(delete(DeliveryTally))
    db.execute(
        insert(DeliveryTally).from_select(
            ["workspace_id", "shard", "acknowledged"],
            select(Delivery.workspace_id, literal(0), func.count())
            .where(Delivery.acknowledged_at.is_not(None))
            .group_by(Delivery.workspace_id),
        )
    )
