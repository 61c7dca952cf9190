"""The Celery app: broker from settings, JSON only, late acknowledgement, the renotify beat.

``celery -A workers worker`` runs notify jobs (queues ``notify``, ``notify-retry``, ``alerts`` and
``sweep``; any number of workers on any number of machines); ``celery -A workers beat``
schedules the renotify sweep (exactly one beat per deployment).
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.signals import beat_init, celeryd_after_setup, setup_logging, worker_ready
from kombu import Queue
from kombu.utils.objects import cached_property

import inbots.models  # noqa: F401  (every table: the tasks' queries join across them)
from inbots.config import get_settings
from inbots.dispatch.jobs import ALERT_QUEUE, NOTIFY_QUEUE, RENOTIFY_TASK, RETRY_QUEUE, SWEEP_QUEUE
from inbots.dispatch.publisher import celery_config
from inbots.kit.startup import started
from inbots.observability.logs import configure_logging
from workers.broker import transport_for


class Inbots(Celery):
    """The Celery app, whose ``worker`` and ``beat`` programs log as Inbots does."""

    @cached_property
    def Worker(self) -> Any:
        return self.subclass_with_self("workers.programs:Worker")

    @cached_property
    def Beat(self) -> Any:
        return self.subclass_with_self("workers.programs:Beat")


settings = get_settings()
configure_logging(settings)  # from the first line on, before Celery sets up its logging
app = Inbots("inbots")
app.conf.update(celery_config(settings))
app.conf.update(
    # First attempts, retries and the operator's alerts wait in separate queues, so a dead
    # receiver's retries never stand in front of new mail and a backlog of mail never in front
    # of the alert about it; the worker polls them in turn.
    task_queues=[Queue(NOTIFY_QUEUE), Queue(RETRY_QUEUE), Queue(ALERT_QUEUE), Queue(SWEEP_QUEUE)],
    task_routes={RENOTIFY_TASK: {"queue": SWEEP_QUEUE}},
    beat_schedule={
        "renotify": {
            "task": RENOTIFY_TASK,
            "schedule": settings.renotify_interval_seconds,
            # A sweep that could not start before the next one is due is not worth running.
            "options": {"queue": SWEEP_QUEUE, "expires": settings.renotify_interval_seconds},
        }
    },
    # Beat keeps its schedule in memory: the one entry is an interval, so a restarted beat loses
    # nothing worth a file (the default, PersistentScheduler, writes celerybeat-schedule* into
    # the working directory).
    beat_scheduler="celery.beat:Scheduler",
    worker_hijack_root_logger=False,
    # kombu's Redis transport with a guard that keeps a busy worker alive through a broker
    # restart (workers/broker.py says why). Only the worker and beat use it: the web publishes
    # through kombu's own transport and never closes a consuming channel.
    broker_transport=transport_for(settings.broker_url),
    # Reconnect for as long as the broker is away: Celery's default (100 tries, up to 30 s
    # apart) ends the worker after about 50 minutes of outage.
    broker_connection_max_retries=None,
)


@setup_logging.connect
def _logging(**_: Any) -> None:
    """Celery's own lines and the tasks' go through Inbots' redacting handler."""
    configure_logging(settings)


@celeryd_after_setup.connect
def _alerts_with_mail(instance: Any, **_: Any) -> None:
    """A worker that takes mail takes the alerts too, even on a command line written before
    they had a queue of their own (``-Q notify,notify-retry,sweep``)."""
    queues = instance.app.amqp.queues
    if NOTIFY_QUEUE in queues.consume_from and ALERT_QUEUE not in queues.consume_from:
        queues.select_add(ALERT_QUEUE)


@worker_ready.connect
@beat_init.connect
def _started(**_: Any) -> None:
    started()  # the collector rested from the first import on (workers/__init__.py)


@beat_init.connect
def _watch(**_: Any) -> None:
    """Beat watches the installation itself (queue.backlog, workers.down) and sends those alerts
    from its own process: with every worker down they still get through."""
    from inbots.engine import beat_watch

    beat_watch(settings).start()


@worker_ready.connect
def _metrics_server(**_: Any) -> None:
    """Each worker serves its counters (attempts, latency) for Prometheus, when asked to."""
    if settings.worker_metrics_port:
        from prometheus_client import start_http_server

        start_http_server(settings.worker_metrics_port)


import workers.tasks  # noqa: E402,F401  (registers the tasks)
