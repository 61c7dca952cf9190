"""``celery worker`` and ``celery beat`` as Inbots runs them.

When the logs are JSON lines (``INBOTS_ENVIRONMENT=production`` or ``INBOTS_LOG_FORMAT=json``),
Celery's banners and its shutdown notice, which it prints as text around the log, would be the
only lines a log collector cannot parse. These programs say the same as log lines instead; with
readable text logs they are Celery's own.
"""

from __future__ import annotations

import logging
from typing import Any

from celery.apps.beat import Beat as CeleryBeat
from celery.apps.worker import Worker as CeleryWorker
from celery.apps.worker import install_worker_term_handler
from celery.signals import worker_shutting_down

from inbots.config import get_settings
from inbots.observability.logs import json_lines

log = logging.getLogger("workers")


def _json_logs() -> bool:
    return json_lines(get_settings())


class Worker(CeleryWorker):
    """``celery worker``: in JSON logging, the banner is one log line and so is the shutdown."""

    def on_before_init(self, quiet: bool = False, **kwargs: Any) -> None:
        super().on_before_init(quiet=quiet or _json_logs(), **kwargs)

    def on_start(self) -> None:
        super().on_start()
        if _json_logs():
            queues = ",".join(sorted(self.app.amqp.queues.consume_from))
            log.info(
                "%s starting: %s pool, concurrency %s, queues %s",
                self.hostname,
                self.pool_cls.__module__.rsplit(".", 1)[-1],
                self.concurrency,
                queues,
            )

    def install_platform_tweaks(self, worker: Any) -> None:
        super().install_platform_tweaks(worker)
        if _json_logs():
            # Celery prints "worker: Warm shutdown (MainProcess)" on SIGTERM; the same handler
            # without the print, and _shutting_down says it as a log line.
            install_worker_term_handler(worker, verbose=False)


@worker_shutting_down.connect
def _shutting_down(sig: str = "", how: str = "", **_: Any) -> None:
    if _json_logs():
        log.info("worker: %s shutdown (%s)", how.lower(), sig)


class Beat(CeleryBeat):
    """``celery beat``: in JSON logging, no banner (its own "beat: Starting..." line says it)."""

    def __init__(self, *args: Any, quiet: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, quiet=quiet or _json_logs(), **kwargs)
