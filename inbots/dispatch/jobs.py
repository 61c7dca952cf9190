"""What travels: a job, what running one says should happen next, who carries it (a
:class:`Publisher`), and the names on the broker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from inbots.kit.ids import kind_of

NOTIFY_TASK = "delivery.notify"
NOTIFY_BATCH_TASK = "delivery.notify_batch"
RENOTIFY_TASK = "delivery.renotify"
NOTIFY_QUEUE = "notify"
RETRY_QUEUE = "notify-retry"
ALERT_QUEUE = "alerts"
SWEEP_QUEUE = "sweep"
NOTIFY_LANES = (NOTIFY_QUEUE, RETRY_QUEUE, ALERT_QUEUE)  # where notify jobs wait
QUEUES = (*NOTIFY_LANES, SWEEP_QUEUE)


@dataclass(frozen=True)
class Job:
    """One publish of one outbox row: which row (a delivery, ``dlv_…``, for ``message.created``;
    an event, ``evt_…``, for the other notification types), which publish of it, and why.
    ``retry`` routes it to the retry lane (the publish has had an attempt already), ``alert``
    to the operator's alerts' own lane (whatever the mail's backlog, an alert waits behind
    alerts only); neither is part of the message."""

    row_id: str
    publish: int
    trigger: str = "publish"
    retry: bool = False
    alert: bool = False

    def as_args(self) -> list[Any]:
        """The task's arguments on the broker (JSON)."""
        return [self.row_id, self.publish, self.trigger]

    @classmethod
    def from_args(cls, args: Sequence[Any], *, lane: str | None = None) -> Job:
        """The job of a task's arguments, taken from ``lane`` (the queue it came from)."""
        row_id, publish, *trigger = args
        return cls(
            str(row_id),
            int(publish),
            str(trigger[0]) if trigger else "publish",
            retry=lane == RETRY_QUEUE,
            alert=lane == ALERT_QUEUE,
        )

    @property
    def kind(self) -> str:
        """``delivery`` or ``event``: which table the row is in, as its id says."""
        return "event" if kind_of(self.row_id) == "event" else "delivery"

    @property
    def log_ids(self) -> dict[str, str]:
        """The row's id as a log field (``delivery_id`` or ``event_id``)."""
        return {f"{self.kind}_id": self.row_id}

    @property
    def queue(self) -> str:
        if self.alert:
            return ALERT_QUEUE
        return RETRY_QUEUE if self.retry else NOTIFY_QUEUE


@dataclass(frozen=True)
class Result:
    """What one run of a job says should happen next.

    ``outcome``: notified, retry, failed, skipped, parked or busy. ``countdown``: run the job
    again after this many seconds (retry; busy: another attempt holds the delivery, or its retry
    is due later). ``wake``: jobs to publish now, each on its lane: parked deliveries, a slot of
    their URL being free, and the operator's alerts the run raised (:mod:`inbots.alerts`)."""

    outcome: str
    countdown: float | None = None
    reason: str | None = None
    wake: tuple[Job, ...] = ()


def batches(jobs: Sequence[Job], size: int) -> list[list[Job]]:
    """``jobs`` in groups of at most ``size`` that travel together: same lane, in order."""
    lanes: dict[str, list[Job]] = {}
    for job in jobs:
        lanes.setdefault(job.queue, []).append(job)
    return [
        lane[start : start + size] for lane in lanes.values() for start in range(0, len(lane), size)
    ]


class Publisher(Protocol):
    def publish(self, jobs: Sequence[Job]) -> None:
        """Hand jobs over, each on its lane (``Job.queue``); must not raise."""

    def later(self, job: Job, countdown: float) -> None:
        """Run ``job`` again after ``countdown`` seconds, on its lane; must not raise."""
