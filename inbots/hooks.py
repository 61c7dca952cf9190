"""What the edges do after a commit: wake long-polls and publish notify jobs.

Services never reach for these directly; they register ``uow.after_commit`` callbacks that call
the app's ``Hooks``, so nothing leaves the process before the data is durable. With a broker
configured, wake-ups also travel to the other web processes over Redis pub/sub.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from inbots.jobs import Job, Publisher
from inbots.wakeups import WakeupHub

log = logging.getLogger(__name__)

CHANNEL = "inbots:inbox-changed"


class RedisRelay:
    """Carries inbox wake-ups between processes. Best effort: a lost wake-up only means a
    long-poll answers at its timeout instead of at once, and the mail is still there."""

    def __init__(self, url: str, hub: WakeupHub) -> None:
        import redis

        self.hub = hub
        self.client: Any = redis.Redis.from_url(url, socket_timeout=3, socket_connect_timeout=3)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="inbots-relay", daemon=True)

    def send(self, agent_ids: Sequence[str]) -> None:
        try:
            self.client.publish(CHANNEL, json.dumps(list(agent_ids)))
        except Exception as exc:
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
                pubsub = self.client.pubsub(ignore_subscribe_messages=True)
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


class Hooks:
    def __init__(self, publisher: Publisher | None = None, relay: RedisRelay | None = None) -> None:
        self.wakeups = relay.hub if relay else WakeupHub()
        self.publisher = publisher
        self.relay = relay

    def inbox_changed(self, agent_ids: Iterable[str]) -> None:
        ids = list(agent_ids)
        self.wakeups.notify(ids)
        if self.relay is not None:
            self.relay.send(ids)

    def publish(self, jobs: Sequence[Job]) -> None:
        if self.publisher is not None:
            self.publisher.publish(jobs)
