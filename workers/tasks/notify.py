"""``delivery.notify``: one webhook attempt. Retries are new messages with a countdown on the
retry queue — the worker never sleeps — and "give up?" is decided from the attempt rows."""

from __future__ import annotations

from typing import Any

from inbots.deliveries.notify import notify
from inbots.jobs import NOTIFY_QUEUE, NOTIFY_TASK, RETRY_QUEUE, Job
from workers.app import app
from workers.tasks.runtime import engine


@app.task(name=NOTIFY_TASK, bind=True, acks_late=True, reject_on_worker_lost=True)
def notify_task(self: Any, delivery_id: str, publish: int, trigger: str = "publish") -> str:
    """Attempt the notification of one delivery's publish; schedule what comes next."""
    job = Job(delivery_id, publish, trigger)
    result = notify(engine(), job)
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
