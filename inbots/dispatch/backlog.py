"""The backlog: jobs published and not yet taken by a worker, per lane, with the publish time of
the oldest one waiting.

Every notify job carries the time it was published (the header :data:`PUBLISHED_AT`, Unix
seconds). A lane is a FIFO (Celery's Redis queues push on one end and pop from the other; the
embedded dispatcher's pools run in order), so the oldest job waiting tells the renotify sweep
which publishes may still be waiting their turn: any published since that one. A publish older
than it, still not attempted, left the lane without a trace — lost with a flushed broker, or taken
by a worker that died — and is published again; a younger one is left to wait, however long the
workers were away (:func:`inbots.deliveries.renotify.lost_publishes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from inbots.dispatch.jobs import NOTIFY_LANES

PUBLISHED_AT = "inbots_published_at"


@dataclass(frozen=True)
class Lane:
    """One queue: jobs waiting in it, and when the oldest of them was published (Unix seconds;
    ``None`` when none waits)."""

    depth: int
    oldest: float | None = None


@dataclass(frozen=True)
class Backlog:
    lanes: Mapping[str, Lane]

    @property
    def depth(self) -> int:
        """Notify jobs waiting, in every notify lane (the sweep's own lane is not notify
        work)."""
        return sum(lane.depth for name, lane in self.lanes.items() if name in NOTIFY_LANES)

    def oldest(self) -> float | None:
        """When the oldest job waiting on a notify lane was published (Unix seconds), or
        ``None`` when none waits. (The sweep's own lane is not notify work.)"""
        times = [
            lane.oldest
            for name, lane in self.lanes.items()
            if name in NOTIFY_LANES and lane.depth and lane.oldest is not None
        ]
        return min(times) if times else None

    def waiting_since(self) -> datetime | None:
        """:meth:`oldest` as a time: every job published since may still be waiting its
        turn."""
        oldest = self.oldest()
        return None if oldest is None else datetime.fromtimestamp(oldest, UTC)

    def oldest_age(self, now: float) -> float | None:
        """Seconds the oldest notify job has waited at ``now`` (Unix seconds); ``None`` when
        none waits."""
        oldest = self.oldest()
        return None if oldest is None else round(max(now - oldest, 0.0), 3)
