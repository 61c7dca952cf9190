"""Engines for SQLite (embedded default) and PostgreSQL (production).

SQLite runs in WAL mode with a busy timeout, and write transactions begin ``IMMEDIATE`` so two
writers queue instead of failing half-way with "database is locked". Read-only units of work
begin deferred and run alongside a writer.

Nothing waits on the database without a bound: connecting (``INBOTS_DB_CONNECT_TIMEOUT_SECONDS``;
without it psycopg waits 130 s for a server that accepts and never answers), each statement on
PostgreSQL (``INBOTS_DB_STATEMENT_TIMEOUT_SECONDS``, enforced by the server, lock waits included;
SQLite has its busy timeout), each call to a PostgreSQL server that stopped answering (the same
timeout plus a margin, enforced here: :mod:`inbots.db.deadline`) and a connection from the pool
(``INBOTS_DB_POOL_TIMEOUT_SECONDS``). What runs past one of them becomes ``ServiceUnavailable`` in
the unit of work (:mod:`inbots.db.outage`). TCP keepalives and ``tcp_user_timeout`` end a
connection whose server or network is gone.
"""

from __future__ import annotations

import math
import select
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.orm import Session, sessionmaker

from inbots.config import Settings
from inbots.db.deadline import Watchdog, bound_seconds


