"""The Celery app: broker from settings, JSON only, late acknowledgement, the renotify beat.

``celery -A workers worker`` runs notify jobs (queues ``notify``, ``notify-retry`` and ``sweep``;
any number of workers on any number of machines); ``celery -A workers beat`` schedules the
renotify sweep (exactly one beat per deployment).
"""

from __future__ import annotations

from celery import Celery
from kombu import Queue

from inbots.config import get_settings
from inbots.db.base import import_models
from inbots.jobs import NOTIFY_QUEUE, RENOTIFY_TASK, RETRY_QUEUE, SWEEP_QUEUE, celery_config

import_models()  # the tasks' queries join across every table
settings = get_settings()
app = Celery("inbots")
app.conf.update(celery_config(settings))
app.conf.update(
    # First attempts and retries wait in separate queues, so a dead receiver's retries never
    # stand in front of new mail; the worker polls them in turn.
    task_queues=[Queue(NOTIFY_QUEUE), Queue(RETRY_QUEUE), Queue(SWEEP_QUEUE)],
    task_routes={RENOTIFY_TASK: {"queue": SWEEP_QUEUE}},
    beat_schedule={
        "renotify": {
            "task": RENOTIFY_TASK,
            "schedule": settings.renotify_interval_seconds,
            # A sweep that could not start before the next one is due is not worth running.
            "options": {"queue": SWEEP_QUEUE, "expires": settings.renotify_interval_seconds},
        }
    },
    worker_hijack_root_logger=False,
)

import workers.tasks  # noqa: E402,F401  (registers the tasks)
