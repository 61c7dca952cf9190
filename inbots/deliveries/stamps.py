"""Stamping receipts: each stamp is set once, on every matching delivery that lacks it, and never
overwritten; progress stamps also restart the stall clock (``moved_at``)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Update, bindparam, update

from inbots.db.uow import UnitOfWork
from inbots.kit.clock import utcnow
from inbots.models.deliveries import Delivery

STAMPS = ("delivered_at", "fetched_at", "acknowledged_at", "notified_at", "failed_at", "stalled_at")
MOVES = ("notified_at", "delivered_at", "fetched_at")  # progress that restarts the stall clock


@functools.cache
def _by_ids(stamp_name: str) -> Update:
    """The statement of :func:`stamp`, built once per stamp: its values are ``ids`` and ``now``."""
    column = getattr(Delivery, stamp_name)
    now = bindparam("now", type_=column.type)
    values = {stamp_name: now, **({"moved_at": now} if stamp_name in MOVES else {})}
    return (
        update(Delivery)
        .where(Delivery.id.in_(bindparam("ids", expanding=True)), column.is_(None))
        .values(values)
    )


def stamp(
    uow: UnitOfWork, stamp_name: str, ids: Sequence[str], *, at: datetime | None = None
) -> datetime:
    """Set one stamp on each of these deliveries that lacks it. Stamps are never overwritten."""
    assert stamp_name in STAMPS, stamp_name
    now = at or utcnow()
    uow.session.connection().execute(_by_ids(stamp_name), {"ids": list(ids), "now": now})
    return now
