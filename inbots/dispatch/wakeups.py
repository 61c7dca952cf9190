"""Long-poll wake-ups: a waiting request sleeps on an asyncio event, not on a thread or a
database connection, and a committed send sets that event.

In one process the hub is enough. With a broker configured, :class:`RedisRelay` also carries
wake-ups between processes over Redis pub/sub, so a send on one web process wakes a wait on
another.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from inbots.dispatch.breaker import BOUND_SECONDS, Breaker

log = logging.getLogger(__name__)


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


CHANNEL = "inbots:inbox-changed"


class RedisRelay:
    """Carries inbox wake-ups between processes. Best effort: a lost wake-up only means a
    long-poll answers at its timeout instead of at once, and the mail is still there. A send
    waits on Redis at most :data:`~.breaker.BOUND_SECONDS`, and not at all while ``breaker``
    (the process's, shared with the publisher) is open."""

    def __init__(self, url: str, hub: WakeupHub, breaker: Breaker | None = None) -> None:
        import redis  # here: the embedded default (no relay) never loads it

        self.hub = hub
        self.breaker = breaker
        self.client: Any = redis.Redis.from_url(
            url, socket_timeout=BOUND_SECONDS, socket_connect_timeout=BOUND_SECONDS
        )
        # The listener's own connection: it waits for messages, so it must not time out as
        # quickly as a send.
        self._listener: Any = redis.Redis.from_url(url, socket_timeout=3, socket_connect_timeout=3)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="inbots-relay", daemon=True)

    def send(self, agent_ids: Sequence[str]) -> None:
        if self.breaker is not None and not self.breaker.allow():
            return
        try:
            self.client.publish(CHANNEL, json.dumps(list(agent_ids)))
        except Exception as exc:
            if self.breaker is not None:
                self.breaker.fail(exc)
            else:
                log.warning("wake-up relay unavailable: %s", type(exc).__name__)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _listen(self) -> None:
        while not self._stop.is_set():
            pubsub = None
            try:
                pubsub = self._listener.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(CHANNEL)
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=1.0)
                    if message and message.get("type") == "message":
                        self.hub.notify(json.loads(message["data"]))
            except Exception as exc:
                log.warning("wake-up relay reconnecting: %s", type(exc).__name__)
                self._stop.wait(1.0)
            finally:
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        pubsub.close()
