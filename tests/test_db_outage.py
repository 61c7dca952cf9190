"""A database that hangs, holds a lock or is down. Every route answers ``503 service_unavailable``
in the error envelope, with ``Retry-After``, within the timeout its setting gives — never a hang,
a ``500`` or a reset connection — and a long-poll that waits holds no database connection.

The misbehaving PostgreSQL is :class:`tests.dbproxy.DatabaseProxy` on a loopback port of its own
(or a closed port); the shared server is never stopped.
"""

from __future__ import annotations

import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from inbots.config import Settings, load_settings
from inbots.db.engine import Database
from tests.conftest import _EMPTIERS, PG_ADMIN_URL, ServerThread, free_port, new_workspace
from tests.dbproxy import DatabaseProxy
from tests.helpers import Api, metric_samples, sample
from tests.mcp_client import INITIALIZE

_admin = make_url(PG_ADMIN_URL)
PG_TARGET = (_admin.host or "127.0.0.1", _admin.port or 5432)
AGENT_KEY = "agt_" + secrets.token_urlsafe(32)  # well formed, so the lookup reaches the database
OPERATOR_TOKEN = "ops_" + secrets.token_urlsafe(32)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def assert_unavailable(response: httpx.Response) -> None:
    """503 in the envelope, with a Retry-After and a sentence that names the database."""
    assert response.status_code == 503, (response.status_code, response.text)
    assert int(response.headers["retry-after"]) > 0
    error = response.json()["error"]
    assert error["code"] == "service_unavailable", error
    assert "database" in error["message"].lower(), error


def timed(client: httpx.Client, method: str, path: str, **kw: Any) -> tuple[httpx.Response, float]:
    began = time.monotonic()
    response = client.request(method, path, **kw)
    return response, time.monotonic() - began


@contextmanager
def server_on(url: str, **overrides: object) -> Iterator[ServerThread]:
    """The app (embedded default) on ``url``, which need not answer."""
    settings = load_settings(database_url=url, webhook_allow_private=True, **overrides)
    db = Database(settings)
    try:
        with ServerThread(settings, db) as running:
            yield running
    finally:
        db.dispose()


def test_a_database_that_never_answers_is_503_within_the_connect_timeout() -> None:
    """It accepts TCP and says nothing: without a connect timeout psycopg waits 130 s."""
    with (
        DatabaseProxy(PG_TARGET, mode="hang") as proxy,
        server_on(proxy.url("inbots"), db_connect_timeout_seconds=2) as server,
        httpx.Client(base_url=server.url, timeout=15) as client,
    ):
        ready, took = timed(client, "GET", "/readyz")
        assert_unavailable(ready)
        assert ready.json()["database"] == "down"
        assert took < 4.5, f"/readyz took {took:.1f} s with a 2 s connect timeout"

        sent, took = timed(
            client,
            "POST",
            "/v1/threads/th_nowhere/messages",
            json={"body": "hello"},
            headers=bearer(AGENT_KEY),
        )
        assert_unavailable(sent)
        assert took < 4.5, f"a send took {took:.1f} s with a 2 s connect timeout"


def test_a_database_that_is_down_is_503_on_every_route() -> None:
    """A PostgreSQL URL on a closed port: the HTTP API, /mcp and the dashboard's sign-in all say
    503; /metrics still answers, with ``inbots_database_up 0``; /healthz stays 200."""
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/inbots"
    with (
        server_on(url) as server,
        httpx.Client(base_url=server.url, timeout=15, follow_redirects=False) as client,
    ):
        assert client.get("/healthz").status_code == 200
        ready = client.get("/readyz")
        assert_unavailable(ready)
        assert ready.json()["database"] == "down"
        assert_unavailable(
            client.post(
                "/v1/threads/th_nowhere/messages",
                json={"body": "hello"},
                headers=bearer(AGENT_KEY),
            )
        )
        assert_unavailable(client.get("/v1/stats", headers=bearer(OPERATOR_TOKEN)))
        assert_unavailable(client.get("/v1/inbox/wait", headers=bearer(AGENT_KEY)))
        assert_unavailable(
            client.post(
                "/mcp",
                json=INITIALIZE,
                headers={
                    **bearer(AGENT_KEY),
                    "Accept": "application/json, text/event-stream",
                },
            )
        )
        scraped = client.get("/metrics")
        assert scraped.status_code == 200
        assert sample(metric_samples(scraped.text), "inbots_database_up") == 0

        # The dashboard's sign-in: not a 500, and not "wrong token" either.
        form = client.get("/login")
        assert form.status_code == 200
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert csrf
        signed = client.post(
            "/login", data={"token": OPERATOR_TOKEN, "csrf": csrf.group(1), "next": "/"}
        )
        assert signed.status_code == 503, (signed.status_code, signed.text[:500])
        assert "database" in signed.text.lower()
        assert "not an operator token" not in signed.text


