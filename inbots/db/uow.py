"""The unit of work: one transaction per request, tool call, command or task.

Services ``flush()``, never ``commit()``. Work that must only happen once the data is durable
(publishing a notify task, waking a long-poll) is registered with :meth:`UnitOfWork.after_commit`
and runs after the commit; on rollback it is dropped.

A database that cannot answer (down, hung, locked past its timeout) leaves a unit of work as
:class:`~inbots.errors.ServiceUnavailable`, whichever edge opened it, so every adapter renders
the same 503 (see :mod:`inbots.db.outage`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from inbots.config import Settings
from inbots.db.engine import Database
from inbots.db.outage import outage
from inbots.errors import ServiceUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")


class UnitOfWork:
    def __init__(self, session: Session, settings: Settings, hooks: Any = None) -> None:
        self.session = session
        self.settings = settings
        self.hooks = hooks  # the app's Hooks (wake-ups, publishing); None in bare scripts
        self._after_commit: list[Callable[[], None]] = []

    def after_commit(self, fn: Callable[[], None]) -> None:
        self._after_commit.append(fn)

    def _run_after_commit(self) -> None:
        for fn in self._after_commit:
            try:
                fn()
            except Exception:  # the data is committed; a failed follow-up must not undo the answer
                log.exception("after-commit job failed")
        self._after_commit.clear()


@contextmanager
def unit_of_work(
    db: Database, hooks: Any = None, *, readonly: bool = False, deferred: bool = False
) -> Iterator[UnitOfWork]:
    """One transaction. ``readonly`` rolls back at the end; ``deferred`` (SQLite) begins without
    the write lock and takes it only if the work writes (see :func:`run_unit`)."""
    session = db.session(readonly=readonly or deferred)
    uow = UnitOfWork(session, db.settings, hooks)
    try:
        yield uow
        if readonly:
            session.rollback()
        else:
            session.commit()
    except BaseException as exc:
        session.rollback()
        unavailable = outage(exc, db.settings)
        if unavailable is None:
            raise
        if not deferred:  # a deferred unit that lost SQLite's write lock is simply run again
            cause = getattr(exc, "orig", None) or exc
            log.warning("database unavailable: %s", type(cause).__name__)
        raise unavailable from exc
    finally:
        session.close()
    uow._run_after_commit()


def _lost_sqlite_race(exc: ServiceUnavailable) -> bool:
    cause = exc.__cause__
    text = str(getattr(cause, "orig", None) or cause).lower()
    return "locked" in text or "busy" in text


def run_unit(
    db: Database,
    hooks: Any,
    fn: Callable[..., T],
    *args: Any,
    readonly: bool = False,
    mostly_reads: bool = False,
    **kwargs: Any,
) -> T:
    """Run ``fn(uow, *args, **kwargs)`` in one unit of work.

    ``mostly_reads`` is for calls that usually only read but sometimes stamp (an inbox listing):
    on SQLite they begin deferred, so concurrent readers do not queue for the write lock, and if a
    write then loses the race for it (SQLITE_BUSY), the whole unit reruns as a writer.
    """
    optimistic = mostly_reads and db.dialect == "sqlite" and not readonly
    if optimistic:
        try:
            with unit_of_work(db, hooks, deferred=True) as uow:
                return fn(uow, *args, **kwargs)
        except ServiceUnavailable as exc:
            if not _lost_sqlite_race(exc):
                raise
    with unit_of_work(db, hooks, readonly=readonly) as uow:
        return fn(uow, *args, **kwargs)
