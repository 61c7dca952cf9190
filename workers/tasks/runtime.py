"""Per-process resources of a worker, made on first use (after the pool forks), once."""

from __future__ import annotations

import threading

from inbots.config import get_settings
from inbots.deliveries.attempt import Engine
from inbots.dispatch.publisher import CeleryPublisher
from inbots.engine import worker_engine
from workers.app import app

_lock = threading.Lock()
_engine: Engine | None = None
_publisher: CeleryPublisher | None = None


def engine() -> Engine:
    """The process's one Engine: one database pool, one HTTP client, one Redis client, shared by
    every pool thread (the first callers wait for the one that builds it)."""
    global _engine
    if _engine is None:
        with _lock:
            if _engine is None:
                _engine = worker_engine(get_settings())
    return _engine


def publisher() -> CeleryPublisher:
    """Publishes through the worker's own app (Celery's patient connection defaults), with the
    same failure handling and metric as a web process."""
    global _publisher
    if _publisher is None:
        with _lock:
            if _publisher is None:
                _publisher = CeleryPublisher(
                    app, fail_fast=False, batch_size=get_settings().notify_batch_size
                )
    return _publisher
