"""When the database cannot answer: which failures are an outage, and the sentence for each.

A connection refused, lost or timed out, a statement cut off by the statement timeout (or, on a
server that stopped answering, by the client-side deadline of :mod:`inbots.db.deadline`), a pool
with no connection free in time, SQLite's write lock held past the busy timeout: the caller did
nothing wrong and should try again shortly. The unit of work turns these into
:class:`~inbots.errors.ServiceUnavailable` (``503 service_unavailable`` with ``Retry-After``);
every other database error (a constraint, a bug) stays what it is.
"""

from __future__ import annotations

import sqlite3

import psycopg.errors
from sqlalchemy import exc as sa

from inbots.config import Settings
from inbots.db.deadline import MARGIN_SECONDS, DeadlineExceeded
from inbots.errors import ServiceUnavailable

AGAIN = "Try again in a few seconds (a send repeated with the same Idempotency-Key is stored once)"
_SQLITE_OUTAGE = ("locked", "busy", "unable to open", "disk i/o")


def outage(exc: BaseException, settings: Settings) -> ServiceUnavailable | None:
    """The 503 that ``exc`` amounts to, or ``None`` when it is not the database being
    unavailable."""
    if isinstance(exc, sa.TimeoutError):  # the pool's checkout timeout
        return ServiceUnavailable(
            "Every database connection of this server stayed busy for "
            f"{settings.db_pool_timeout_seconds:g} s (INBOTS_DB_POOL_TIMEOUT_SECONDS). {AGAIN}; "
            "if it lasts, the operator should look for slow queries or raise "
            "INBOTS_DB_POOL_SIZE."
        )
    if not isinstance(exc, sa.DBAPIError):
        return None
    orig = exc.orig
    if isinstance(orig, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable):
        return ServiceUnavailable(
            "The database did not answer within "
            f"{settings.db_statement_timeout_seconds:g} s (INBOTS_DB_STATEMENT_TIMEOUT_SECONDS). "
            f"{AGAIN}; if it lasts, the operator should look for long-running queries or locks "
            "held in the database."
        )
    if isinstance(orig, DeadlineExceeded):
        return ServiceUnavailable(
            "The database stopped answering: a call got no answer within "
            f"{settings.db_statement_timeout_seconds + MARGIN_SECONDS:g} s "
            f"(INBOTS_DB_STATEMENT_TIMEOUT_SECONDS plus {MARGIN_SECONDS:g} s) and its connection "
            f"was dropped. {AGAIN}; if it lasts, the operator should check the database server "
            "(frozen, overloaded, or the network to it cut)."
        )
    if isinstance(orig, psycopg.errors.ConnectionTimeout):
        return ServiceUnavailable(
            "The database did not accept a connection within "
            f"{settings.db_connect_timeout_seconds:g} s (INBOTS_DB_CONNECT_TIMEOUT_SECONDS). "
            f"{AGAIN}; if it lasts, the operator should check the database server and the "
            "network to it (/readyz shows whether it answers)."
        )
    if isinstance(orig, sqlite3.OperationalError):
        text = str(orig).lower()
        if "locked" in text or "busy" in text:
            return ServiceUnavailable(
                "The database stayed locked by another writer for "
                f"{settings.sqlite_busy_timeout_seconds:g} s "
                f"(INBOTS_SQLITE_BUSY_TIMEOUT_SECONDS). {AGAIN}."
            )
        if not any(word in text for word in _SQLITE_OUTAGE):
            return None  # "no such table" and the like: not an outage
    elif not (
        isinstance(exc, sa.OperationalError | sa.InterfaceError) or exc.connection_invalidated
    ):
        return None
    if getattr(orig, "sqlstate", None) and not exc.connection_invalidated:
        # The server answered with an error of its operation (a deadlock, too many
        # connections, shutting down…): it is there, but cannot do this now.
        return ServiceUnavailable(
            f"The database could not complete the request right now ({type(orig).__name__}). "
            f"{AGAIN}."
        )
    return ServiceUnavailable(
        f"The database cannot be reached. {AGAIN}; if it lasts, the operator should check that "
        "the database is running and that INBOTS_DATABASE_URL points at it (/readyz shows "
        "whether it answers)."
    )
