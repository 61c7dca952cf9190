from __future__ import annotations

from inbots.dispatch.broker import BrokerState
from inbots.kit.schema import Model, Timestamp


class AgentCounts(Model):
    total: int  # not archived
    active: int  # seen within INBOTS_ACTIVE_SECONDS
    never_connected: int  # never seen, registered longer ago than the grace period
    archived: int


class ThreadCounts(Model):
    open: int
    close_requested: int
    closed: int


class QueueCounts(Model):
    depth: int  # notify jobs waiting for a worker (notify, notify-retry and alerts)
    # how long the oldest notify job waiting for a worker has waited; null when none waits
    oldest_age_seconds: float | None
    queues: dict[str, int]  # jobs waiting in each queue (notify, notify-retry, alerts, sweep)


class Stats(Model):
    deliveries: dict[str, int]  # every derived state, zero included, plus "total"
    agents: AgentCounts
    threads: ThreadCounts
    # how long the longest-stuck stalled delivery has not moved
    oldest_stalled_seconds: float | None
    oldest_unnotified_seconds: float | None  # age of the oldest webhook notification still owed
    failed_last_hour: int  # deliveries marked failed in the last hour
    attempts_failed_last_hour: int  # webhook attempts that did not succeed in the last hour
    # When the renotify sweep last finished a run, wherever it ran, and how long ago; null when
    # it never has. Older than a few renotify intervals: beat (or the embedded timer) is down.
    last_sweep_at: Timestamp | None
    last_sweep_age_seconds: float | None
    # "up" or "down" (it answers a ping or not), or "embedded" (no broker: delivery in-process).
    # Down does not stop sends: they are stored, and the sweep publishes them once it is back.
    broker: BrokerState
    # The jobs waiting for a worker (the broker's queues, or the embedded default's own lanes);
    # null when the broker does not answer. A backlog, not a failure: they are sent in turn.
    queue: QueueCounts | None
    generated_at: Timestamp
