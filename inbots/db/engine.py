"""Engines for SQLite (embedded default) and PostgreSQL (production).

SQLite runs in WAL mode with a busy timeout, and write transactions begin ``IMMEDIATE`` so two
writers queue instead of failing half-way with "database is locked". Read-only units of work
begin deferred and run alongside a writer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from inbots.config import Settings


def normalize_url(url: str) -> str:
    """Accept ``postgres://`` and ``postgresql://`` and use psycopg 3 for both."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url.removeprefix("postgres://")
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return url


def create_db_engine(settings: Settings) -> Engine:
    url = make_url(normalize_url(settings.database_url))
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url.render_as_string(hide_password=False), settings)
    if url.get_backend_name() != "postgresql":
        raise ValueError(
            f"unsupported database {url.get_backend_name()!r}: use sqlite or postgresql"
        )
    return create_engine(
        url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_pool_size,
        pool_pre_ping=True,
        pool_timeout=30,
    )


def _sqlite_engine(url: str, settings: Settings) -> Engine:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": settings.sqlite_busy_timeout_seconds},
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_pool_size,
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
        from inbots.db.base import import_models

        import_models()  # every table known, whichever entry point (API, worker, CLI) we are in
        self.settings = settings
        self.engine = create_db_engine(settings)
        self.dialect = self.engine.dialect.name
        self._write = sessionmaker(self.engine, expire_on_commit=False, autoflush=False)
        self._read = sessionmaker(
            self.engine.execution_options(inbots_readonly=True),
            expire_on_commit=False,
            autoflush=False,
        )

    def session(self, *, readonly: bool = False) -> Session:
        return (self._read if readonly else self._write)()

    def dispose(self) -> None:
        self.engine.dispose()
