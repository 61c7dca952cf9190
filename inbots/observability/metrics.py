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
- **state**, read at scrape time, so every web process reports the same truth: deliveries by
  derived state, agents, the sweep's heartbeat, the broker. Those gauges are the stats domain's
  (:mod:`inbots.stats.metrics`), which adds them to :func:`events` at each scrape; this module
  knows no domain and sits below them all.

Labels are closed sets (states, reason codes, status classes); no id, URL, key or body is ever
a label.
"""

from __future__ import annotations

import logging
import os
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess

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
ALERTS_RAISED = Counter(
    "inbots_alerts_raised",
    "Operator alerts raised for the alert webhook, by type (delivery.stalled, delivery.failed, "
    "agent.webhook_failing, approval.requested).",
    ["type"],
)
ALERT_NOTIFICATIONS = Counter(
    "inbots_alert_notifications",
    "Attempts to send an operator alert to the alert webhook, by what came of the job: "
    "notified, retry, failed.",
    ["result"],
)


def status_class(code: int | None) -> str:
    return "none" if code is None else f"{code // 100}xx"


def observe_attempt(
    reason: str, status_code: int | None, duration_ms: int | None, outcome: str, delivery: bool
) -> None:
    """One webhook attempt, of any notification; ``delivery``: of a delivery (new mail), the
    only kind ``inbots_deliveries_failed_total`` counts (an event's or an alert's failure is no
    delivery.failed)."""
    WEBHOOK_ATTEMPTS.labels(reason, status_class(status_code)).inc()
    if duration_ms is not None:
        ATTEMPT_SECONDS.observe(duration_ms / 1000)
    if outcome == "failed" and delivery:
        DELIVERIES_FAILED.labels("gone" if reason == "gone" else "attempts_exhausted").inc()


def observe_alerts(types: list[str]) -> None:
    for name in types:
        ALERTS_RAISED.labels(name).inc()


def observe_alert_attempt(outcome: str) -> None:
    ALERT_NOTIFICATIONS.labels(outcome).inc()


def observe_job(outcome: str) -> None:
    NOTIFY_JOBS.labels(outcome).inc()


def observe_notified(accepted_at: datetime, now: datetime) -> None:
    NOTIFY_LATENCY.observe(max((now - accepted_at).total_seconds(), 0.0))


def observe_sweep(
    republished: int,
    exhausted: int,
    stalled: int,
    woken: int = 0,
    worker_lost: int = 0,
    failed_deliveries: int = 0,
    resumed: int = 0,
) -> None:
    """``exhausted``: the rows of either kind the sweep gave up on; ``failed_deliveries``: those
    of them that are deliveries (``inbots_deliveries_failed_total``)."""
    RENOTIFY_RUNS.inc()
    RENOTIFY_ACTIONS.labels("republished").inc(republished)
    RENOTIFY_ACTIONS.labels("exhausted").inc(exhausted)
    RENOTIFY_ACTIONS.labels("stalled").inc(stalled)
    RENOTIFY_ACTIONS.labels("woken").inc(woken)
    RENOTIFY_ACTIONS.labels("worker_lost").inc(worker_lost)
    RENOTIFY_ACTIONS.labels("resumed").inc(resumed)
    if failed_deliveries:
        DELIVERIES_FAILED.labels("publish_exhausted").inc(failed_deliveries)


def events() -> bytes:
    """The event counters: this process's, or with ``PROMETHEUS_MULTIPROC_DIR`` set, those of
    every process sharing that directory, summed."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not directory:
        return generate_latest()
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=directory)
    return generate_latest(registry)
