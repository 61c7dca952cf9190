"""Shared fixtures. The database is a test parameter: every test that takes ``db_url`` (directly or
through ``settings``/``server``/``api``) runs once on SQLite and once on PostgreSQL.

PostgreSQL is the server on 127.0.0.1:5432 (``INBOTS_TEST_POSTGRES_URL`` to change it). Without
``CI=true`` a missing server skips those runs; with ``CI=true`` it fails them.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx._transports.default as httpx_transports
import pytest
import uvicorn
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.pool import StaticPool

from inbots.app import create_app
from inbots.config import Settings, load_settings
from inbots.db.engine import Database
from inbots.db.migrate import upgrade
from inbots.db.uow import unit_of_work
from inbots.dispatch.effects import Dispatch
from inbots.dispatch.jobs import Publisher
from inbots.dispatch.local import LocalDispatcher
from inbots.models import Base
from inbots.web.protocol import protocol_for
from inbots.workspaces.service import create_workspace
from tests.helpers import TLS, Api

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


def _share_default_tls() -> None:
    """One TLS context per default configuration for every httpx client this process makes.
    httpx builds a context per client (``httpx.get`` too), parsing certifi's whole CA bundle:
    about 30 ms of CPU each, some 90 s over the suite. The context is the same each time (same
    roots, same options) and nothing changes it after it is made, so sharing it changes no
    behaviour; the product shares one per process the same way (``inbots.client``, webhooks)."""
    build = httpx_transports.create_ssl_context
    made: dict[bool, ssl.SSLContext] = {}

    def create_ssl_context(
        verify: ssl.SSLContext | str | bool = True, cert: Any = None, trust_env: bool = True
    ) -> ssl.SSLContext:
        if verify is not True or cert is not None:
            return build(verify=verify, cert=cert, trust_env=trust_env)
        if trust_env not in made:
            made[trust_env] = build(verify=verify, cert=cert, trust_env=trust_env)
        return made[trust_env]

    httpx_transports.create_ssl_context = create_ssl_context  # type: ignore[assignment]


_share_default_tls()


# Handed out first: the modules with the longest tests (real processes, long scenarios) and the
# two xdist groups (each runs on one worker from start to end). Handed out in file order, they
# came last and left the other workers idle at the end of a run, waiting on one long test.
LONG_FIRST = (
    "test_production_shape",
    "test_dashboard",
    "test_concurrency",
    "test_protocol",
    "test_celery_worker",
    "test_faults",
    "test_caps",
    "test_settings",
    "test_observability",
    "test_mcp_http",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).stem, len(rank)))  # stable


def _pg_available() -> str | None:
    try:
        engine = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
        return None
    except Exception as exc:
        return f"PostgreSQL not reachable at {PG_ADMIN_URL}: {type(exc).__name__}"


WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
"""This process's xdist worker id (``gw0``, ``gw1``, …; ``main`` without xdist): in the names of
what workers must not share (the PostgreSQL database, Redis db numbers)."""


def worker_index() -> int:
    """0 for ``main`` and ``gw0``, 1 for ``gw1``, …"""
    return int(WORKER[2:]) if WORKER.startswith("gw") and WORKER[2:].isdigit() else 0


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """This worker's throwaway database on the shared PostgreSQL server, migrated once per
    session; its name carries the xdist worker id."""
    problem = _pg_available()
    if problem:
        if IN_CI:
            pytest.fail(problem + " (CI=true: PostgreSQL tests must run)")
        pytest.skip(problem)
    name = f"inbots_test_{WORKER}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    upgrade(load_settings(database_url=url))
    yield url
    _stop_shared_servers()  # their pools hold connections to it
    _dispose_databases()
    if url in _EMPTIERS:
        _EMPTIERS.pop(url).dispose()
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def sqlite_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """This worker's SQLite file, migrated once per session (emptied before each test)."""
    path = tmp_path_factory.mktemp("sqlite") / "inbots.db"
    url = f"sqlite:///{path}"
    upgrade(load_settings(database_url=url))
    yield url
    _stop_shared_servers()
    _dispose_databases()
    if url in _EMPTIERS:
        _EMPTIERS.pop(url).dispose()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file to copy (for a module that wants a database of its own)."""
    path = tmp_path_factory.mktemp("template") / "inbots.db"
    upgrade(load_settings(database_url=f"sqlite:///{path}"))
    return path


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


_EMPTIERS: dict[str, Engine] = {}


def _emptying_order() -> list[str]:
    """Every model's table, children before parents (so each DELETE breaks no foreign key)."""
    return [table.name for table in reversed(Base.metadata.sorted_tables)]


