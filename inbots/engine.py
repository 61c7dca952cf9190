"""The delivery engine, assembled: what runs :func:`~inbots.deliveries.notify.notify` and
:func:`~inbots.deliveries.renotify.sweep`, in each run mode.

- **Embedded default** (no broker): the local dispatcher's threads and timer run them in this
  process, with in-memory leases for the per-URL cap.
- **Production** (a broker): web processes publish to Celery and relay long-poll wake-ups over
  Redis; each Celery worker builds one :class:`~inbots.deliveries.attempt.Engine` (Redis leases)
  with :func:`worker_engine`, and its tasks call the same two functions. Celery beat runs the
  installation's watch (:mod:`inbots.alerts.watch`) and sends its alerts itself, with a local
  dispatcher of its own (:func:`beat_watch`): they need no worker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from inbots.alerts import watch
from inbots.config import Settings
from inbots.db.engine import Database
from inbots.deliveries.attempt import Engine, make_client
from inbots.deliveries.notify import notify_all
from inbots.deliveries.renotify import sweep
from inbots.dispatch import broker
from inbots.dispatch.effects import Dispatch
from inbots.dispatch.jobs import Job, Publisher, Result
from inbots.dispatch.limiter import LocalLimiter, RedisLimiter
from inbots.dispatch.local import LocalDispatcher
from inbots.kit.clock import utcnow


def build_dispatch(settings: Settings, db: Database) -> Dispatch:
    """The app's dispatch: the embedded default's local dispatcher, or Celery with the relay,
    both behind one breaker for the broker."""
    if settings.embedded:
        return embedded_dispatch(settings, db)
    # Here, not above: the embedded default never loads Celery or redis-py (a quarter second).
    from inbots.dispatch.publisher import CeleryPublisher, broker_breaker
    from inbots.dispatch.wakeups import RedisRelay, WakeupHub

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
        raised = watch.check(db, settings, local.backlog(), utcnow())
        if raised:
            publisher.publish(raised)

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
    import redis

    client = redis.Redis.from_url(settings.broker_url, socket_timeout=3)
    limiter = RedisLimiter(
        client, settings.webhook_max_in_flight_per_url, ttl_seconds=settings.inflight_lease_seconds
    )
    return Engine(Database(settings), settings, make_client(settings), limiter)


def beat_watch(settings: Settings) -> LocalDispatcher:
    """Celery beat's watch: every renotify interval, :func:`inbots.alerts.watch.check` with the
    broker's backlog, its alerts sent from this process by the embedded default's dispatcher
    (its own database pool, HTTP client and in-flight slots; retries on its timer), so they get
    through with every worker down. Started by ``workers.app`` when beat starts."""
    db = Database(settings)
    engine = Engine(
        db,
        settings,
        make_client(settings),
        LocalLimiter(settings.webhook_max_in_flight_per_url, settings.inflight_lease_seconds),
    )
    started = utcnow()

    def run(jobs: Sequence[Job], then: Callable[[Job, Result], None]) -> list[Result]:
        return notify_all(engine, jobs, then)

    def watch_once(publisher: Publisher) -> None:
        raised = watch.check(db, settings, broker.backlog(settings), utcnow(), started)
        if raised:
            publisher.publish(raised)

    return LocalDispatcher(settings, run, watch_once)