@pytest.mark.parametrize(
    "settings_overrides",
    [{"db_statement_timeout_seconds": 1, "sqlite_busy_timeout_seconds": 1}],
)
def test_a_statement_blocked_by_a_lock_is_503_within_the_statement_timeout(
    api: Api, backend: str, settings: Settings
) -> None:
    """Another connection holds a lock (PostgreSQL: ``LOCK TABLE agents IN ACCESS EXCLUSIVE
    MODE``; SQLite: the write lock): requests that need it give up after the statement timeout
    (the busy timeout on SQLite) with 503, and /readyz, which needs no table, stays ready."""
    writer = api.agent("writer")
    api.agent("reader")
    thread = writer.open_thread("Locked out", ["reader"])["id"]
    with (
        holding_a_lock(backend, settings.database_url),
        httpx.Client(base_url=api.base_url, timeout=10) as client,
    ):
        sent, took = timed(
            client,
            "POST",
            f"/v1/threads/{thread}/messages",
            json={"body": "are you there?"},
            headers=writer.headers,
        )
        assert_unavailable(sent)
        assert took < 3.5, f"a send took {took:.1f} s with a 1 s statement timeout"
        assert client.get("/readyz").status_code == 200
    writer.send(thread, "and now?")  # the lock is gone: business as usual


@contextmanager
def holding_a_lock(backend: str, url: str) -> Iterator[None]:
    if backend == "sqlite":
        conn = sqlite3.connect(make_url(url).database or "", isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            conn.execute(text("LOCK TABLE agents IN ACCESS EXCLUSIVE MODE"))
            try:
                yield
            finally:
                conn.rollback()
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["postgres"])
def test_pages_tools_and_sends_answer_503_once_the_database_goes_down(db_url: str) -> None:
    """Up first (a workspace, an agent, a dashboard session), then the database goes away: the
    pooled connections die and new ones are refused. The dashboard shows its error page with 503,
    the MCP endpoint and the HTTP API answer the envelope."""
    with DatabaseProxy(PG_TARGET) as proxy:
        url = proxy.url(make_url(db_url).database or "")
        settings = load_settings(database_url=url, webhook_allow_private=True)
        db = Database(settings)
        try:
            with (
                ServerThread(settings, db) as server,
                Api(server.url, new_workspace(db)) as api,
                httpx.Client(base_url=server.url, timeout=15, follow_redirects=False) as browser,
            ):
                agent = api.agent("soon-alone")
                api.agent("company")
                thread = agent.open_thread("Before the outage", ["company"])["id"]
                sign_in(browser, api.token)
                assert browser.get("/").status_code == 200

                proxy.down()
                page = browser.get("/")
                assert page.status_code == 503, (page.status_code, page.text[:500])
                assert "text/html" in page.headers["content-type"]
                assert "database" in page.text.lower()
                assert_unavailable(
                    browser.post(
                        f"/v1/threads/{thread}/messages",
                        json={"body": "anyone?"},
                        headers=agent.headers,
                    )
                )
                assert_unavailable(
                    browser.post(
                        "/mcp",
                        json=INITIALIZE,
                        headers={
                            **agent.headers,
                            "Accept": "application/json, text/event-stream",
                        },
                    )
                )
                assert_unavailable(browser.get("/readyz"))
        finally:
            db.dispose()