def _empty(url: str) -> None:
    """Every row gone, as after a fresh migration. DELETE, children first, in one transaction:
    on tables of a few rows it is many times faster than TRUNCATE (which makes new files)."""
    engine = _EMPTIERS.get(url)
    if engine is None:
        engine = _EMPTIERS[url] = create_engine(url, poolclass=StaticPool)
    for attempt in range(5):
        try:
            with engine.begin() as conn:
                for table in _emptying_order():
                    conn.execute(text(f"DELETE FROM {table}"))
            return
        except (IntegrityError, OperationalError):
            # A job of a server stopped after the last test may still be writing its attempt
            # (its thread outlives the server by up to a webhook timeout): empty again.
            if attempt == 4:
                raise
            time.sleep(0.2)


@pytest.fixture
def db_url(backend: str, request: pytest.FixtureRequest) -> str:
    """A migrated, empty database of the parametrised backend: this worker's one database of
    that backend, emptied for this test (so a server shared between tests can keep its pool)."""
    name = "sqlite_database" if backend == "sqlite" else "pg_database"
    url = str(request.getfixturevalue(name))
    _empty(url)
    return url


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    """Override in a test module (or with ``@pytest.mark.parametrize``) to change settings."""
    return {}


_SETTINGS: dict[tuple[str, str, str], Settings] = {}


def _loaded(values: dict[str, object]) -> Settings:
    """``load_settings(**values)``, made once per values, environment and working directory
    (what it reads): nothing changes settings once they are made, and reading the environment
    and ``.env`` for every test cost more CPU than the emptying of its database."""
    environment = repr(sorted((k, v) for k, v in os.environ.items() if k.startswith("INBOTS_")))
    key = (repr(sorted(values.items())), environment, os.getcwd())
    if key not in _SETTINGS:
        _SETTINGS[key] = load_settings(**values)
    return _SETTINGS[key]


@pytest.fixture
def settings(db_url: str, settings_overrides: dict[str, object]) -> Settings:
    base: dict[str, object] = {
        "database_url": db_url,
        "webhook_allow_private": True,
        "last_seen_resolution_seconds": 5.0,  # the default: activity written at most every 5 s
        # The send rate limit (120 a minute, bursts of 30) is off in tests unless a test turns
        # it on (tests/test_caps.py): many scenarios send more than a burst from one agent.
        "rate_limit_per_minute": 0,
    }
    return _loaded({**base, **settings_overrides})


_DATABASES: dict[str, Database] = {}
DATABASES_KEPT = 4


@pytest.fixture
def database(settings: Settings) -> Iterator[Database]:
    """A :class:`Database` for these settings, kept for this worker's later tests with equal
    settings (its database is emptied between them): an engine and its first connections cost
    more CPU than most tests. One that a test left a connection checked out of is dropped."""
    key = settings.model_dump_json()
    db = _DATABASES.pop(key, None) or Database(settings)
    yield db
    if db.engine.pool.checkedout():  # type: ignore[attr-defined]
        db.dispose()
    else:
        _DATABASES[key] = db
        while len(_DATABASES) > DATABASES_KEPT:  # settings of a test's own (paths) are many
            _DATABASES.pop(next(iter(_DATABASES))).dispose()


def _dispose_databases() -> None:
    while _DATABASES:
        _DATABASES.popitem()[1].dispose()


# Ports for the servers and receivers tests start: a block of its own for each xdist worker,
# below the kernel's ephemeral range (32768-60999 on Linux). A port the kernel hands out for
# port 0 is also what it hands any outgoing connection, so under load another test's server or a
# client socket could take it between this check and the bind; in a block of its own, the only
# taker is this worker, which runs one test at a time.
_PORT_BLOCK = 2_500
_PORT_BASE = 10_000 + _PORT_BLOCK * int(
    os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0
)
_next_port = iter(range(_PORT_BASE, _PORT_BASE + _PORT_BLOCK))
_port_lock = threading.Lock()


def free_port() -> int:
    """A loopback port nobody listens on now, from this worker's block (cycling through it)."""
    with _port_lock:
        for _ in range(_PORT_BLOCK):
            global _next_port
            port = next(_next_port, None)
            if port is None:
                _next_port = iter(range(_PORT_BASE, _PORT_BASE + _PORT_BLOCK))
                continue
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
    with socket.socket() as s:  # the whole block busy: let the kernel choose
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


