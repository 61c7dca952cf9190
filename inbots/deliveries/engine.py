"""The delivery engine, assembled: what runs :func:`~inbots.deliveries.notify.notify` and
:func:`~inbots.deliveries.renotify.sweep`, in each run mode.

- **Embedded default** (no broker): the local dispatcher's threads and timer run them in this
  process, with in-memory leases for the per-URL cap.
- **Production** (a broker): web processes publish to Celery and relay long-poll wake-ups over
  Redis; each Celery worker builds one :class:`~inbots.deliveries.notify.Engine` (Redis leases)
  with :func:`worker_engine`, and its tasks call the same two functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import redis

from inbots.config import Settings
from inbots.db.engine import Database
from inbots.deliveries.notify import Engine, make_client, notify_all
from inbots.deliveries.renotify import sweep
from inbots.dispatch import broker
from inbots.dispatch.effects import Dispatch
from inbots.dispatch.jobs import Job, Publisher, Result
from inbots.dispatch.limiter import LocalLimiter, RedisLimiter
from inbots.dispatch.local import LocalDispatcher
from inbots.dispatch.publisher import CeleryPublisher, broker_breaker
from inbots.dispatch.wakeups import RedisRelay, WakeupHub


def build_dispatch(settings: Settings, db: Database) -> Dispatch:
    """The app's dispatch: the embedded default's local dispatcher, or Celery with the relay,
    both behind one breaker for the broker."""
    if settings.embedded:
        return embedded_dispatch(settings, db)
    breaker = broker_breaker(settings)
    relay = RedisRelay(settings.broker_url, WakeupHub(), breaker)
    return Dispatch(
        CeleryPublisher.for_web(settings, breaker),
        relay=relay,
        backlog=lambda: broker.backlog(settings),
        breaker=breaker,
    )


def embedded_dispatch(settings: Settings, db: Database) -> Dispatch:
    """Delivery in this process: the same notify and sweep the Celery tasks run."""
    engine = Engine(
        db,
        settings,
        make_client(settings),
        LocalLimiter(settings.webhook_max_in_flight_per_url, settings.inflight_lease_seconds),
    )

    def run(jobs: Sequence[Job], then: Callable[[Job, Result], None]) -> list[Result]:
        return notify_all(engine, jobs, then)

    def sweep_once(publisher: Publisher) -> None:
        sweep(db, settings, publisher.publish, limiter=engine.limiter, backlog=local.backlog)

    local = LocalDispatcher(settings, run, sweep_once)
    return Dispatch(
        local,
        backlog=local.backlog,
        on_start=[local.start],
        on_stop=[local.stop, engine.close],
    )


def worker_engine(settings: Settings) -> Engine:
    """One Celery worker process's engine: a database pool, an HTTP client and the Redis leases
    shared with every other worker."""
    client = redis.Redis.from_url(settings.broker_url, socket_timeout=3)
    limiter = RedisLimiter(
        client, settings.webhook_max_in_flight_per_url, ttl_seconds=settings.inflight_lease_seconds
    )
    return Engine(Database(settings), settings, make_client(settings), limiter)
