"""The unit of work: one transaction per request, tool call, command or task.

Services ``flush()``, never ``commit()``. What must only happen once the data is durable is asked
of the unit of work, typed: :meth:`UnitOfWork.enqueue` (a notify job to publish) and
:meth:`UnitOfWork.wake` (long-polls to wake). Both are buffered and handed to the unit's
:class:`~inbots.dispatch.effects.Effects` after the commit succeeds; a rollback drops them, and a
read-only unit never sends any. :meth:`UnitOfWork.after_commit` takes any other follow-up (a
metric, a log line) under the same rule.

A service declares how its unit should run, once, where it is defined: :func:`reads` (read only:
rolled back at the end) or :func:`mostly_reads` (usually reads, sometimes stamps; see
:func:`run_unit`); undecorated means it writes. :func:`run_unit` is the typed runner every edge
uses, so HTTP and MCP cannot disagree about it.

A database that cannot answer (down, hung, locked past its timeout) leaves a unit of work as
:class:`~inbots.errors.ServiceUnavailable`, whichever edge opened it, so every adapter renders
the same 503 (see :mod:`inbots.db.outage`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Concatenate, Literal, ParamSpec, TypeVar

from sqlalchemy.orm import Session

from inbots.config import Settings
from inbots.db.engine import Database
from inbots.db.outage import outage
from inbots.dispatch.effects import Effects
from inbots.dispatch.jobs import Job
from inbots.errors import ServiceUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")
P = ParamSpec("P")
F = TypeVar("F", bound=Callable[..., object])
Mode = Literal["writes", "reads", "mostly_reads"]
_MODE = "__inbots_unit__"


class UnitOfWork:
    """One transaction's session, the settings, and the effects it will send once committed."""

    def __init__(self, session: Session, settings: Settings, effects: Effects | None) -> None:
        self.session = session
        self.settings = settings
        self._effects = effects
        self._jobs: list[Job] = []
        self._woken: set[str] = set()
        self._after_commit: list[Callable[[], None]] = []

    def enqueue(self, *jobs: Job) -> None:
        """Publish these notify jobs after the commit."""
        self._jobs.extend(jobs)

    def wake(self, agent_ids: Iterable[str]) -> None:
        """Wake these agents' long-polls after the commit."""
        self._woken.update(agent_ids)

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` after the commit (observability: a metric, a log line)."""
        self._after_commit.append(fn)

    def _committed(self) -> None:
        # The data is durable: nothing here may undo the answer, so failures are only logged.
        effects, jobs, woken = self._effects, self._jobs, self._woken
        if effects is not None:
            if woken:
                _quietly(effects.wake, woken)
            if jobs:
                _quietly(effects.publish, jobs)
        for fn in self._after_commit:
            _quietly(fn)


def _quietly(fn: Callable[..., object], *args: object) -> None:
    try:
        fn(*args)
    except Exception:
        log.exception("after-commit effect failed")


# A request's sessions handed on (see :func:`one_session`): None outside one.
_HANDED: ContextVar[list[tuple[Database, Session]] | None] = ContextVar(
    "inbots_handed_session", default=None
)


@contextmanager
def one_session() -> Iterator[None]:
    """Within it, a read-only unit opened with ``hand_on`` (a request's caller lookup) leaves
    its session open for the next unit of work of the same database instead of closing it; on
    PostgreSQL, where read-only and stamping units run in autocommit, the next one of those
    runs in it, so a request that looks up its caller and then reads checks out one connection
    instead of two. A writing unit closes it and opens its own; one left unused is closed on
    the way out. Both are on one thread (a worker's, for a sync endpoint)."""
    handed: list[tuple[Database, Session]] = []
    token = _HANDED.set(handed)
    try:
        yield
    finally:
        _HANDED.reset(token)
        for _, session in handed:
            session.close()


def _handed_session(db: Database, shareable: bool) -> Session | None:
    """The session a lookup handed on, if this unit (``shareable``: read-only or stamping, on
    PostgreSQL) can run in it; any other is closed (its connection goes back to the pool)."""
    handed = _HANDED.get()
    if not handed:
        return None
    owner, session = handed.pop()
    if shareable and owner is db:
        return session
    session.close()
    return None


@contextmanager
def unit_of_work(
    db: Database,
    effects: Effects | None = None,
    *,
    readonly: bool = False,
    deferred: bool = False,
    stamps: bool = False,
    hand_on: bool = False,
) -> Iterator[UnitOfWork]:
    """One transaction. ``readonly`` rolls back at the end (and sends no effects); ``deferred``
    (SQLite) begins without the write lock and takes it only if the work writes (see
    :func:`run_unit`); ``stamps`` (PostgreSQL) is a unit that mostly reads and writes at most
    single-statement stamps: it runs in autocommit, each statement its own transaction, as a
    read-only unit does (see :class:`~inbots.db.engine.Database`). ``hand_on`` (a read-only
    unit, PostgreSQL, within :func:`one_session`): its session is left to the next unit."""
    autocommits = db.dialect == "postgresql" and (readonly or stamps)
    session = _handed_session(db, autocommits)
    if session is None:
        session = db.session(readonly=readonly or deferred, stamps=stamps)
    handed = _HANDED.get() if hand_on and readonly and autocommits else None
    uow = UnitOfWork(session, db.settings, effects)
    try:
        yield uow
        if handed is not None:
            # Nothing to end: in autocommit no transaction is open. Objects it loaded stay.
            handed.append((db, session))
        elif readonly:
            session.rollback()
        else:
            session.commit()
    except BaseException as exc:
        handed = None
        session.rollback()
        unavailable = outage(exc, db.settings)
        if unavailable is None:
            raise
        if not deferred:  # a deferred unit that lost SQLite's write lock is simply run again
            cause = getattr(exc, "orig", None) or exc
            log.warning("database unavailable: %s", type(cause).__name__)
        raise unavailable from exc
    finally:
        if handed is None:
            session.close()
    if not readonly:
        uow._committed()


def reads(fn: F) -> F:
    """Mark a service function read-only: its unit of work rolls back at the end."""
    setattr(fn, _MODE, "reads")
    return fn


def mostly_reads(fn: F) -> F:
    """Mark a service function that usually reads but sometimes stamps (an inbox listing): on
    SQLite it begins deferred, so concurrent readers do not queue for the write lock, and if a
    write then loses the race for it (SQLITE_BUSY), the whole unit reruns as a writer. On
    PostgreSQL it runs in autocommit, so such a function may write only stamps, each one
    idempotent statement right on its own (:func:`inbots.deliveries.stamps.stamp`)."""
    setattr(fn, _MODE, "mostly_reads")
    return fn


def mode_of(fn: Callable[..., object]) -> Mode:
    mode: Mode = getattr(fn, _MODE, "writes")
    return mode


def _lost_sqlite_race(exc: ServiceUnavailable) -> bool:
    cause = exc.__cause__
    text = str(getattr(cause, "orig", None) or cause).lower()
    return "locked" in text or "busy" in text


def run_unit(
    db: Database,
    effects: Effects | None,
    fn: Callable[Concatenate[UnitOfWork, P], T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """Run ``fn(uow, *args, **kwargs)`` in one unit of work, in the mode ``fn`` declares
    (:func:`reads`, :func:`mostly_reads`, else a writer)."""
    mode = mode_of(fn)
    if mode == "mostly_reads" and db.dialect == "sqlite":
        try:
            with unit_of_work(db, effects, deferred=True) as uow:
                return fn(uow, *args, **kwargs)
        except ServiceUnavailable as exc:
            if not _lost_sqlite_race(exc):
                raise
    with unit_of_work(db, effects, readonly=mode == "reads", stamps=mode == "mostly_reads") as uow:
        return fn(uow, *args, **kwargs)
