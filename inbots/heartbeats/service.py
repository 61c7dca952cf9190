"""Write and read heartbeats: one row per periodic job, overwritten by each run."""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from inbots.models.heartbeats import Heartbeat

RENOTIFY = "renotify"  # the renotify sweep (inbots.deliveries.renotify.sweep)


@cache
def _upsert(dialect: str) -> Any:
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(Heartbeat).values(name=bindparam("name"), beat_at=bindparam("at"))
    return statement.on_conflict_do_update(
        index_elements=[Heartbeat.name], set_={"beat_at": statement.excluded.beat_at}
    )


def beat(session: Session, name: str, at: datetime) -> None:
    """Record that ``name`` finished a run ``at``: one upsert, so two runs at once (or the first
    run ever) need no read first."""
    session.execute(_upsert(session.get_bind().dialect.name), {"name": name, "at": at})


def last_beat(db: Session | Connection, name: str) -> datetime | None:
    """When ``name`` last finished a run; ``None`` if it never has (in this database)."""
    return db.scalar(select(Heartbeat.beat_at).where(Heartbeat.name == name))
