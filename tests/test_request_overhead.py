"""Per-request overhead: the caller lookup is one read statement (its activity stamp apart),
and a page of the inbox with nothing to stamp is one statement that writes nothing and still
counts every waiting delivery."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from psycopg.pq import TransactionStatus
from sqlalchemy import event, text

from inbots.auth.service import authenticate, resolve
from inbots.caller import Caller as AuthCaller
from inbots.db.engine import Database
from inbots.db.uow import run_unit, unit_of_work
from inbots.deliveries import service as deliveries
from inbots.deliveries.schemas import Inbox
from tests.conftest import ServerThread
from tests.helpers import Api


@contextmanager
def _recorded(database: Database) -> Iterator[list[str]]:
    """This thread's SQL statements (BEGIN left out: SQLite's is emitted as a statement)."""
    seen: list[str] = []
    me = threading.get_ident()

    def record(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if threading.get_ident() == me and not statement.upper().startswith("BEGIN"):
            seen.append(statement)

    event.listen(database.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(database.engine, "before_cursor_execute", record)


def _caller_for(database: Database, key: str) -> AuthCaller:
    with unit_of_work(database, readonly=True) as uow:
        return authenticate(uow, key)


def test_caller_lookup_is_one_read_statement(api: Api, database: Database) -> None:
    reader = api.agent("lookup-reader")
    with _recorded(database) as seen:
        caller = resolve(database, None, f"Bearer {reader.token}")
    assert caller.username == "lookup-reader"
    reads = [s for s in seen if s.lstrip().upper().startswith("SELECT")]
    writes = [s for s in seen if s.lstrip().upper().startswith(("UPDATE", "INSERT"))]
    assert len(reads) == 1, seen
    assert writes, seen  # a first call is due for its activity stamp


def test_inbox_page_with_nothing_to_stamp_only_reads_and_counts_all_waiting(
    api: Api, database: Database
) -> None:
    sender = api.agent("page-sender")
    reader = api.agent("page-reader")
    thread = sender.open_thread("Paged", ["page-reader"])
    for i in range(3):
        sender.send(thread["id"], f"note {i}")
    reader.inbox()  # shown once: the next listing has nothing to stamp
    caller = _caller_for(database, reader.token)

    def listing(limit: int) -> Callable[[], Inbox]:
        return lambda: run_unit(database, None, deliveries.inbox, caller, limit)

    with _recorded(database) as seen:
        page = listing(1)()
    statements = [s for s in seen if not s.upper().startswith(("COMMIT", "ROLLBACK"))]
    assert len(statements) == 1, statements  # the page with the count; nothing to stamp
    assert statements[0].lstrip().upper().startswith("SELECT"), statements
    assert "count(" in statements[0].lower(), statements
    # The count is the inbox's, not the page's (nor the one row's).
    assert (page.returned, page.waiting, page.more) == (1, 3, True)

    ids = [item["delivery_id"] for item in reader.inbox()["items"]]
    reader.ok("POST", "/acks", json={"ids": ids})
    with _recorded(database) as seen:
        empty = listing(5)()
    assert (empty.returned, empty.waiting, empty.more) == (0, 0, False)
    statements = [s for s in seen if not s.upper().startswith(("COMMIT", "ROLLBACK"))]
    assert len(statements) == 2, statements  # an empty page carries no count: counted alone


@pytest.mark.parametrize("backend", ["postgres"])
def test_read_and_stamping_units_on_postgresql_open_no_transaction(database: Database) -> None:
    """A read-only unit (a caller lookup) and a unit that mostly reads and at most stamps (an
    inbox page) run their statements in autocommit: under READ COMMITTED each sees a snapshot of
    its own either way, each stamp is one idempotent UPDATE, and the BEGIN and COMMIT (or
    ROLLBACK) round trips are saved. A writer's unit is one transaction, as ever."""

    def status(**mode: bool) -> TransactionStatus:
        with unit_of_work(database, **mode) as uow:
            uow.session.execute(text("SELECT 1"))
            raw = uow.session.connection().connection.dbapi_connection
            assert raw is not None
            found: TransactionStatus = raw.info.transaction_status
            return found

    assert status(readonly=True) == TransactionStatus.IDLE
    assert status(stamps=True) == TransactionStatus.IDLE
    assert status() == TransactionStatus.INTRANS


@contextmanager
def _request_checkouts(database: Database) -> Iterator[list[int]]:
    """Connections checked out of the pool by request threads (anyio's workers, where a sync
    endpoint looks up its caller and runs): the embedded dispatcher's threads left out."""
    seen: list[int] = []

    def record(*_args: Any) -> None:
        if threading.current_thread().name == "AnyIO worker thread":
            seen.append(threading.get_ident())

    event.listen(database.engine, "checkout", record)
    try:
        yield seen
    finally:
        event.remove(database.engine, "checkout", record)


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_reading_request_checks_out_one_connection_for_its_caller_and_its_unit(
    api: Api, server: ServerThread
) -> None:
    """On PostgreSQL the caller lookup hands its session (autocommit: no transaction held) to
    the request's reading or stamping unit; a writer takes a connection of its own."""
    sender = api.agent("one-conn-sender")
    reader = api.agent("one-conn-reader")
    thread = sender.open_thread("One connection", ["one-conn-reader"])
    sender.send(thread["id"], "first")
    reader.inbox()  # its activity stamped, the page shown: the next requests only read
    database: Database = server.app.state.db
    with _request_checkouts(database) as seen:
        assert reader.inbox()["waiting"] == 1
    assert len(seen) == 1, seen
    with _request_checkouts(database) as seen:
        reader.ok("GET", f"/threads/{thread['id']}")
    assert len(seen) == 1, seen
    with _request_checkouts(database) as seen:  # refused by its unit: the session still closed
        refused = reader.get("/inbox", params={"cursor": "not-a-cursor"})
    assert refused.status_code == 422, refused.text
    assert len(seen) == 1, seen
    sender.send(thread["id"], "warm")  # the sender's activity stamped
    with _request_checkouts(database) as seen:
        sender.send(thread["id"], "second")
    assert len(seen) == 2, seen  # the lookup's, then the writer's own
    deadline = time.monotonic() + 5
    while database.engine.pool.checkedout() and time.monotonic() < deadline:  # type: ignore[attr-defined]
        time.sleep(0.05)
    assert database.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