def normalize_url(url: str) -> str:
    """Accept ``postgres://`` and ``postgresql://`` and use psycopg 3 for both."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url.removeprefix("postgres://")
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return url


def upsert_for(db: Session | Connection) -> Any:
    """The ``insert`` of the dialect ``db`` runs on (PostgreSQL's or SQLite's), for an INSERT …
    ON CONFLICT DO UPDATE: ``upsert_for(session)(Model).values(…).on_conflict_do_update(…)``."""
    dialect = db.get_bind().dialect.name if isinstance(db, Session) else db.dialect.name
    return postgresql.insert if dialect == "postgresql" else sqlite.insert


def create_db_engine(settings: Settings) -> Engine:
    url = make_url(normalize_url(settings.database_url))
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url.render_as_string(hide_password=False), settings)
    if url.get_backend_name() != "postgresql":
        raise ValueError(
            f"unsupported database {url.get_backend_name()!r}: use sqlite or postgresql"
        )
    engine = create_engine(
        url,
        connect_args=postgres_connect_args(url, settings),
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_pool_size,
        pool_timeout=settings.db_pool_timeout_seconds,
    )
    watchdog = None
    limit = bound_seconds(settings.db_statement_timeout_seconds)
    if limit is not None:  # a statement timeout of 0 (the migrations): no bound here either
        watchdog = Watchdog(limit)
        watchdog.install(engine)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        _utc_session(dbapi_connection)

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        _ping_if_the_server_spoke(dbapi_connection, watchdog)

    return engine


def _ping_if_the_server_spoke(dbapi_connection: Any, watchdog: Watchdog | None = None) -> None:
    """The pool's liveness check, without a round trip when there is nothing to suspect.

    An idle pooled connection has nothing to read: every answer to it was read before it went
    back to the pool. When the server ends it (a restart, ``pg_terminate_backend``, an idle
    timeout) it sends its farewell and closes the socket, which then reads as ready. So only a
    connection that psycopg already knows is broken, or whose socket has something to read, is
    pinged (``SELECT 1``), and one that fails the ping is replaced: ``DisconnectionError`` makes
    the pool discard it and check out another. This is ``pool_pre_ping`` for the failures a ping
    can see, minus its round trip on every checkout (a second on each request that also
    resolves its caller)."""
    if dbapi_connection.closed or dbapi_connection.broken:
        raise exc.DisconnectionError("the database connection was closed")
    try:
        readable, _, _ = select.select([dbapi_connection.fileno()], [], [], 0)
    except (OSError, ValueError) as error:
        raise exc.DisconnectionError("the database connection's socket is gone") from error
    if not readable:
        return
    before = dbapi_connection.autocommit
    try:
        dbapi_connection.autocommit = True
        if watchdog is None:
            dbapi_connection.execute("SELECT 1")
        else:
            watchdog.call(dbapi_connection, dbapi_connection.execute, "SELECT 1")
        dbapi_connection.autocommit = before
    except Exception as error:  # any failure of the ping: the connection is not usable
        raise exc.DisconnectionError("the database connection failed its ping") from error


# A connection whose server or network is gone ends within 25 s, idle or waiting: an idle one (no
# byte unacknowledged) is probed after 10 s of silence, then every 5 s, and dropped once probes
# have gone unanswered for 25 s (``tcp_user_timeout``; where the system has no such option, after
# 3 unanswered probes: 10 + 3 x 5 s); bytes sent and not acknowledged for 25 s end it too. An
# idle pooled connection that died so reads as ready, and the pool's checkout check drops it.
TCP_KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 25_000,  # milliseconds
}


def postgres_connect_args(url: URL, settings: Settings) -> dict[str, Any]:
    """libpq's ``connect_timeout`` (whole seconds), TCP keepalives and ``tcp_user_timeout``
    (:data:`TCP_KEEPALIVES`; one given in the URL wins) and the session's ``TimeZone`` (UTC)
    and ``statement_timeout``, set in the startup packet (``options``), so they hold from the
    first statement on. Options already in the URL are kept (ours come after them)."""
    args: dict[str, Any] = {"connect_timeout": math.ceil(settings.db_connect_timeout_seconds)}
    args.update({key: n for key, n in TCP_KEEPALIVES.items() if key not in url.query})
    given = url.query.get("options")
    options = [given] if isinstance(given, str) else list(given or ())
    options.append(f"-c TimeZone={SESSION_TIME_ZONE}")
    statement_ms = round(settings.db_statement_timeout_seconds * 1000)
    if statement_ms > 0:
        options.append(f"-c statement_timeout={statement_ms}")
    args["options"] = " ".join(options)
    return args


# Every session's time zone, so that psycopg hands back each timestamptz already in UTC
# (``datetime.UTC``) and UTCDateTime needs no conversion per value on PostgreSQL.
SESSION_TIME_ZONE = "UTC"


def _utc_session(dbapi_connection: Any) -> None:
    """A new connection whose time zone is not UTC (the startup packet's ``options`` were
    dropped on the way, as some poolers do) is set to UTC before its first use."""
    if dbapi_connection.info.parameter_status("TimeZone") == SESSION_TIME_ZONE:
        return
    before = dbapi_connection.autocommit
    dbapi_connection.autocommit = True
    dbapi_connection.execute(f"SET TIME ZONE '{SESSION_TIME_ZONE}'")
    dbapi_connection.autocommit = before


def _sqlite_engine(url: str, settings: Settings) -> Engine:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": settings.sqlite_busy_timeout_seconds},
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_pool_size,
        pool_timeout=settings.db_pool_timeout_seconds,
    )
    busy_ms = int(settings.sqlite_busy_timeout_seconds * 1000)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves, below
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = "DEFERRED" if conn.get_execution_options().get("inbots_readonly") else "IMMEDIATE"
        conn.exec_driver_sql(f"BEGIN {mode}")

    return engine


class Database:
    """An engine and the two session factories the unit of work uses."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine = create_db_engine(settings)
        self.dialect = self.engine.dialect.name
        self._write = sessionmaker(self.engine, expire_on_commit=False, autoflush=False)
        reader = self.engine.execution_options(inbots_readonly=True)
        stamper = self.engine
        if self.dialect == "postgresql":
            # A read-only unit, and a unit that mostly reads and at most stamps (each stamp one
            # idempotent UPDATE), run their statements in autocommit: under READ COMMITTED each
            # statement sees a snapshot of its own either way, and the BEGIN and COMMIT (or
            # ROLLBACK) round trips are saved: a caller lookup is one statement on the wire, an
            # inbox page two.
            reader = reader.execution_options(isolation_level="AUTOCOMMIT")
            stamper = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        self._read = sessionmaker(reader, expire_on_commit=False, autoflush=False)
        self._stamp = sessionmaker(stamper, expire_on_commit=False, autoflush=False)

    def session(self, *, readonly: bool = False, stamps: bool = False) -> Session:
        """A session for a unit that reads (``readonly``), mostly reads and at most stamps
        (``stamps``; PostgreSQL: in autocommit), or writes."""
        if readonly:
            return self._read()
        return (self._stamp if stamps else self._write)()

    def dispose(self) -> None:
        self.engine.dispose()
