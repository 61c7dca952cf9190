"""The installation's own alerts: ``queue.backlog`` (the oldest notify job has waited longer than
``INBOTS_BACKLOG_ALERT_SECONDS`` for a worker) and ``workers.down`` (no renotify sweep has
finished for ``INBOTS_WORKERS_DOWN_SECONDS``).

Both are about the whole installation, so each workspace whose operator's alert webhook receives
the type is told, at most once per ``INBOTS_ALERT_INTERVAL_SECONDS`` while the condition holds.
They must get through when nothing else does: in production Celery beat runs :func:`check` every
renotify interval and sends what it raises itself, with a dispatcher of its own in its process
(:func:`inbots.engine.beat_watch`), so neither a backlog nor dead workers hold them
up; in the embedded default the sweep runs it (``workers.down`` does not apply there).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select

from inbots.alerts import pace
from inbots.alerts.service import alert_row, receives, store
from inbots.config import Settings
from inbots.db.engine import Database
from inbots.db.uow import UnitOfWork, unit_of_work
from inbots.dispatch.backlog import Backlog
from inbots.dispatch.jobs import Job
from inbots.heartbeats.service import RENOTIFY, last_beat
from inbots.kit.clock import rfc3339
from inbots.models.agents import Agent
from inbots.webhooks.subscriptions import QUEUE_BACKLOG, WORKERS_DOWN

log = logging.getLogger(__name__)


def installation_alert(
    uow: UnitOfWork, event_type: str, detail: dict[str, Any], now: datetime
) -> list[Job]:
    """``event_type`` told to every workspace's operator that receives it and was not told one
    in the last interval; returns the jobs to publish after the commit."""
    operators = uow.session.execute(
        select(Agent.id, Agent.workspace_id).where(*receives(Agent, event_type)).order_by(Agent.id)
    ).all()
    rows = []
    for operator_id, workspace_id in operators:
        window = pace.count(uow, operator_id, event_type, 1, now)
        if pace.due(window.alerted_at, now, uow.settings.alert_interval_seconds):
            rows.append(alert_row(workspace_id, event_type, operator_id, operator_id, detail, now))
            pace.reported(uow, operator_id, event_type, now)
    return store(uow, rows)


def check(
    db: Database,
    settings: Settings,
    waiting: Backlog | None,
    now: datetime,
    watching_since: datetime | None = None,
) -> list[Job]:
    """Raise ``queue.backlog`` and ``workers.down`` where they hold; returns their jobs.
    ``waiting``: the backlog (``None``: the broker did not answer, so nothing is known of it);
    ``watching_since``: when the watcher started (beat), so that a deployment just started is
    not taken for one whose workers are down; without it, ``workers.down`` is not checked."""
    jobs: list[Job] = []
    age = waiting.oldest_age(now.timestamp()) if waiting is not None else None
    backlog = waiting is not None and age is not None and age > settings.backlog_alert_seconds
    if not backlog and watching_since is None:
        return jobs  # nothing to look at: no transaction at all (the embedded sweep's usual case)
    with unit_of_work(db) as uow:
        if waiting is not None and age is not None and backlog:
            detail = {
                "depth": waiting.depth,
                "oldest_age_seconds": age,
                "queues": {name: lane.depth for name, lane in waiting.lanes.items()},
                "at": rfc3339(now),
                "reason": (
                    f"the oldest notify job has waited {age:.0f} s for a worker "
                    f"(INBOTS_BACKLOG_ALERT_SECONDS {settings.backlog_alert_seconds:g})"
                ),
            }
            jobs += installation_alert(uow, QUEUE_BACKLOG, detail, now)
        if watching_since is not None:
            swept = last_beat(uow.session, RENOTIFY)
            quiet_since = max(swept or watching_since, watching_since)
            quiet = (now - quiet_since).total_seconds()
            after = settings.workers_down_after_seconds
            if now - quiet_since > timedelta(seconds=after):
                detail = {
                    "last_sweep_at": rfc3339(swept),
                    "depth": waiting.depth if waiting is not None else None,
                    "at": rfc3339(now),
                    "reason": (
                        f"no renotify sweep has finished for {quiet:.0f} s: no worker is taking "
                        f"jobs (INBOTS_WORKERS_DOWN_SECONDS {after:g})"
                    ),
                }
                jobs += installation_alert(uow, WORKERS_DOWN, detail, now)
    if jobs:
        log.warning("installation alerts raised", extra={"alerts": len(jobs)})
    return jobs
