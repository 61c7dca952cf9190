"""Publishing jobs to Celery, by task name (``inbots`` never imports ``workers``).

The web processes and the Celery workers publish through the same :class:`CeleryPublisher`, so a
publish that fails is handled and counted one way wherever it happens: logged, counted in
``inbots_publish_failures_total``, and left to the renotify sweep — it never fails the request or
the task that asked for it. A web process fails fast (a request must not wait on a dead broker);
a worker keeps Celery's patient connection defaults.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from celery import Celery
from tenacity import retry, stop_after_attempt, wait_exponential

from inbots.config import Settings
from inbots.dispatch.jobs import NOTIFY_BATCH_TASK, NOTIFY_QUEUE, NOTIFY_TASK, Job, batches
from inbots.observability.metrics import PUBLISH_FAILURES

log = logging.getLogger(__name__)


def celery_config(settings: Settings) -> dict[str, Any]:
    """The Celery settings shared by the publisher here and the worker app in ``workers``."""
    longest_countdown = max(settings.retry_schedule) * (1 + settings.retry_jitter)
    return {
        "broker_url": settings.broker_url,
        "task_serializer": "json",
        "accept_content": ["json"],
        "result_serializer": "json",
        "task_ignore_result": True,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_default_queue": NOTIFY_QUEUE,
        "broker_connection_retry_on_startup": True,
        "broker_connection_timeout": 3,
        "broker_transport_options": {
            # A task held unacknowledged (late ack, or waiting for its countdown) comes back to
            # the queue after this; it must stay well above the longest retry countdown.
            "visibility_timeout": max(
                settings.broker_visibility_timeout_seconds, int(longest_countdown * 2) + 60
            ),
            "socket_timeout": 3,
            "socket_connect_timeout": 3,
        },
    }


def fail_fast_app(settings: Settings) -> Celery:
    """A Celery client for a web process: one quick try at the broker (tenacity adds two more),
    then the renotify sweep's turn."""
    app = Celery("inbots-publisher")
    config = celery_config(settings)
    config["broker_transport_options"] = {
        **config["broker_transport_options"],
        "max_retries": 0,
        "socket_timeout": 1,
        "socket_connect_timeout": 1,
    }
    config["broker_connection_timeout"] = 1
    app.conf.update(config)
    return app


class CeleryPublisher:
    """Publishes notify jobs through ``app`` by task name: one job as ``delivery.notify``, jobs
    published together as ``delivery.notify_batch`` tasks of up to ``batch_size``.
    ``fail_fast`` (web processes): after a failure, publishes are left to the sweep for a moment
    instead of each waiting to fail."""

    PAUSE_AFTER_FAILURE = 2.0  # seconds

    def __init__(self, app: Celery, *, fail_fast: bool = True, batch_size: int = 1) -> None:
        self.app = app
        self.fail_fast = fail_fast
        self.batch_size = batch_size
        self._resume_at = 0.0

    @classmethod
    def for_web(cls, settings: Settings) -> CeleryPublisher:
        return cls(fail_fast_app(settings), fail_fast=True, batch_size=settings.notify_batch_size)

    @retry(
        stop=stop_after_attempt(3), wait=wait_exponential(multiplier=0.05, max=0.3), reraise=True
    )
    def _send(self, jobs: Sequence[Job], countdown: float | None) -> None:
        if len(jobs) == 1:
            name, args = NOTIFY_TASK, jobs[0].as_args()
        else:
            name, args = NOTIFY_BATCH_TASK, [[job.as_args() for job in jobs]]
        self.app.send_task(
            name, args=args, queue=jobs[0].queue, countdown=countdown, retry=not self.fail_fast
        )

    def publish(self, jobs: Sequence[Job]) -> None:
        for batch in batches(jobs, self.batch_size):
            self._publish(batch, None)

    def later(self, job: Job, countdown: float) -> None:
        self._publish([job], countdown)

    def _publish(self, jobs: Sequence[Job], countdown: float | None) -> None:
        if self.fail_fast and time.monotonic() < self._resume_at:
            # The broker failed a moment ago: don't make every send wait to find out again.
            PUBLISH_FAILURES.inc(len(jobs))
            return
        try:
            self._send(jobs, countdown)
        except Exception as exc:  # broker down: the renotify sweep will publish again
            PUBLISH_FAILURES.inc(len(jobs))
            self._resume_at = time.monotonic() + self.PAUSE_AFTER_FAILURE
            log.warning(
                "publish failed; renotify will retry",
                extra={
                    **jobs[0].log_ids,
                    "jobs": len(jobs),
                    "error": type(exc).__name__,
                },
            )
