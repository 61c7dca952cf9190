"""A circuit breaker for a web process's calls to the broker, so that a broker that stops
answering (down, or hung: a frozen Redis whose kernel still takes the bytes) costs one request one
short wait, not every request its own.

Closed, calls go through, each bounded by :data:`BOUND_SECONDS`. A call that fails opens it:
from then on :meth:`Breaker.allow` says no at once, and a thread of the breaker's own pings the
broker every :data:`PROBE_EVERY_SECONDS` until it answers. The first answer closes the breaker
and runs its ``on_close`` callbacks (the publisher publishes what it held back meanwhile).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

BOUND_SECONDS = 0.5  # the longest a request waits on the broker, per call
PROBE_EVERY_SECONDS = 0.5


class Breaker:
    def __init__(self, ping: Callable[[], object], what: str = "broker") -> None:
        self._ping = ping
        self._what = what
        self._open = threading.Event()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._on_close: list[Callable[[], None]] = []

    def allow(self) -> bool:
        """Whether a call may go to the broker now (it answered last time)."""
        return not self._open.is_set()

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    def on_close(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` (on the breaker's thread) each time the broker answers again."""
        self._on_close.append(fn)

    def fail(self, error: BaseException) -> None:
        """A call failed: skip the broker from now on until a ping answers."""
        with self._lock:
            if self._open.is_set() or self._stopping.is_set():
                return
            self._open.set()
        log.warning(
            "%s not answering (%s); skipped until it answers again",
            self._what,
            type(error).__name__,
        )
        threading.Thread(target=self._probe, name="inbots-breaker", daemon=True).start()

    def stop(self) -> None:
        self._stopping.set()

    def _probe(self) -> None:
        while not self._stopping.wait(PROBE_EVERY_SECONDS):
            try:
                self._ping()
            except Exception:
                continue
            self._open.clear()
            log.info("%s answers again", self._what)
            for fn in self._on_close:
                try:
                    fn()
                except Exception:
                    log.exception("after the %s came back", self._what)
            return
