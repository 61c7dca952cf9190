"""Stamping receipts: each stamp is set once, on every matching delivery that lacks it, and never
overwritten; progress stamps also restart the stall clock (``moved_at``)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, update

from inbots.db.uow import UnitOfWork
from inbots.kit.clock import utcnow
from inbots.models.deliveries import Delivery

STAMPS = ("delivered_at", "fetched_at", "acknowledged_at", "notified_at", "failed_at", "stalled_at")
MOVES = ("notified_at", "delivered_at", "fetched_at")  # progress that restarts the stall clock


def stamp(
    uow: UnitOfWork, stamp_name: str, *where: ColumnElement[bool], at: datetime | None = None
) -> datetime:
    """Set one stamp on every matching delivery that lacks it. Stamps are never overwritten."""
    assert stamp_name in STAMPS, stamp_name
    column = getattr(Delivery, stamp_name)
    now = at or utcnow()
    values: dict[str, datetime] = {stamp_name: now}
    if stamp_name in MOVES:
        values["moved_at"] = now
    uow.session.execute(
        update(Delivery)
        .where(*where, column.is_(None))
        .values(values)
        .execution_options(synchronize_session=False)
    )
    return now
