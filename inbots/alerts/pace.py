"""The pace of the operator's alerts: per subject (an agent, or a workspace's operator row) and
type, a window of ``INBOTS_ALERT_INTERVAL_SECONDS`` (:class:`~inbots.models.alerts.AlertWindow`).
The first alert of a window is raised at once; what happens during it is counted, and told in one
alert when it ends."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, update

from inbots.db.engine import upsert_for
from inbots.db.uow import UnitOfWork
from inbots.models.alerts import AlertWindow


def due(alerted_at: datetime | None, now: datetime, interval: float) -> bool:
    return alerted_at is None or alerted_at <= now - timedelta(seconds=interval)


def count(uow: UnitOfWork, subject_id: str, event_type: str, n: int, now: datetime) -> Any:
    """Add ``n`` events to the subject's window of ``event_type`` (its row locked until the
    commit, so concurrent units count in turn); returns it (``alerted_at``, ``unreported``,
    ``since``) as it now stands."""
    table = AlertWindow.__table__
    insert = upsert_for(uow.session)(table).values(
        subject_id=subject_id, type=event_type, alerted_at=None, unreported=n, since=now
    )
    return uow.session.execute(
        insert.on_conflict_do_update(
            index_elements=[table.c.subject_id, table.c.type],
            set_={
                "unreported": table.c.unreported + n,
                "since": case((table.c.unreported == 0, now), else_=table.c.since),
            },
        ).returning(table.c.alerted_at, table.c.unreported, table.c.since)
    ).one()


def reported(uow: UnitOfWork, subject_id: str, event_type: str, now: datetime) -> None:
    """An alert about the subject's window has just been raised: a new window starts."""
    uow.session.execute(
        update(AlertWindow)
        .where(AlertWindow.subject_id == subject_id, AlertWindow.type == event_type)
        .values(alerted_at=now, unreported=0, since=None)
        .execution_options(synchronize_session=False)
    )
