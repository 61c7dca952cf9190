"""Long-poll wake-ups: a waiting request sleeps on an asyncio event, not on a thread or a
database connection, and a committed send sets that event.

In one process the hub is enough. With a broker configured, wake-ups are also relayed between
processes over Redis pub/sub (see ``inbots.hooks``), so a send on one web process wakes a wait on
another.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager


class WakeupHub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = (
            defaultdict(set)
        )

    @contextmanager
    def listen(self, key: str) -> Iterator[asyncio.Event]:
        """Register interest in ``key`` for the duration of the block (call from the event loop)."""
        entry = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waiters[key].add(entry)
        try:
            yield entry[1]
        finally:
            with self._lock:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(entry)
                    if not waiters:
                        del self._waiters[key]

    def notify(self, keys: Iterable[str]) -> None:
        """Wake every listener of these keys; safe to call from any thread."""
        with self._lock:
            entries = [e for k in set(keys) for e in self._waiters.get(k, ())]
        for loop, event in entries:
            if not loop.is_closed():
                loop.call_soon_threadsafe(event.set)

    def listening(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._waiters.values())