class SharedServer:
    """A :class:`ServerThread` that several tests of one worker use in turn, one at a time.

    Only the embedded default is shared (a server with a broker always starts fresh). Between
    tests the database is emptied (``db_url``) and the server must hold nothing of the last test
    in memory: no job published, queued, timed or running in its local dispatcher, and no
    long-poll listening. A test that left any of that behind retires the server, and the next
    test gets a fresh one. While no test uses it its renotify sweep stands still (so it never
    sweeps under a test that did not ask for a server); a test that takes it starts with one
    sweep, as a fresh server's first sweep runs within a second of its start.
    """

    def __init__(self, settings: Settings) -> None:
        self.database = Database(settings)
        self.running = ServerThread(settings, self.database)
        dispatch = self.running.app.state.dispatch
        self.local = dispatch.publisher
        assert isinstance(self.local, LocalDispatcher), "only the embedded default is shared"
        self.activity = 0  # jobs published, scheduled or run since the server started
        self._gate = threading.Lock()
        self._paused = False
        self._wrap(dispatch)
        self.running.__enter__()

    def _wrap(self, dispatch: Dispatch) -> None:
        local = self.local
        publish, local_publish, later = dispatch.publish, local.publish, local.later
        run_jobs, sweep_once = local._run_jobs, local._sweep_once

        def count(fn: Callable[..., Any]) -> Callable[..., Any]:
            def counted(*args: Any, **kwargs: Any) -> Any:
                self.activity += 1
                return fn(*args, **kwargs)

            return counted

        def gated_sweep(publisher: Publisher) -> object:
            with self._gate:
                return None if self._paused else sweep_once(publisher)

        dispatch.publish = count(publish)  # type: ignore[method-assign]
        local.publish = count(local_publish)  # type: ignore[method-assign]
        local.later = count(later)  # type: ignore[method-assign]
        local._run_jobs = count(run_jobs)
        local._sweep_once = gated_sweep
        self._sweep_now = lambda: gated_sweep(local)

    def take(self) -> ServerThread:
        with self._gate:
            self._paused = False
        # The database was just emptied: one sweep now, as a fresh server's first one (which
        # runs within a second of its start) writes the heartbeat row.
        self.local._sweeper.submit(self._sweep_now)
        self._taken_at = self.activity
        return self.running

    def give_back(self) -> bool:
        """Pause it for the next test; False when it holds something of this test."""
        with self._gate:
            self._paused = True
        idle = (
            self.activity == self._taken_at
            and self.running.thread.is_alive()
            and self.running.app.state.dispatch.wakeups.listening() == 0
            and all(fn == self.local._sweep for _, _, fn in self.local._timers)
        )
        return idle

    def stop(self) -> None:
        self.running.__exit__()
        self.database.dispose()


_SHARED: dict[str, SharedServer] = {}
SHARED_SERVERS_KEPT = 4  # per worker; the least recently used one stops first


def _stop_shared_servers() -> None:
    while _SHARED:
        _SHARED.pop(next(iter(_SHARED))).stop()


@pytest.fixture
def alone() -> None:
    """Stops this worker's idle shared servers first, for a test that compares the process-wide
    event counters before and after: every live server's sweep adds to them (an earlier test's
    mail stalling or failing late), and under load that lands inside the test's window. Ask for
    it before ``api``, which then starts (or takes) the test's own server."""
    _stop_shared_servers()


def _shareable(settings: Settings, request: pytest.FixtureRequest) -> bool:
    return settings.embedded and request.node.get_closest_marker("fresh_server") is None


@pytest.fixture
def server(
    settings: Settings, database: Database, request: pytest.FixtureRequest
) -> Iterator[ServerThread]:
    """A real uvicorn server for this test's settings. Tests of one worker with equal settings
    share one (see :class:`SharedServer`); ``@pytest.mark.fresh_server`` asks for one of the
    test's own, started on the test's ``database`` and stopped after it."""
    if not _shareable(settings, request):
        with ServerThread(settings, database) as running:
            yield running
        return
    key = settings.model_dump_json()
    shared = _SHARED.pop(key, None)
    if shared is None:
        shared = SharedServer(settings)
        while len(_SHARED) >= SHARED_SERVERS_KEPT:
            _SHARED.pop(next(iter(_SHARED))).stop()
    try:
        yield shared.take()
    finally:
        if shared.give_back():
            _SHARED[key] = shared  # the most recently used last
        else:
            shared.stop()


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
    with httpx.Client(timeout=30, verify=TLS) as client:
        yield client
