"""The unit of work: one transaction per request, tool call, command or task.

Services ``flush()``, never ``commit()``. Work that must only happen once the data is durable
(publishing a notify task, waking a long-poll) is registered with :meth:`UnitOfWork.after_commit`
and runs after the commit; on rollback it is dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.orm import Session

from inbots.config import Settings
from inbots.db.engine import Database

log = logging.getLogger(__name__)


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
    db: Database, hooks: Any = None, *, readonly: bool = False
) -> Iterator[UnitOfWork]:
    session = db.session(readonly=readonly)
    uow = UnitOfWork(session, db.settings, hooks)
    try:
        yield uow
        if readonly:
            session.rollback()
        else:
            session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
    uow._run_after_commit()