@pytest.mark.parametrize("backend", ["postgres"])
def test_readyz_answers_in_time_when_the_database_freezes_mid_session(db_url: str) -> None:
    """The database stops answering on connections already open (a frozen server: its kernel
    still takes the bytes, so no timeout of the connection fires). /readyz answers 503 within
    its deadline, the connect timeout, instead of waiting with them."""
    with DatabaseProxy(PG_TARGET) as proxy:
        url = proxy.url(make_url(db_url).database or "")
        settings = load_settings(
            database_url=url, webhook_allow_private=True, db_connect_timeout_seconds=2
        )
        db = Database(settings)
        try:
            with (
                ServerThread(settings, db) as server,
                httpx.Client(base_url=server.url, timeout=15) as client,
            ):
                assert client.get("/readyz").status_code == 200  # a pooled connection now
                proxy.hang()
                ready, took = timed(client, "GET", "/readyz")
                assert_unavailable(ready)
                assert took < 4.5, f"/readyz took {took:.1f} s with a 2 s connect timeout"
        finally:
            db.dispose()


def sign_in(client: httpx.Client, token: str) -> None:
    form = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf, form.text[:500]
    signed = client.post("/login", data={"token": token, "csrf": csrf.group(1), "next": "/"})
    assert signed.status_code == 303, (signed.status_code, signed.text[:500])


@pytest.mark.parametrize("settings_overrides", [{"db_pool_size": 1, "db_pool_timeout_seconds": 1}])
def test_long_polls_waiting_hold_no_database_connection(api: Api) -> None:
    """Two connections in the pool (one and one overflow) and three agents long-polling: while
    they wait, a fourth agent's request still gets a connection at once."""
    waiters = [api.agent(f"waiter-{i}") for i in range(3)]
    other = api.agent("busy")
    answers: list[int] = []

    def wait(agent: Any) -> None:
        with httpx.Client(base_url=api.base_url, timeout=15) as client:
            response = client.get("/v1/inbox/wait", params={"timeout": 3}, headers=agent.headers)
            answers.append(response.status_code)

    threads = [threading.Thread(target=wait, args=(w,)) for w in waiters]
    for t in threads:
        t.start()
    time.sleep(0.8)  # every waiter is past its first check and asleep
    for _ in range(3):  # a request left waiting for a connection would answer 503 after 1 s
        response = other.get("/inbox")
        assert response.status_code == 200, response.text
    for t in threads:
        t.join()
    assert answers == [200, 200, 200]


@pytest.mark.parametrize("backend", ["postgres"])
@pytest.mark.fresh_server
def test_connections_the_database_ended_are_replaced_before_a_request_uses_them(
    api: Api, db_url: str
) -> None:
    """PostgreSQL ends every connection of the server's pool (as a restart or an idle timeout
    does): the requests after it, each one checking out a pooled connection, all succeed on new
    ones. None answers 503 or 500 for a connection that was dead before it was handed out."""
    agent = api.agent("survivor")
    api.agent("peer")
    thread = agent.open_thread("Across a restart", ["peer"])["id"]
    for _ in range(3):  # several pooled connections, idle now
        assert agent.get("/inbox").status_code == 200
    database = make_url(db_url).database
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            ended = conn.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = :db AND pid <> pg_backend_pid()"
                ),
                {"db": database},
            ).scalar_one()
    finally:
        admin.dispose()
        emptier = _EMPTIERS.pop(db_url, None)  # this worker's emptier was ended too
        if emptier is not None:
            emptier.dispose()
    assert ended >= 1  # the server's pooled connections (and this worker's emptier)
    time.sleep(0.2)  # each ended backend's farewell has reached its socket
    for n in range(6):
        listed = agent.get("/inbox")
        assert listed.status_code == 200, (n, listed.status_code, listed.text)
    sent = agent.post(f"/threads/{thread}/messages", json={"body": "still here"})
    assert sent.status_code == 201, sent.text
