"""Per-process resources of a worker, made on first use (after the pool forks), once."""

from __future__ import annotations

import threading

import redis

from inbots.config import get_settings
from inbots.db.engine import Database
from inbots.deliveries.limiter import RedisLimiter
from inbots.deliveries.notify import Engine, make_client

_lock = threading.Lock()
_engine: Engine | None = None


def engine() -> Engine:
    """The process's one Engine: one database pool, one HTTP client, one Redis client, shared by
    every pool thread (the first callers wait for the one that builds it)."""
    global _engine
    if _engine is None:
        with _lock:
            if _engine is None:
                settings = get_settings()
                client = redis.Redis.from_url(settings.broker_url, socket_timeout=3)
                limiter = RedisLimiter(
                    client,
                    settings.webhook_max_in_flight_per_url,
                    ttl_seconds=settings.inflight_lease_seconds,
                )
                _engine = Engine(Database(settings), settings, make_client(settings), limiter)
    return _engine
