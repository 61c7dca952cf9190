"""Is the broker there? A short ping, for ``/readyz``, ``/v1/stats`` and ``/metrics``.

The broker's state is reported, never required: a send is stored whatever the broker does, and
the renotify sweep publishes what it missed. So a broker that is down is a state to show (and
alert on), not a reason to take a web process out of rotation.
"""

from __future__ import annotations

import logging
from typing import Literal

import redis

from inbots.config import Settings
from inbots.dispatch.jobs import QUEUES

log = logging.getLogger(__name__)

BrokerState = Literal["up", "down", "embedded"]
PROBE_SECONDS = 1.0  # a broker slower than this to answer a ping counts as down


def _client(settings: Settings) -> redis.Redis:
    return redis.Redis.from_url(
        settings.broker_url, socket_timeout=PROBE_SECONDS, socket_connect_timeout=PROBE_SECONDS
    )


def broker_state(settings: Settings) -> BrokerState:
    """``embedded`` without a broker (delivery runs in this process), else whether it answers."""
    if settings.embedded:
        return "embedded"
    try:
        client = _client(settings)
        try:
            client.ping()
        finally:
            client.close()
    except (redis.RedisError, OSError, ValueError) as exc:
        log.debug("broker ping failed: %s", type(exc).__name__)
        return "down"
    return "up"


def queue_depths(settings: Settings) -> dict[str, int] | None:
    """Jobs waiting in each queue (Celery keeps a queue as a Redis list of its name); ``None``
    when the broker does not answer. Only called with a broker configured."""
    try:
        client = _client(settings)
        try:
            return {q: int(client.llen(q)) for q in QUEUES}
        finally:
            client.close()
    except (redis.RedisError, OSError, ValueError) as exc:
        log.warning("queue depth unavailable: %s", type(exc).__name__)
        return None
