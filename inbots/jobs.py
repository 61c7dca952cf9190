"""Publishing notify jobs after commit.

A service never publishes: it records the publish on the delivery row (the outbox) and asks the
unit of work to call ``hooks.publish(jobs)`` after the commit. Production publishes to Celery by
task name (``inbots`` never imports ``workers``); the embedded default hands jobs to the local
dispatcher. A publish that fails after a few quick tries is left to the renotify sweep — it never
fails the request that accepted the message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tenacity import retry, stop_after_attempt, wait_exponential

from inbots.config import Settings

log = logging.getLogger(__name__)

NOTIFY_TASK = "delivery.notify"
RENOTIFY_TASK = "delivery.renotify"
NOTIFY_QUEUE = "notify"
RETRY_QUEUE = "notify-retry"
SWEEP_QUEUE = "sweep"


@dataclass(frozen=True)
class Job:
    """What a publish carries: which delivery, which publish of it, and why. ``retry`` routes it
    to the retry lane (the publish has had an attempt already); it is not part of the message."""

    delivery_id: str
    publish: int
    trigger: str = "publish"
    retry: bool = False

    def as_args(self) -> list[Any]:
        return [self.delivery_id, self.publish, self.trigger]


class Publisher(Protocol):
    def publish(self, jobs: Sequence[Job]) -> None:
        """Hand jobs over, each on its lane; must not raise."""

    def later(self, job: Job, countdown: float, *, retry: bool) -> None:
        """Run ``job`` again after ``countdown`` seconds (on the retry lane when ``retry``)."""


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


class CeleryPublisher:
    """Publishes by task name through a Celery client (no worker code imported)."""

    PAUSE_AFTER_FAILURE = 2.0  # seconds during which publishes are left to the sweep

    def __init__(self, settings: Settings) -> None:
        from celery import Celery

        self.app = Celery("inbots-publisher")
        config = celery_config(settings)
        # A request must not wait on a dead broker: fail fast here (tenacity adds a few quick
        # tries) and leave the rest to the renotify sweep. Workers keep Celery's patient defaults.
        config["broker_transport_options"] = {
            **config["broker_transport_options"],
            "max_retries": 0,
            "socket_timeout": 1,
            "socket_connect_timeout": 1,
        }
        config["broker_connection_timeout"] = 1
        self.app.conf.update(config)
        self.failures = 0
        self._resume_at = 0.0

    @retry(
        stop=stop_after_attempt(3), wait=wait_exponential(multiplier=0.05, max=0.3), reraise=True
    )
    def _send(self, job: Job, queue: str, countdown: float | None) -> None:
        self.app.send_task(
            NOTIFY_TASK, args=job.as_args(), queue=queue, countdown=countdown, retry=False
        )

    def publish(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            if time.monotonic() < self._resume_at:
                # The broker failed a moment ago: don't make every send wait to find out again.
                self._failed()
                continue
            try:
                self._send(job, RETRY_QUEUE if job.retry else NOTIFY_QUEUE, None)
            except Exception as exc:  # broker down: the renotify sweep will publish again
                self._failed()
                self._resume_at = time.monotonic() + self.PAUSE_AFTER_FAILURE
                log.warning(
                    "publish failed; renotify will retry",
                    extra={"delivery_id": job.delivery_id, "error": type(exc).__name__},
                )

    def _failed(self) -> None:
        from inbots.observability.metrics import PUBLISH_FAILURES

        self.failures += 1
        PUBLISH_FAILURES.inc()

    def later(self, job: Job, countdown: float, *, retry: bool) -> None:
        self._send(job, RETRY_QUEUE if retry else NOTIFY_QUEUE, countdown)
