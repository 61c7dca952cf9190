"""A batch's POSTs made one after another on the calling thread while each answers quickly, and
handed to other threads as soon as one does not.

Healthy receivers answer in moments: posting a batch in turn on the task's own thread costs no
thread hop per POST (a hop and its wake-ups cost more CPU than a local POST itself), and the
batch is recorded in one transaction when the last answer is in. A batch is handed over as soon
as one POST goes unanswered for :data:`SLOW_POST_SECONDS`, or the batch has been posting for
:data:`HAND_OFF_SECONDS`: the POSTs already answered and the ones not yet begun go to
``take_over``, which posts the rest side by side and records each as soon as it is done, so a
slow receiver holds up the others no longer than that; the calling thread records the POST it
was making alone once it is answered.

One daemon thread per :class:`Lookout` looks at the batches under way every
:data:`LOOK_SECONDS`, and sleeps while there are none.

At most :data:`TURNS` batches of a process claim, post and record at once (:class:`Turns`); the
other task threads wait their turn without using the CPU. Python runs one thread at a time, and
eight threads taking it from each other at every socket call spent more CPU on the hand-offs
than on the work (a worker of 8 threads drained a backlog at two thirds of the rate of one of
2). A batch leaves its turn as soon as it is handed over, so a slow receiver holds one only
for a moment.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")
Answer = TypeVar("Answer")

HAND_OFF_SECONDS = 0.15
"""How long a batch's POSTs are made in turn at most before the rest are handed over."""
SLOW_POST_SECONDS = 0.05
"""How long one POST may go unanswered before the rest of its batch is handed over."""
LOOK_SECONDS = 0.01
"""How often the lookout looks at the batches under way."""
TURNS = 2
"""How many batches of a process claim, post and record at once."""


class Turn:
    """A batch's hold on one of the :class:`Turns`, given back once (by whichever thread)."""

    def __init__(self, free: threading.Semaphore | None) -> None:
        self._free = free
        self._lock = threading.Lock()

    def leave(self) -> None:
        with self._lock:
            free, self._free = self._free, None
        if free is not None:
            free.release()


class Turns:
    """At most ``size`` batches under way at once; the others wait in :meth:`take`."""

    def __init__(self, size: int = TURNS) -> None:
        self._free = threading.BoundedSemaphore(size)

    @contextmanager
    def take(self) -> Iterator[Turn]:
        self._free.acquire()
        turn = Turn(self._free)
        try:
            yield turn
        finally:
            turn.leave()


@dataclass(eq=False)
class _Batch(Generic[Item, Answer]):
    waiting: deque[Item]
    take_over: Callable[[list[tuple[Item, Answer]], list[Item]], Future[None]]
    started: float
    turn: Turn | None = None
    done: list[tuple[Item, Answer]] = field(default_factory=list)
    posting_since: float | None = None  # the POST under way began then
    handed: Future[None] | None = None


@dataclass
class Outcome(Generic[Item, Answer]):
    """What :meth:`Lookout.run` leaves to its caller: the POSTs it made in turn that were not
    handed over (``done``, to record together), the POST under way when the batch was handed
    over (``late``, to record alone), and the hand-over's future, finished once everything it
    took is recorded."""

    done: list[tuple[Item, Answer]]
    late: tuple[Item, Answer] | None = None
    handed: Future[None] | None = None


class Lookout:
    def __init__(
        self,
        limit: float = HAND_OFF_SECONDS,
        post_limit: float = SLOW_POST_SECONDS,
        every: float = LOOK_SECONDS,
    ) -> None:
        self.limit = limit
        self.post_limit = post_limit
        self.every = every
        self._cond = threading.Condition()
        self._batches: set[_Batch[Any, Any]] = set()
        self._thread: threading.Thread | None = None
        self._closed = False

    def run(
        self,
        items: Sequence[Item],
        post: Callable[[Item], Answer],
        take_over: Callable[[list[tuple[Item, Answer]], list[Item]], Future[None]],
        turn: Turn | None = None,
    ) -> Outcome[Item, Answer]:
        """``post`` each item in turn on this thread until the batch is handed over:
        ``take_over(done, rest)`` is then called (on the lookout's thread, or on this one between
        two POSTs) with the answered POSTs and the ones not begun, and returns a future that
        finishes once it has recorded them all; the batch's ``turn`` is left then."""
        started = time.monotonic()
        batch: _Batch[Item, Answer] = _Batch(deque(items), take_over, started, turn)
        with self._cond:
            self._batches.add(batch)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="inbots-lookout", daemon=True
                )
                self._thread.start()
            elif len(self._batches) == 1:
                self._cond.notify()
        try:
            while True:
                with self._cond:
                    late = time.monotonic() - started >= self.limit
                    if batch.handed is None and batch.waiting and late:
                        self._hand_over(batch)
                    if batch.handed is not None or not batch.waiting:
                        break
                    item = batch.waiting.popleft()
                    batch.posting_since = time.monotonic()
                answer = post(item)
                with self._cond:
                    batch.posting_since = None
                    if batch.handed is not None:  # handed over while this POST was under way
                        return Outcome([], (item, answer), batch.handed)
                    batch.done.append((item, answer))
        finally:
            with self._cond:
                self._batches.discard(batch)
        return Outcome(batch.done, None, batch.handed)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _watch(self) -> None:
        with self._cond:
            while not self._closed:
                if not self._batches:
                    self._cond.wait()
                    continue
                self._cond.wait(self.every)
                now = time.monotonic()
                for batch in self._batches:
                    if batch.handed is None and self._slow(batch, now):
                        self._hand_over(batch)

    def _slow(self, batch: _Batch[Any, Any], now: float) -> bool:
        """A POST is under way and has gone unanswered too long, or the batch has."""
        since = batch.posting_since
        return since is not None and (
            now - since >= self.post_limit or now - batch.started >= self.limit
        )

    @staticmethod
    def _hand_over(batch: _Batch[Any, Any]) -> None:
        done, rest = batch.done, list(batch.waiting)
        batch.done, batch.waiting = [], deque()
        try:
            batch.handed = batch.take_over(done, rest)
        except BaseException as exc:  # the caller raises it; the lookout goes on
            failed: Future[None] = Future()
            failed.set_exception(exc)
            batch.handed = failed
        if batch.turn is not None:
            batch.turn.leave()
