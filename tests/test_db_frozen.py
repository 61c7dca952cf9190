"""A PostgreSQL that freezes (its processes stopped): its kernel still takes the bytes and answers
TCP, and the stopped server enforces no ``statement_timeout``, so only the client-side deadline
(:mod:`inbots.db.deadline`) ends a call waiting on it: a request on a pooled connection answers
``503`` within the statement timeout plus the margin, and the requests after the database thaws
succeed. A slow statement within the timeout is not cut.

The frozen server is :class:`tests.dbproxy.DatabaseProxy` in ``hang`` mode in front of the shared
PostgreSQL (which is never stopped); ``thaw`` resumes it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from inbots.config import load_settings
from inbots.db.deadline import MARGIN_SECONDS
from inbots.db.engine import TCP_KEEPALIVES, Database, postgres_connect_args
from inbots.db.uow import unit_of_work
from inbots.errors import ServiceUnavailable
from tests.conftest import ServerThread, new_workspace
from tests.dbproxy import DatabaseProxy
from tests.helpers import Api, metric_samples, sample
from tests.test_db_outage import PG_TARGET, assert_unavailable, timed

STATEMENT_TIMEOUT = 2.0
BOUND = STATEMENT_TIMEOUT + MARGIN_SECONDS  # when the watchdog drops a call's connection
SLACK = 2.5  # scheduling on a busy test machine


@contextmanager
def behind_a_proxy(db_url: str, **overrides: object) -> Iterator[tuple[DatabaseProxy, Database]]:
    """A :class:`Database` (statement timeout :data:`STATEMENT_TIMEOUT`) on ``db_url``'s
    database, reached through a proxy that can freeze it."""
    with DatabaseProxy(PG_TARGET) as proxy:
        settings = load_settings(
            database_url=proxy.url(make_url(db_url).database or ""),
            webhook_allow_private=True,
            rate_limit_per_minute=0,
            db_connect_timeout_seconds=2,
            db_statement_timeout_seconds=STATEMENT_TIMEOUT,
            **overrides,
        )
        db = Database(settings)
        try:
            yield proxy, db
        finally:
            db.dispose()


POOLED = 4


def warm_the_pool(db: Database) -> None:
    """:data:`POOLED` connections open and idle in the pool, so the requests that follow each
    take one that is already connected (a new one would meet the connect timeout instead)."""
    held = [db.engine.connect() for _ in range(POOLED)]
    for conn in held:
        conn.execute(text("SELECT 1"))
    for conn in held:
        conn.close()


@pytest.mark.parametrize("backend", ["postgres"])
@pytest.mark.postgres
def test_requests_in_flight_when_the_database_freezes_answer_503_within_the_bound(
    db_url: str,
) -> None:
    """A send and a /metrics scrape on pooled connections when the server freezes: the send
    answers 503 (the sentence says the database stopped answering) and the scrape answers 200
    with ``inbots_database_up 0``, each within the statement timeout plus the margin, not after
    the freeze. Once the server thaws, sends succeed again."""
    with (
        behind_a_proxy(db_url, db_pool_size=POOLED) as (proxy, db),
        ServerThread(db.settings, db) as server,
        Api(server.url, new_workspace(db)) as api,
        httpx.Client(base_url=server.url, timeout=BOUND + 10) as client,
    ):
        agent = api.agent("before-the-freeze")
        api.agent("peer")
        thread = agent.open_thread("Frozen", ["peer"])["id"]
        agent.send(thread, "warm")
        warm_the_pool(db)

        proxy.hang()
        scraped: list[tuple[httpx.Response, float]] = []
        scraper = threading.Thread(target=lambda: scraped.append(timed(client, "GET", "/metrics")))
        scraper.start()
        sent, took = timed(
            client,
            "POST",
            f"/v1/threads/{thread}/messages",
            json={"body": "are you there?"},
            headers=agent.headers,
        )
        scraper.join(BOUND + 10)
        assert_unavailable(sent)
        assert "stopped answering" in sent.json()["error"]["message"], sent.text
        assert BOUND - 0.2 < took < BOUND + SLACK, f"a send took {took:.1f} s (bound {BOUND:g} s)"
        scrape, scrape_took = scraped[0]
        assert scrape.status_code == 200
        assert sample(metric_samples(scrape.text), "inbots_database_up") == 0
        assert scrape_took < BOUND + SLACK, f"/metrics took {scrape_took:.1f} s"

        proxy.thaw()
        agent.send(thread, "and now?")
        assert client.get("/readyz").status_code == 200
        assert sample(metric_samples(client.get("/metrics").text), "inbots_database_up") == 1


@pytest.mark.parametrize("backend", ["postgres"])
@pytest.mark.postgres
def test_a_commit_when_the_database_freezes_is_503_within_the_bound(db_url: str) -> None:
    """The freeze comes between a unit's statements and its COMMIT: the commit is bounded too."""
    with behind_a_proxy(db_url) as (proxy, db):
        outcome: list[BaseException | None] = []

        def unit() -> None:
            try:
                with unit_of_work(db) as uow:
                    uow.session.execute(text("SELECT 1"))  # a transaction is open: COMMIT goes out
                    proxy.hang()
            except BaseException as error:
                outcome.append(error)
            else:
                outcome.append(None)

        began = time.monotonic()
        committing = threading.Thread(target=unit)
        committing.start()
        committing.join(BOUND + 10)
        took = time.monotonic() - began
        if committing.is_alive():
            proxy.down()  # the connection closes: the commit fails, the thread ends
            committing.join(10)
            pytest.fail(f"the commit still waited after {took:.1f} s (bound {BOUND:g} s)")
        assert isinstance(outcome[0], ServiceUnavailable), outcome
        assert "stopped answering" in str(outcome[0])
        assert BOUND - 0.2 < took < BOUND + SLACK, f"the commit took {took:.1f} s"

        proxy.thaw()
        with unit_of_work(db) as uow:
            assert uow.session.execute(text("SELECT 1")).scalar_one() == 1


