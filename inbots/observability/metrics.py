"""Prometheus metrics.

Two kinds:

- **events**, counted where they happen, in the process they happen in (prometheus-client's
  default registry): messages accepted, webhook attempts, publish failures, renotify runs. In the
  embedded default that is the one process; in production the web processes count what requests
  do, and each Celery worker serves its own ``/metrics`` on ``INBOTS_WORKER_METRICS_PORT``.
  Several web processes behind one port (``uvicorn --workers``, as the Procfile runs them) share
  their counts through prometheus-client's multiprocess mode: ``PROMETHEUS_MULTIPROC_DIR``, set
  before they start, names an empty directory they all write to, and any one of them answers
  with the sum.
- **state**, read at scrape time, so every web process reports the same truth: from the database
  (:class:`DatabaseCollector`) deliveries by derived state, the oldest stalled and
  not-yet-notified ages, agents, and when the renotify sweep last ran (its heartbeat, written by
  whichever process ran it); from the broker (:class:`BrokerCollector`) whether it answers and
  its queue depths. Each source is read on its own, so one that is down still lets the other
  report.

Labels are closed sets (states, reason codes, status classes); no id, URL, key or body is ever
a label.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from inbots.config import Settings
from inbots.db.engine import Database
from inbots.kit.clock import utcnow
from inbots.observability import probes

log = logging.getLogger(__name__)

MESSAGES_ACCEPTED = Counter("inbots_messages_accepted", "Messages accepted (not duplicates).")
DELIVERIES_CREATED = Counter("inbots_deliveries_created", "Deliveries created (one a recipient).")
WEBHOOK_ATTEMPTS = Counter(
    "inbots_webhook_attempts",
    "Webhook attempts by outcome (reason code) and HTTP status class.",
    ["outcome", "status_class"],
)
ATTEMPT_SECONDS = Histogram(
    "inbots_webhook_attempt_duration_seconds",
    "Duration of one webhook attempt.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
NOTIFY_LATENCY = Histogram(
    "inbots_notify_latency_seconds",
    "End to end: a delivery accepted until its webhook answered 2xx.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 60, 300, 900, 3600),
)
DELIVERIES_FAILED = Counter("inbots_deliveries_failed", "Deliveries stamped failed.", ["why"])
PUBLISH_FAILURES = Counter(
    "inbots_publish_failures", "Notify jobs the broker refused (the sweep publishes them again)."
)
SIGNIN_FAILURES = Counter(
    "inbots_signin_failures",
    "Dashboard sign-ins refused: a wrong token (bad_token), or held back by the throttle"
    " (throttled_address, throttled_deployment).",
    ["reason"],
)
NOTIFY_JOBS = Counter(
    "inbots_notify_jobs",
    "Notify jobs run (each one the broker carried, or the embedded dispatcher ran), by outcome: "
    "notified, retry, failed, skipped, parked (the URL was at its cap), busy, error.",
    ["outcome"],
)
RENOTIFY_RUNS = Counter("inbots_renotify_runs", "Renotify sweeps run.")
RENOTIFY_ACTIONS = Counter(
    "inbots_renotify_actions",
    "What renotify sweeps did: republished lost publishes, failed exhausted ones, marked stalls, "
    "woke parked deliveries, logged attempts of workers that died.",
    ["action"],
)


def status_class(code: int | None) -> str:
    return "none" if code is None else f"{code // 100}xx"


def observe_attempt(
    reason: str, status_code: int | None, duration_ms: int | None, outcome: str
) -> None:
    WEBHOOK_ATTEMPTS.labels(reason, status_class(status_code)).inc()
    if duration_ms is not None:
        ATTEMPT_SECONDS.observe(duration_ms / 1000)
    if outcome == "failed":
        DELIVERIES_FAILED.labels("gone" if reason == "gone" else "attempts_exhausted").inc()


def observe_job(outcome: str) -> None:
    NOTIFY_JOBS.labels(outcome).inc()


def observe_notified(accepted_at: datetime, now: datetime) -> None:
    NOTIFY_LATENCY.observe(max((now - accepted_at).total_seconds(), 0.0))


def observe_sweep(
    republished: int, exhausted: int, stalled: int, woken: int = 0, worker_lost: int = 0
) -> None:
    RENOTIFY_RUNS.inc()
    RENOTIFY_ACTIONS.labels("republished").inc(republished)
    RENOTIFY_ACTIONS.labels("exhausted").inc(exhausted)
    RENOTIFY_ACTIONS.labels("stalled").inc(stalled)
    RENOTIFY_ACTIONS.labels("woken").inc(woken)
    RENOTIFY_ACTIONS.labels("worker_lost").inc(worker_lost)
    if exhausted:
        DELIVERIES_FAILED.labels("publish_exhausted").inc(exhausted)


class DatabaseCollector(Collector):
    """Gauges read at scrape time, across every workspace of this installation."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from inbots.heartbeats.service import RENOTIFY, last_beat
        from inbots.stats.service import agent_counts, delivery_counts, oldest, seconds_since

        now = utcnow()
        with self.db.engine.execution_options(inbots_readonly=True).connect() as conn:
            counts = delivery_counts(conn, None)
            counts.pop("total")
            ages = oldest(conn, None)
            agents_now = agent_counts(conn, None, self.settings, now)
            swept = last_beat(conn, RENOTIFY)

        by_state = GaugeMetricFamily(
            "inbots_deliveries", "Deliveries by derived state.", labels=["state"]
        )
        for name, n in counts.items():
            by_state.add_metric([name], n)
        yield by_state
        yield GaugeMetricFamily(
            "inbots_deliveries_stalled", "Stalled deliveries.", counts["stalled"]
        )
        yield GaugeMetricFamily(
            "inbots_deliveries_failed_now", "Failed deliveries not acknowledged.", counts["failed"]
        )
        yield GaugeMetricFamily(
            "inbots_oldest_stalled_seconds",
            "How long the longest-stuck stalled delivery has not moved (0: none).",
            seconds_since(now, ages.oldest_stalled) or 0.0,
        )
        yield GaugeMetricFamily(
            "inbots_oldest_unnotified_seconds",
            "Age of the oldest webhook notification still owed (0: none).",
            seconds_since(now, ages.oldest_unnotified) or 0.0,
        )
        agents = GaugeMetricFamily("inbots_agents", "Agents not archived.", labels=["status"])
        agents.add_metric(["active"], agents_now.active)
        agents.add_metric(["never_connected"], agents_now.never_connected)
        yield agents
        if swept is not None:  # never swept: absent, rather than an age that means nothing
            yield GaugeMetricFamily(
                "inbots_renotify_last_run_timestamp_seconds",
                "When the renotify sweep last finished a run (Unix time), whichever process ran "
                "it.",
                swept.timestamp(),
            )
            yield GaugeMetricFamily(
                "inbots_renotify_last_run_age_seconds",
                "Seconds since the renotify sweep last finished a run; absent if it never has.",
                seconds_since(now, swept) or 0.0,
            )


