"""The scrape-time gauges of ``/metrics``: the state of this installation, read when Prometheus
asks, so every web process reports the same truth.

From the database (:class:`DatabaseCollector`): deliveries by derived state, the oldest stalled
and not-yet-notified ages, agents, the messages waiting for approval, and when the renotify
sweep last ran (its heartbeat, written by whichever process ran it); from the broker
(:class:`BacklogCollector`): whether it answers, its queue depths and the age of the oldest job
waiting (the embedded default's own lanes, without a broker). Each source is read on its own, so
one that is down still lets the other report.
The event counters come from :mod:`inbots.observability.metrics`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from inbots.alerts.service import failing_webhooks
from inbots.config import Settings
from inbots.db.engine import Database
from inbots.dispatch.backlog import Backlog
from inbots.heartbeats.service import RENOTIFY, last_beat
from inbots.kit.clock import utcnow
from inbots.observability.metrics import events
from inbots.stats.service import (
    agent_counts,
    approvals_pending,
    delivery_counts,
    oldest,
    seconds_since,
)

log = logging.getLogger(__name__)


class DatabaseCollector(Collector):
    """Gauges read at scrape time, across every workspace of this installation."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = utcnow()
        with self.db.engine.execution_options(inbots_readonly=True).connect() as conn:
            counts = delivery_counts(conn, None)
            counts.pop("total")
            ages = oldest(conn, None)
            agents_now = agent_counts(conn, None, self.settings, now)
            swept = last_beat(conn, RENOTIFY)
            held = approvals_pending(conn, None)
            failing = failing_webhooks(conn, self.settings.alert_webhook_failures)

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
        yield GaugeMetricFamily(
            "inbots_approvals_pending",
            "Messages the approval gate holds, waiting for the operator's decision.",
            held,
        )
        agents = GaugeMetricFamily("inbots_agents", "Agents not archived.", labels=["status"])
        agents.add_metric(["active"], agents_now.active)
        agents.add_metric(["never_connected"], agents_now.never_connected)
        yield agents
        yield GaugeMetricFamily(
            "inbots_agents_webhook_failing",
            "Active agents whose webhook has failed INBOTS_ALERT_WEBHOOK_FAILURES attempts or more "
            "in a row.",
            failing,
        )
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


class BacklogCollector(Collector):
    """The jobs waiting for a worker in each queue and the age of the oldest notify job; with a
    broker, whether it answered."""

    def __init__(self, read: Callable[[], Backlog | None], broker: bool) -> None:
        self.read = read
        self.broker = broker

    def collect(self) -> Iterator[GaugeMetricFamily]:
        waiting = self.read()
        if self.broker:
            yield GaugeMetricFamily(
                "inbots_broker_up", "The broker answered this scrape.", 0 if waiting is None else 1
            )
        if waiting is None:
            return
        queues = GaugeMetricFamily(
            "inbots_notify_queue_depth", "Jobs waiting for a worker.", labels=["queue"]
        )
        for queue, lane in waiting.lanes.items():
            queues.add_metric([queue], lane.depth)
        yield queues
        yield GaugeMetricFamily(
            "inbots_notify_queue_oldest_age_seconds",
            "How long the oldest notify job waiting for a worker has waited (0: none waits).",
            waiting.oldest_age(time.time()) or 0.0,
        )


def render(
    db: Database, settings: Settings, backlog: Callable[[], Backlog | None] | None = None
) -> bytes:
    """The exposition text: this process's event counters, the database's gauges, then the
    backlog's (read by ``backlog``) and the settings the alert rules compare with."""
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
    if backlog is not None:
        health.register(BacklogCollector(backlog, broker=not settings.embedded))
    return events() + state + generate_latest(health)


class _Constant(Collector):
    def __init__(self, name: str, doc: str, value: float) -> None:
        self.family = GaugeMetricFamily(name, doc, value)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield self.family
