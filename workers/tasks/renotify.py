"""``delivery.renotify``: the beat-scheduled sweep (republish lost publishes, wake parked
deliveries whose URL has free slots, stamp stalls)."""

from __future__ import annotations

from dataclasses import asdict

from inbots.deliveries.renotify import sweep
from inbots.dispatch import broker
from inbots.dispatch.jobs import RENOTIFY_TASK
from workers.app import app
from workers.tasks.runtime import engine, publisher


@app.task(name=RENOTIFY_TASK)
def renotify_task() -> dict[str, int]:
    """One renotify run; returns what it did."""
    current = engine()
    report = sweep(
        current.db,
        current.settings,
        publisher().publish,
        limiter=current.limiter,
        backlog=lambda: broker.backlog(current.settings),
    )
    return asdict(report)
