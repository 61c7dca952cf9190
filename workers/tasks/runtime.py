"""Per-process resources of a worker, made on first use (after the pool forks)."""

from __future__ import annotations

import threading
from functools import lru_cache

import redis

from inbots.config import get_settings
from inbots.db.engine import Database
from inbots.deliveries.limiter import RedisLimiter
from inbots.deliveries.notify import Engine, make_client

_lock = threading.Lock()


@lru_cache(maxsize=1)
def engine() -> Engine:
    with _lock:
        settings = get_settings()
        client = redis.Redis.from_url(settings.broker_url, socket_timeout=3)
        limiter = RedisLimiter(
            client,
            settings.webhook_max_in_flight_per_url,
            ttl_seconds=int(settings.webhook_timeout_seconds * 3) + 5,
        )
        return Engine(Database(settings), settings, make_client(settings), limiter)
