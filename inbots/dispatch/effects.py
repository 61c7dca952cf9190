"""What a unit of work hands over once its data is durable: jobs to publish, agents to wake.

A service never publishes and never wakes anyone itself: it calls ``uow.enqueue(job)`` and
``uow.wake(agent_ids)``; the unit of work buffers both and, only after its commit succeeds, hands
them to its :class:`Effects` (dropped on rollback, and never sent by a read-only unit).
:class:`Dispatch` is the app's implementation: a publisher (Celery, or the embedded default's
local dispatcher) and the long-poll hub, with the Redis relay when there is a broker.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Protocol

from inbots.dispatch.backlog import Backlog
from inbots.dispatch.breaker import Breaker
from inbots.dispatch.jobs import Job, Publisher
from inbots.dispatch.wakeups import RedisRelay, WakeupHub


class Effects(Protocol):
    """Where a committed unit of work sends its jobs and wake-ups; must not raise."""

    def publish(self, jobs: Sequence[Job]) -> None: ...

    def wake(self, agent_ids: Collection[str]) -> None: ...


class Dispatch:
    """The app's :class:`Effects`, and what runs them.

    ``publisher`` is ``None`` where nothing runs jobs (a bare script: what it would publish is left
    to the renotify sweep). ``backlog`` reads what waits for a worker (``None`` from it: the
    broker does not answer); ``breaker`` is the process's breaker for the broker, if it has one.
    ``start``/``stop`` run the parts that have a life of their own (the local dispatcher's
    threads, the relay's listener) inside the app's lifespan."""

    def __init__(
        self,
        publisher: Publisher | None = None,
        *,
        relay: RedisRelay | None = None,
        backlog: Callable[[], Backlog | None] | None = None,
        breaker: Breaker | None = None,
        on_start: Sequence[Callable[[], None]] = (),
        on_stop: Sequence[Callable[[], None]] = (),
    ) -> None:
        self.publisher = publisher
        self.relay = relay
        self.breaker = breaker
        self._backlog = backlog
        self.wakeups = relay.hub if relay is not None else WakeupHub()
        self._on_start = [*on_start, *([relay.start] if relay else [])]
        self._on_stop = [
            *([relay.stop] if relay else []),
            *([breaker.stop] if breaker else []),
            *on_stop,
        ]

    def backlog(self) -> Backlog | None:
        """The jobs waiting for a worker; ``None`` when the broker does not answer (at once
        while the breaker is open) or nothing runs jobs."""
        if self._backlog is None or (self.breaker is not None and not self.breaker.allow()):
            return None
        return self._backlog()

    def publish(self, jobs: Sequence[Job]) -> None:
        if self.publisher is not None and jobs:
            self.publisher.publish(jobs)

    def wake(self, agent_ids: Collection[str]) -> None:
        if not agent_ids:
            return
        self.wakeups.notify(agent_ids)
        if self.relay is not None:
            self.relay.send(list(agent_ids))

    def start(self) -> None:
        for fn in self._on_start:
            fn()

    def stop(self) -> None:
        for fn in self._on_stop:
            fn()
