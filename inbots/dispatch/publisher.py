"""Publishing jobs to Celery, by task name (``inbots`` never imports ``workers``).

The web processes and the Celery workers publish through the same :class:`CeleryPublisher`, so a
publish that fails is handled and counted one way wherever it happens: logged, counted in
``inbots_publish_failures_total``, and left to the renotify sweep — it never fails the request or
the task that asked for it. Every job carries its publish time (the ``inbots_published_at``
header), from which the sweep tells a job still waiting its turn from a lost one
(:mod:`.backlog`).

A web process fails fast: each publish waits on the broker at most
:data:`~.breaker.BOUND_SECONDS`, and one that fails opens the process's :class:`~.breaker.Breaker`,
so later publishes skip the broker at once; the jobs they skip are held (up to
:data:`HELD_MAX`) and published as soon as the broker answers again, and the sweep republishes
whatever a stopped process held. A worker keeps Celery's patient connection defaults.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import redis
from celery import Celery
from tenacity import (
    retry,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)

from inbots.config import Settings
from inbots.dispatch.backlog import PUBLISHED_AT
from inbots.dispatch.breaker import BOUND_SECONDS, Breaker
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
    """A Celery client for a web process: one try at the broker, bounded by
    :data:`~.breaker.BOUND_SECONDS`, then the breaker's and the renotify sweep's turn."""
    app = Celery("inbots-publisher")
    config = celery_config(settings)
    config["broker_transport_options"] = {
        **config["broker_transport_options"],
        "max_retries": 0,
        "socket_timeout": BOUND_SECONDS,
        "socket_connect_timeout": BOUND_SECONDS,
    }
    config["broker_connection_timeout"] = BOUND_SECONDS
    app.conf.update(config)
    return app


def broker_breaker(settings: Settings) -> Breaker:
    """A web process's breaker for the broker, pinging it with its own short-bounded client."""
    client = redis.Redis.from_url(
        settings.broker_url, socket_timeout=BOUND_SECONDS, socket_connect_timeout=BOUND_SECONDS
    )
    return Breaker(client.ping)


def _worth_another_try(error: BaseException) -> bool:
    """A refused or reset connection (a broker restarted under a pooled connection) is worth a
    second try at once; a timeout is not: the broker is hung, and the breaker takes over."""
    return "timeout" not in type(error).__name__.lower() and not isinstance(error, TimeoutError)


# The publishes a web process holds while its breaker is open, published when the broker
# answers again; past this many the oldest are left to the renotify sweep.
HELD_MAX = 10_000


class CeleryPublisher:
    """Publishes notify jobs through ``app`` by task name: one job as ``delivery.notify``, jobs
    published together as ``delivery.notify_batch`` tasks of up to ``batch_size``, each stamped
    with its publish time. With a ``breaker`` (web processes), a publish never waits on a broker
    that failed a moment ago: its jobs are held and published once the broker answers again."""

    def __init__(
        self,
        app: Celery,
        *,
        fail_fast: bool = True,
        batch_size: int = 1,
        breaker: Breaker | None = None,
    ) -> None:
        self.app = app
        self.fail_fast = fail_fast
        self.batch_size = batch_size
        self.breaker = breaker
        self._held: deque[tuple[tuple[Job, ...], float | None]] = deque()
        self._held_lock = threading.Lock()
        if breaker is not None:
            breaker.on_close(self._publish_held)

    @classmethod
    def for_web(cls, settings: Settings, breaker: Breaker | None = None) -> CeleryPublisher:
        return cls(
            fail_fast_app(settings),
            fail_fast=True,
            batch_size=settings.notify_batch_size,
            breaker=breaker or broker_breaker(settings),
        )

    @retry(
        retry=retry_if_exception(_worth_another_try),
        stop=stop_after_attempt(3) | stop_after_delay(BOUND_SECONDS),
        wait=wait_exponential(multiplier=0.05, max=0.3),
        reraise=True,
    )
    def _send(self, jobs: Sequence[Job], countdown: float | None) -> None:
        if len(jobs) == 1:
            name, args = NOTIFY_TASK, jobs[0].as_args()
        else:
            name, args = NOTIFY_BATCH_TASK, [[job.as_args() for job in jobs]]
        self.app.send_task(
            name,
            args=args,
            queue=jobs[0].queue,
            countdown=countdown,
            retry=not self.fail_fast,
            headers={PUBLISHED_AT: time.time()},
        )

    def publish(self, jobs: Sequence[Job]) -> None:
        for batch in batches(jobs, self.batch_size):
            self._publish(batch, None)

    def later(self, job: Job, countdown: float) -> None:
        self._publish([job], countdown)

    @property
    def held(self) -> int:
        """Jobs held back while the broker does not answer."""
        with self._held_lock:
            return sum(len(jobs) for jobs, _ in self._held)

    def _publish(self, jobs: Sequence[Job], countdown: float | None) -> None:
        if self.breaker is not None and not self.breaker.allow():
            # The broker failed a moment ago: don't make every send wait to find out again.
            PUBLISH_FAILURES.inc(len(jobs))
            self._hold(jobs, countdown)
            return
        try:
            self._send(jobs, countdown)
        except Exception as exc:  # broker down: held, and the renotify sweep is behind that
            PUBLISH_FAILURES.inc(len(jobs))
            if self.breaker is not None:
                self.breaker.fail(exc)
                self._hold(jobs, countdown)
            log.warning(
                "publish failed; renotify will retry",
                extra={
                    **jobs[0].log_ids,
                    "jobs": len(jobs),
                    "error": type(exc).__name__,
                },
            )

    def _hold(self, jobs: Sequence[Job], countdown: float | None) -> None:
        with self._held_lock:
            self._held.append((tuple(jobs), countdown))
            while len(self._held) > HELD_MAX:
                self._held.popleft()  # the renotify sweep publishes it again

    def _publish_held(self) -> None:
        """The broker answers again: publish what was held, oldest first, until it fails."""
        while self.breaker is None or self.breaker.allow():
            with self._held_lock:
                if not self._held:
                    return
                jobs, countdown = self._held.popleft()
            self._publish(jobs, countdown)
