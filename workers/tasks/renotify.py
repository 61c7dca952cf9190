"""``delivery.renotify``: the beat-scheduled sweep (republish lost publishes, stamp stalls)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from inbots.deliveries.renotify import sweep
from inbots.jobs import NOTIFY_QUEUE, RENOTIFY_TASK, Job
from workers.app import app
from workers.tasks.notify import notify_task
from workers.tasks.runtime import engine


def _publish(jobs: Sequence[Job]) -> None:
    for job in jobs:
        notify_task.apply_async(job.as_args(), queue=NOTIFY_QUEUE)


@app.task(name=RENOTIFY_TASK)
def renotify_task() -> dict[str, int]:
    """One renotify run; returns what it did."""
    current = engine()
    return asdict(sweep(current.db, current.settings, _publish))
