"""``delivery.notify``: one webhook attempt, of a delivery or of an event (the one engine:
:mod:`inbots.deliveries.outbox`). Retries are new messages with a countdown on the retry queue —
the worker never sleeps — and "give up?" is decided from the attempt rows. A job refused by its
URL's in-flight cap parks its row and ends; the job of a parked row is published again by whoever
frees a slot (``Result.wake``)."""

from __future__ import annotations

from typing import Any

from inbots.deliveries.notify import notify, notify_all
from inbots.dispatch.follow import follow_up
from inbots.dispatch.jobs import NOTIFY_BATCH_TASK, NOTIFY_TASK, Job
from workers.app import app
from workers.tasks.runtime import engine, publisher


@app.task(name=NOTIFY_TASK, bind=True, acks_late=True, reject_on_worker_lost=True)
def notify_task(self: Any, row_id: str, publish: int, trigger: str = "publish") -> str:
    """Attempt the notification of one outbox row's publish (a delivery, ``dlv_…``, or an event,
    ``evt_…``); schedule what comes next."""
    lane = (self.request.delivery_info or {}).get("routing_key")
    job = Job.from_args([row_id, publish, trigger], lane=lane)
    result = notify(engine(), job)
    follow_up(publisher(), job, result)
    return result.outcome


@app.task(name=NOTIFY_BATCH_TASK, bind=True, acks_late=True, reject_on_worker_lost=True)
def notify_batch_task(self: Any, jobs: list[list[Any]]) -> list[str]:
    """Several jobs published together (one message's webhook deliveries, a sweep's batch):
    claimed in one transaction, posted side by side, each recorded and followed up (a retry
    scheduled, parked jobs woken) as soon as it is done
    (:func:`~inbots.deliveries.notify.notify_all`)."""
    lane = (self.request.delivery_info or {}).get("routing_key")
    batch = [Job.from_args(args, lane=lane) for args in jobs]
    results = notify_all(engine(), batch, lambda job, result: follow_up(publisher(), job, result))
    return [result.outcome for result in results]
