"""Is the broker there, and what waits in it? A short ping for ``/readyz``, and the backlog
(:mod:`.backlog`) for ``/v1/stats``, ``/metrics`` and the renotify sweep.

The broker's state is reported, never required: a send is stored whatever the broker does, and
the renotify sweep publishes what it missed. So a broker that is down is a state to show (and
alert on), not a reason to take a web process out of rotation.

redis-py is imported by the calls that talk to the broker: the embedded default never loads it.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Literal

from inbots.config import Settings
from inbots.dispatch.backlog import PUBLISHED_AT, Backlog, Lane
from inbots.dispatch.jobs import QUEUES

if TYPE_CHECKING:
    import redis

log = logging.getLogger(__name__)

BrokerState = Literal["up", "down", "embedded"]
PROBE_SECONDS = 1.0  # a broker slower than this to answer a ping counts as down


def _client(settings: Settings) -> redis.Redis:
    import redis

    return redis.Redis.from_url(
        settings.broker_url, socket_timeout=PROBE_SECONDS, socket_connect_timeout=PROBE_SECONDS
    )


def broker_state(settings: Settings) -> BrokerState:
    """``embedded`` without a broker (delivery runs in this process), else whether it answers."""
    if settings.embedded:
        return "embedded"
    import redis

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


def read_backlog(client: Any) -> Backlog:
    """The jobs waiting in each queue and the publish time of the oldest (Celery keeps a queue
    as a Redis list of its name, pushed on the left and popped on the right: the oldest is the
    last element), in one round trip."""
    pipe = client.pipeline(transaction=False)
    for queue in QUEUES:
        pipe.llen(queue)
        pipe.lindex(queue, -1)
    answers = pipe.execute()
    lanes = {}
    for i, queue in enumerate(QUEUES):
        depth, last = int(answers[2 * i]), answers[2 * i + 1]
        lanes[queue] = Lane(depth, _published_at(last) if depth and last else None)
    return Backlog(lanes)


def _published_at(raw: bytes) -> float:
    """A queued job's publish time. One without it (published by an older Inbots) counts as
    published at the epoch: every publish after it may still be waiting its turn."""
    try:
        return float(json.loads(raw)["headers"][PUBLISHED_AT])
    except (ValueError, KeyError, TypeError):
        return 0.0


def backlog(settings: Settings) -> Backlog | None:
    """:func:`read_backlog` from the configured broker; ``None`` when it does not answer within
    :data:`PROBE_SECONDS`. Only called with a broker configured."""
    import redis

    try:
        client = _client(settings)
        try:
            return read_backlog(client)
        finally:
            client.close()
    except (redis.RedisError, OSError, ValueError) as exc:
        log.info("broker backlog unavailable: %s", type(exc).__name__)
        return None
