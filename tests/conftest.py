"""Shared fixtures. The database is a test parameter: every test that takes ``db_url`` (directly or
through ``settings``/``server``/``api``) runs once on SQLite and once on PostgreSQL.

PostgreSQL is the server on 127.0.0.1:5432 (``INBOTS_TEST_POSTGRES_URL`` to change it). Without
``CI=true`` a missing server skips those runs; with ``CI=true`` it fails them.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from sqlalchemy import create_engine, text

from inbots.api.app import create_app
from inbots.api.protocol import protocol_for
from inbots.config import Settings, load_settings
from inbots.db.engine import Database
from inbots.db.migrate import upgrade
from inbots.db.uow import unit_of_work
from inbots.workspaces.service import create_workspace
from tests.helpers import Api

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PG_ADMIN_URL = os.environ.get(
    "INBOTS_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
TABLES = (
    "heartbeats",
    "send_buckets",
    "cap_ledger",
    "delivery_attempts",
    "events",
    "deliveries",
    "messages",
    "participants",
    "threads",
    "signin_failures",
    "dashboard_sessions",
    "agent_sessions",
    "agent_keys",
    "enrollments",
    "operator_tokens",
    "agents",
    "workspaces",
)


def _pg_available() -> str | None:
    try:
        engine = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
        return None
    except Exception as exc:
        return f"PostgreSQL not reachable at {PG_ADMIN_URL}: {type(exc).__name__}"


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A throwaway database on the shared PostgreSQL server, migrated once per session."""
    problem = _pg_available()
    if problem:
        if IN_CI:
            pytest.fail(problem + " (CI=true: PostgreSQL tests must run)")
        pytest.skip(problem)
    name = f"inbots_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    upgrade(load_settings(database_url=url))
    yield url
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "inbots.db"
    upgrade(load_settings(database_url=f"sqlite:///{path}"))
    return path


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated, empty database of the parametrised backend."""
    if backend == "sqlite":
        template = request.getfixturevalue("sqlite_template")
        path = tmp_path / "inbots.db"
        shutil.copy(template, path)
        return f"sqlite:///{path}"
    url = request.getfixturevalue("pg_database")
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"))
    engine.dispose()
    return url


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    """Override in a test module (or with ``@pytest.mark.parametrize``) to change settings."""
    return {}


@pytest.fixture
def settings(db_url: str, settings_overrides: dict[str, object]) -> Settings:
    base: dict[str, object] = {
        "database_url": db_url,
        "webhook_allow_private": True,
        "last_seen_resolution_seconds": 0,
        # The send rate limit (120 a minute, bursts of 30) is off in tests unless a test turns
        # it on (tests/test_caps.py): many scenarios send more than a burst from one agent.
        "rate_limit_per_minute": 0,
    }
    return load_settings(**{**base, **settings_overrides})


@pytest.fixture
def database(settings: Settings) -> Iterator[Database]:
    db = Database(settings)
    yield db
    db.dispose()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerThread:
    """A real uvicorn server on a loopback port, in a background thread of the test process."""

    def __init__(self, settings: Settings, db: Database) -> None:
        self.app = create_app(settings, db)
        self.port = free_port()
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
            http=protocol_for(settings),  # as inbots serve runs it: the head capped, refusals JSON
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("test server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def server(settings: Settings, database: Database) -> Iterator[ServerThread]:
    with ServerThread(settings, database) as running:
        yield running


def new_workspace(db: Database, name: str = "test") -> str:
    """A fresh workspace; returns its operator token."""
    with unit_of_work(db) as uow:
        seeded = create_workspace(uow, name)
    assert seeded.minted_token
    return seeded.minted_token


@pytest.fixture
def api(server: ServerThread, database: Database) -> Iterator[Api]:
    """The operator of a fresh workspace, talking to the real server over HTTP."""
    with Api(server.url, new_workspace(database)) as client:
        yield client


@pytest.fixture
def other_api(server: ServerThread, database: Database) -> Iterator[Api]:
    """The operator of a second workspace on the same server."""
    with Api(server.url, new_workspace(database, "other")) as client:
        yield client


@pytest.fixture
def base_url(server: ServerThread) -> str:
    return server.url


@pytest.fixture
def raw() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as client:
        yield client
