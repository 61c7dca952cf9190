"""Stamping receipts: each stamp is set once, on every matching delivery that lacks it, and never
overwritten; progress stamps also restart the stall clock (``moved_at``). :func:`shown` and
:func:`opened` stamp what a recipient's client was shown or given, and mirror it on the rows
already read."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from types import SimpleNamespace

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


# A delivery as loaded (the ORM row) or as listed (its id and stamps: see service.inbox()).
Stamped = Delivery | SimpleNamespace


def _apply(rows: Sequence[Stamped], stamp_name: str, now: datetime) -> None:
    """Mirror a bulk stamp on rows already loaded, so their state is read correctly."""
    for row in rows:
        if getattr(row, stamp_name) is None:
            setattr(row, stamp_name, now)


def shown(uow: UnitOfWork, rows: Sequence[Stamped]) -> None:
    """The recipient's client was shown these deliveries: stamp delivered."""
    ids = [r.id for r in rows if r.delivered_at is None]
    if ids:
        now = stamp(uow, "delivered_at", ids)
        _apply(rows, "delivered_at", now)


def opened(uow: UnitOfWork, rows: Sequence[Stamped]) -> None:
    """The recipient received these bodies: stamp fetched (and delivered, if it was not yet)."""
    shown(uow, rows)
    ids = [r.id for r in rows if r.fetched_at is None]
    if ids:
        now = stamp(uow, "fetched_at", ids)
        _apply(rows, "fetched_at", now)