@pytest.mark.parametrize("backend", ["postgres"])
@pytest.mark.postgres
def test_a_slow_statement_is_not_cut_and_the_server_times_out_first(db_url: str) -> None:
    """No false positive: a statement that runs close to the statement timeout finishes, and one
    that runs past it is cancelled by the server (its own sentence), not cut by the watchdog.
    The connection survives both, and the time after them, idle in the pool."""
    settings = load_settings(database_url=db_url, db_statement_timeout_seconds=STATEMENT_TIMEOUT)
    db = Database(settings)
    try:
        began = time.monotonic()
        with unit_of_work(db, readonly=True) as uow:
            pid = uow.session.execute(text("SELECT pg_backend_pid()")).scalar_one()
            uow.session.execute(text("SELECT pg_sleep(:s)"), {"s": STATEMENT_TIMEOUT - 0.3})
        with (
            pytest.raises(ServiceUnavailable, match="did not answer within 2 s") as cancelled,
            unit_of_work(db, readonly=True) as uow,
        ):
            uow.session.execute(text("SELECT pg_sleep(:s)"), {"s": BOUND + 1})
        assert "stopped answering" not in str(cancelled.value)
        time.sleep(max(0.0, began + BOUND + 0.5 - time.monotonic()))  # past every deadline
        with unit_of_work(db, readonly=True) as uow:
            assert uow.session.execute(text("SELECT pg_backend_pid()")).scalar_one() == pid
    finally:
        db.dispose()


def test_keepalives_and_tcp_user_timeout_are_set_and_the_url_wins() -> None:
    url = make_url("postgresql+psycopg://u@db/inbots?keepalives_idle=60&options=-c%20a%3Db")
    args = postgres_connect_args(url, load_settings(database_url=url.render_as_string()))
    assert args["keepalives"] == 1
    assert args["tcp_user_timeout"] == TCP_KEEPALIVES["tcp_user_timeout"]
    assert "keepalives_idle" not in args  # the URL's stands
    assert args["options"] == "-c a=b -c TimeZone=UTC -c statement_timeout=30000"


def test_a_statement_timeout_of_0_sets_no_deadline() -> None:
    """The migrations run with the statement timeout at 0: nothing bounds their calls."""
    url = "postgresql+psycopg://u@127.0.0.1:1/inbots"  # never connected to
    timed_out = Database(load_settings(database_url=url))
    unbounded = Database(load_settings(database_url=url, db_statement_timeout_seconds=0))
    try:
        assert "do_execute" in vars(timed_out.engine.dialect)  # the watchdog's wrapper
        assert "do_commit" in vars(timed_out.engine.dialect)
        assert "do_execute" not in vars(unbounded.engine.dialect)
        assert "do_commit" not in vars(unbounded.engine.dialect)
    finally:
        timed_out.dispose()
        unbounded.dispose()
