"""The embedded default's broker: the same ``notify`` and ``sweep`` functions the Celery tasks
wrap (handed in by :mod:`inbots.engine`), reached through three thread pools, one per
lane (first attempts; retries, so a dead receiver's retries never queue in front of new mail;
the operator's alerts, so a backlog of mail never holds up the alert about it) and a timer for
countdowns and the renotify schedule. Each lane keeps the publish time of the jobs waiting in
it, for the sweep and ``/v1/stats`` (:meth:`LocalDispatcher.backlog`). Jobs a notify run wakes
(parked deliveries whose URL has a slot free again) go to the pool of their lane.

Jobs live in memory only. That is safe because the database is the source of truth: after a
restart the renotify sweep finds every publish that was in flight and publishes it again.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from inbots.config import Settings
from inbots.dispatch.backlog import Backlog, Lane
from inbots.dispatch.follow import follow_up
from inbots.dispatch.jobs import (
    ALERT_QUEUE,
    NOTIFY_LANES,
    NOTIFY_QUEUE,
    RETRY_QUEUE,
    Job,
    Publisher,
    Result,
    batches,
)

log = logging.getLogger(__name__)

# Threads for first attempts (half as many again for retries, and two for the operator's alerts).
EMBEDDED_WORKERS = 8


class LocalDispatcher:
    """A :class:`~inbots.dispatch.publisher.Publisher` that runs ``run(jobs, then)`` on its own
    threads
    (jobs published together in batches of up to ``INBOTS_NOTIFY_BATCH_SIZE``, as the Celery
    publisher sends them), and ``sweep(self)`` every ``INBOTS_RENOTIFY_INTERVAL_SECONDS``."""

    def __init__(
        self,
        settings: Settings,
        run: Callable[[Sequence[Job], Callable[[Job, Result], None]], list[Result]],
        sweep: Callable[[Publisher], object],
        *,
        workers: int = EMBEDDED_WORKERS,
        batch_size: int | None = None,
    ) -> None:
        self.settings = settings
        self._run_jobs = run
        self._sweep_once = sweep
        self.batch_size = batch_size or settings.notify_batch_size
        retries = max(2, workers // 2)
        self._pools = {
            NOTIFY_QUEUE: ThreadPoolExecutor(workers, thread_name_prefix="inbots-notify"),
            RETRY_QUEUE: ThreadPoolExecutor(retries, thread_name_prefix="inbots-retry"),
            ALERT_QUEUE: ThreadPoolExecutor(2, thread_name_prefix="inbots-alerts"),
        }
        # Per lane, the jobs submitted and not started yet: submission number -> publish time.
        self._waiting: dict[str, OrderedDict[int, float]] = {q: OrderedDict() for q in NOTIFY_LANES}
        self._waiting_lock = threading.Lock()
        self._sweeper = ThreadPoolExecutor(1, thread_name_prefix="inbots-renotify")
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._timer_loop, name="inbots-timer", daemon=True)

    # Publisher -----------------------------------------------------------------------------
    def publish(self, jobs: Sequence[Job]) -> None:
        for batch in batches(jobs, self.batch_size):
            self._submit(batch)

    def later(self, job: Job, countdown: float) -> None:
        self._at(countdown, lambda: self._submit([job]))

    # Life cycle ----------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()
        self._at(min(1.0, self.settings.renotify_interval_seconds), self._sweep)

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout=5)
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=True)
        self._sweeper.shutdown(wait=False, cancel_futures=True)

    def backlog(self) -> Backlog:
        """The jobs waiting for a thread of their lane, and when the oldest was published."""
        with self._waiting_lock:
            return Backlog(
                {
                    lane: Lane(len(waiting), next(iter(waiting.values()), None))
                    for lane, waiting in self._waiting.items()
                }
            )

    # Internals -----------------------------------------------------------------------------
    def _submit(self, jobs: list[Job]) -> None:
        lane = jobs[0].queue  # one lane per batch
        number = next(self._seq)
        with self._waiting_lock:
            self._waiting[lane][number] = time.time()
        try:
            self._pools[lane].submit(self._run, jobs, lane, number)
        except RuntimeError:
            # Shutting down refuses new work; the sweep after the next start picks the jobs up.
            with self._waiting_lock:
                self._waiting[lane].pop(number, None)

    def _run(self, jobs: list[Job], lane: str, number: int) -> None:
        with self._waiting_lock:
            self._waiting[lane].pop(number, None)
        try:
            self._run_jobs(jobs, lambda job, result: follow_up(self, job, result))
        except Exception:
            log.exception(
                "notify failed; the renotify sweep will try again",
                extra={**jobs[0].log_ids, "jobs": len(jobs)},
            )

    def _sweep(self) -> None:
        try:
            self._sweep_once(self)
        except Exception:
            log.exception("renotify sweep failed")
        finally:
            self._at(self.settings.renotify_interval_seconds, self._sweep)

    def _at(self, delay: float, fn: Callable[[], None]) -> None:
        with self._cond:
            heapq.heappush(self._timers, (time.monotonic() + delay, next(self._seq), fn))
            self._cond.notify()

    def _timer_loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and (
                    not self._timers or self._timers[0][0] > time.monotonic()
                ):
                    timeout = self._timers[0][0] - time.monotonic() if self._timers else None
                    self._cond.wait(timeout)
                if self._stopping:
                    return
                _, _, fn = heapq.heappop(self._timers)
            if fn == self._sweep:
                self._sweeper.submit(fn)
            else:
                fn()