class BrokerCollector(Collector):
    """Whether the broker answers and the jobs waiting in its queues (with a broker only)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def collect(self) -> Iterator[GaugeMetricFamily]:
        depth = probes.queue_depths(self.settings)
        yield GaugeMetricFamily(
            "inbots_broker_up", "The broker answered this scrape.", 0 if depth is None else 1
        )
        if depth is not None:
            queues = GaugeMetricFamily(
                "inbots_notify_queue_depth", "Jobs waiting in the broker.", labels=["queue"]
            )
            for queue, n in depth.items():
                queues.add_metric([queue], n)
            yield queues


def render(db: Database, settings: Settings) -> bytes:
    """The exposition text: this process's event counters, the database's gauges, then the
    broker's and the settings the alert rules compare with."""
    scrape = CollectorRegistry(auto_describe=False)
    scrape.register(DatabaseCollector(db, settings))
    try:
        state, up = generate_latest(scrape), 1
    except Exception as exc:  # a scrape must still answer (and say the database is down)
        log.warning("metrics could not read the database: %s", type(exc).__name__)
        state, up = b"", 0
    health = CollectorRegistry(auto_describe=False)
    health.register(_Constant("inbots_database_up", "The database answered this scrape.", up))
    health.register(
        _Constant(
            "inbots_renotify_interval_seconds",
            "INBOTS_RENOTIFY_INTERVAL_SECONDS: how often the renotify sweep should run.",
            settings.renotify_interval_seconds,
        )
    )
    if not settings.embedded:
        health.register(BrokerCollector(settings))
    return _events() + state + generate_latest(health)


def _events() -> bytes:
    """The event counters: this process's, or with ``PROMETHEUS_MULTIPROC_DIR`` set, those of
    every process sharing that directory, summed."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not directory:
        return generate_latest()
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=directory)
    return generate_latest(registry)


class _Constant(Collector):
    def __init__(self, name: str, doc: str, value: float) -> None:
        self.family = GaugeMetricFamily(name, doc, value)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield self.family
