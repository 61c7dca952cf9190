"""``delivery.notify``: one webhook attempt. Retries are new messages with a countdown on the
retry queue — the worker never sleeps — and "give up?" is decided from the attempt rows. A job
refused by its URL's in-flight cap parks its delivery and ends; the job of a parked delivery is
published again by whoever frees a slot (``Result.wake``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from inbots.deliveries.notify import notify
from inbots.jobs import NOTIFY_QUEUE, NOTIFY_TASK, RETRY_QUEUE, Job
from workers.app import app
from workers.tasks.runtime import engine

log = logging.getLogger(__name__)


def publish_jobs(jobs: Sequence[Job]) -> None:
    """Publish jobs, each on its lane. A job that cannot be published is left to the renotify
    sweep (a woken delivery counts as published now, so it is found as a lost publish)."""
    for job in jobs:
        try:
            notify_task.apply_async(job.as_args(), queue=RETRY_QUEUE if job.retry else NOTIFY_QUEUE)
        except Exception as exc:
            log.warning(
                "publish failed; renotify will retry",
                extra={"delivery_id": job.delivery_id, "error": type(exc).__name__},
            )


@app.task(name=NOTIFY_TASK, bind=True, acks_late=True, reject_on_worker_lost=True)
def notify_task(self: Any, delivery_id: str, publish: int, trigger: str = "publish") -> str:
    """Attempt the notification of one delivery's publish; schedule what comes next."""
    job = Job(delivery_id, publish, trigger)
    result = notify(engine(), job)
    publish_jobs(result.wake)
    if result.countdown is not None:
        on_retry_lane = result.outcome == "retry" or (
            (self.request.delivery_info or {}).get("routing_key") == RETRY_QUEUE
        )
        notify_task.apply_async(
            job.as_args(),
            countdown=result.countdown,
            queue=RETRY_QUEUE if on_retry_lane else NOTIFY_QUEUE,
        )
    return result.outcome
