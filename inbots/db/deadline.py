"""A client-side deadline on every call to PostgreSQL, for a server that stops answering.

The server's ``statement_timeout`` cancels a statement that runs too long, and TCP keepalives
and ``tcp_user_timeout`` end a connection whose peer is gone. Neither helps when the server is
frozen (its processes stopped, on the same host or a VM paused): its kernel still acknowledges
the bytes and answers the keepalive probes, and the stopped server enforces no timeout of its
own, so psycopg would wait for an answer for as long as the freeze lasts.

So each engine's :class:`Watchdog` times every call that waits for the server — a statement (or a
batch of them), a commit, a rollback — against ``INBOTS_DB_STATEMENT_TIMEOUT_SECONDS`` plus
:data:`MARGIN_SECONDS` (the margin lets the server's own timeout answer first whenever the server
can). A call past that bound has its connection's socket shut down: psycopg's wait wakes up, the
call fails with :class:`DeadlineExceeded`, SQLAlchemy discards the connection, and the unit of
work answers ``503`` as for any other outage (:mod:`inbots.db.outage`). A statement timeout of 0
(the migrations) means no watchdog at all.

Cost per call: one ``monotonic()``, a lock taken twice and a dict entry set and popped. One
daemon thread per engine sleeps until the earliest deadline, and ends once nothing has been
pending for a whole bound; the next call starts it again.
"""

from __future__ import annotations

import contextlib
import math
import operator
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from sqlalchemy import Engine

MARGIN_SECONDS = 3.0
"""How long past the statement timeout a call may wait before its connection is dropped."""

T = TypeVar("T")
_CUT = math.inf  # the entry of a call whose connection was dropped, until the call returns
_WATCHDOGS: weakref.WeakSet[Watchdog] = weakref.WeakSet()
_monotonic = time.monotonic
_cursor_connection = operator.attrgetter("connection")  # a psycopg cursor's connection


def _pooled_connection(connection: Any) -> Any:
    # SQLAlchemy's pooled proxy (``do_commit``, ``do_rollback``), or at first connect the psycopg
    # connection itself.
    return getattr(connection, "dbapi_connection", connection)


def _itself(conn: Any) -> Any:
    return conn


class DeadlineExceeded(psycopg.OperationalError):
    """The server did not answer a call within the watchdog's bound; its connection was
    dropped. A psycopg error, so SQLAlchemy wraps it (``OperationalError``, the connection
    invalidated) as it does any lost connection."""


def bound_seconds(statement_timeout_seconds: float) -> float | None:
    """The watchdog's bound for a statement timeout, ``None`` (no watchdog) for 0."""
    if statement_timeout_seconds <= 0:
        return None
    return statement_timeout_seconds + MARGIN_SECONDS


class Watchdog:
    """Drops the connection of a call to PostgreSQL that has waited longer than ``limit``
    seconds. :meth:`install` bounds all of an engine's calls, :meth:`call` one call."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self._reset()
        _WATCHDOGS.add(self)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[Any, float] = {}  # psycopg connection -> its call's deadline
        self._thread: threading.Thread | None = None

    def call(self, conn: Any, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, a call that waits on the psycopg connection ``conn``, bounded."""
        return self.bounded(lambda _conn: fn(*args), _itself)(conn)

    def install(self, engine: Engine) -> None:
        """Time every call of ``engine``'s dialect that waits for the server: the statements
        (``do_execute``, ``do_execute_no_params``, ``do_executemany``), ``do_commit`` and
        ``do_rollback`` (the pool's reset on return too: the pool calls the same dialect).

        The dialect's methods are wrapped rather than hooked with events, because a ``try``
        around the call is the only exact bracket: the ``commit`` and ``rollback`` events fire
        before the call and none after, and the pool's reset fires neither."""
        dialect = engine.dialect
        for name in ("do_execute", "do_execute_no_params", "do_executemany"):
            setattr(dialect, name, self.bounded(getattr(dialect, name), _cursor_connection))
        for name in ("do_commit", "do_rollback"):
            setattr(dialect, name, self.bounded(getattr(dialect, name), _pooled_connection))

    def bounded(
        self, method: Callable[..., T], connection_of: Callable[[Any], Any]
    ) -> Callable[..., T]:
        """``method`` bounded; its first argument is a cursor or connection, and
        ``connection_of`` that argument's psycopg connection. The hot path: a send makes a few
        such calls, so it is kept to a clock reading, two short holds of the lock and a dict
        entry set and popped (about a microsecond)."""

        def bounded(target: Any, *args: Any) -> T:
            conn = connection_of(target)
            deadline = _monotonic() + self.limit
            with self._lock:
                self._calls[conn] = deadline
                if self._thread is None:
                    self._start()
            try:
                result = method(target, *args)
            except BaseException as error:
                with self._lock:
                    cut = self._calls.pop(conn, None) == _CUT
                if cut and isinstance(error, psycopg.Error):
                    raise DeadlineExceeded(
                        f"the database did not answer within {self.limit:g} s; the connection "
                        "was dropped"
                    ) from error
                raise
            with self._lock:
                # Answered just as it was cut: the answer stands; the connection fails on its
                # next use, or the pool's checkout check drops it first.
                self._calls.pop(conn, None)
            return result

        return bounded

    def _start(self) -> None:  # with the lock held
        self._thread = threading.Thread(target=self._watch, name="inbots-db-deadline", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        idle = False
        while True:
            with self._lock:
                now = time.monotonic()
                due = [conn for conn, deadline in self._calls.items() if deadline <= now]
                sockets = []
                for conn in due:
                    self._calls[conn] = _CUT
                    sockets.append(_own_socket(conn))
                nearest = min(self._calls.values(), default=_CUT)
                if nearest != _CUT:
                    idle = False
                elif not idle:  # nothing pending: look again once more before ending
                    idle, nearest = True, now + self.limit
                else:  # nothing pending twice in a row: the next call starts a new thread
                    self._thread = None
            for sock in sockets:
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)  # the socket itself, for every descriptor
                    sock.close()  # only our duplicate
            if nearest == _CUT:
                return
            # Every call armed from now on has a later deadline than ``nearest``.
            time.sleep(max(nearest - time.monotonic(), 0.005))


def _own_socket(conn: Any) -> socket.socket | None:
    """A socket object of our own on ``conn``'s connection (a duplicate of its descriptor), to
    shut down without closing psycopg's descriptor; ``None`` if the connection is already gone.

    Called while the call is still pending, so psycopg has not closed the connection; libpq
    drops the socket only once it has seen the connection break, and then answers -1 for it,
    which the second reading below catches."""
    try:
        fd = conn.pgconn.socket
        duplicate = os.dup(fd)
    except (OSError, psycopg.Error, AttributeError):
        return None
    try:
        if conn.pgconn.socket != fd:
            raise OSError("the connection's socket changed")
        return socket.socket(fileno=duplicate)
    except (OSError, psycopg.Error):
        os.close(duplicate)
        return None


def _forget_threads() -> None:
    # A forked child has none of its parent's threads: each watchdog starts afresh there.
    for watchdog in list(_WATCHDOGS):
        watchdog._reset()


os.register_at_fork(after_in_child=_forget_threads)
