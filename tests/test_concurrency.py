"""Concurrency: many senders into one thread lose nothing and duplicate nothing; a send costs the
same number of SQL statements however many recipients it has."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from sqlalchemy import distinct, event, func, select

from inbots.auth.service import authenticate
from inbots.caller import Caller as AuthCaller
from inbots.db.engine import Database
from inbots.db.uow import UnitOfWork, unit_of_work
from inbots.kit.ids import new_id
from inbots.messages.schemas import DirectMessageCreate, MessageCreate, SendResult
from inbots.messages.service import send_direct, send_message
from inbots.models.agents import Agent
from inbots.models.deliveries import Delivery
from inbots.models.messages import Message
from tests.helpers import Api

SENDERS = 20
SENDS_EACH = 50
TOTAL = SENDERS * SENDS_EACH


def _send_all(base_url: str, key: str, name: str, thread_id: str) -> tuple[list[int], int]:
    """Each send's final status, and how many times a send was answered 503 and sent again.

    A client does what the contract says to a 503 (the database was too busy: nothing was
    stored): it waits and sends again. On a heavily loaded machine SQLite now and then refuses
    one write of the twenty at once. (Had the refused send stored anything, its message would be
    there twice: the counts of messages and of distinct bodies below would say so.)"""
    statuses, again = [], 0
    with httpx.Client(base_url=base_url, timeout=60) as client:
        headers = {"Authorization": f"Bearer {key}"}
        for i in range(SENDS_EACH):
            while True:
                response = client.post(
                    f"/v1/threads/{thread_id}/messages",
                    json={"body": f"{name} #{i}", "kind": "update"},
                    headers=headers,
                )
                if response.status_code != 503:
                    break
                again += 1
                time.sleep(min(float(response.headers.get("retry-after", 1)), 1.0))
            statuses.append(response.status_code)
    return statuses, again


@pytest.mark.slow
def test_twenty_concurrent_senders_deliver_exactly_once(api: Api, database: Database) -> None:
    receiver = api.agent("receiver")
    senders = {f"sender-{i:02d}": api.agent(f"sender-{i:02d}") for i in range(SENDERS)}
    thread = receiver.open_thread("Busy thread", sorted(senders))
    assert len(thread["participants"]) == SENDERS + 1

    with ThreadPoolExecutor(max_workers=SENDERS) as pool:
        futures = {
            name: pool.submit(_send_all, api.base_url, caller.token, name, thread["id"])
            for name, caller in senders.items()
        }
        results = {name: future.result() for name, future in futures.items()}
    for name, (statuses, _) in results.items():
        assert Counter(statuses) == {201: SENDS_EACH}, (name, Counter(statuses))
    assert sum(again for _, again in results.values()) <= TOTAL // 100  # rare, not the rule

    # The database: 1000 messages, and exactly one delivery of each to the receiver.
    with database.engine.connect() as conn:
        receiver_id = conn.execute(
            select(Agent.id).where(Agent.username == "receiver")
        ).scalar_one()
        messages = conn.execute(
            select(func.count()).select_from(Message).where(Message.thread_id == thread["id"])
        ).scalar_one()
        bodies = conn.execute(
            select(func.count(distinct(Message.body))).where(Message.thread_id == thread["id"])
        ).scalar_one()
        to_receiver = conn.execute(
            select(func.count(), func.count(distinct(Delivery.message_id))).where(
                Delivery.recipient_id == receiver_id
            )
        ).one()
        per_message = conn.execute(
            select(Delivery.message_id, Delivery.recipient_id, func.count())
            .group_by(Delivery.message_id, Delivery.recipient_id)
            .having(func.count() > 1)
        ).all()
        all_deliveries = conn.execute(select(func.count()).select_from(Delivery)).scalar_one()
    assert messages == TOTAL
    assert bodies == TOTAL
    assert tuple(to_receiver) == (TOTAL, TOTAL)
    assert per_message == []
    # Each message goes to every other participant: the receiver and the 19 other senders.
    assert all_deliveries == TOTAL * SENDERS

    # The receiver's inbox, page by page (acknowledging each page to reach the next).
    first = receiver.inbox(limit=200)
    assert first["waiting"] == TOTAL and first["returned"] == 200 and first["more"] is True
    seen_deliveries: list[str] = []
    seen_messages: list[str] = []
    summaries: list[str] = []
    page: dict[str, Any] = first
    while page["items"]:
        items = page["items"]
        seen_deliveries += [i["delivery_id"] for i in items]
        seen_messages += [i["message_id"] for i in items]
        summaries += [i["summary"] for i in items]
        ids = [i["delivery_id"] for i in items]
        for start in range(0, len(ids), 100):
            acked = receiver.ok("POST", "/acks", json={"ids": ids[start : start + 100]})
            assert acked["acknowledged"] == ids[start : start + 100]
        page = receiver.inbox(limit=200)
        assert len(seen_deliveries) <= TOTAL, "the inbox keeps returning mail"
    assert page == {"items": [], "returned": 0, "waiting": 0, "more": False, "next_cursor": None}
    assert len(seen_deliveries) == len(set(seen_deliveries)) == TOTAL
    assert len(seen_messages) == len(set(seen_messages)) == TOTAL
    expected = {f"{name} #{i}" for name in senders for i in range(SENDS_EACH)}
    assert set(summaries) == expected
    # Oldest first: delivery ids are time-ordered, so each page continues the last.
    assert seen_deliveries == sorted(seen_deliveries)


# --- statement count per send -----------------------------------------------------------------


def _caller_for(database: Database, key: str) -> AuthCaller:
    with unit_of_work(database, readonly=True) as uow:
        return authenticate(uow, key)


def _statements_for_send(database: Database, caller: AuthCaller, thread_id: str) -> list[str]:
    draft = MessageCreate(body="counting statements", kind="task")
    return _statements_for(database, lambda uow: send_message(uow, caller, thread_id, draft))


def _statements_for_direct(database: Database, caller: AuthCaller, to: list[str]) -> list[str]:
    draft = DirectMessageCreate(to=to, body="counting statements", kind="task", ref="T-1")
    return _statements_for(
        database, lambda uow: send_direct(uow, caller, draft, "key-" + new_id("k"))
    )


def _statements_for(database: Database, send: Callable[[UnitOfWork], SendResult]) -> list[str]:
    statements: list[str] = []

    me = threading.get_ident()

    def record(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        # Only this thread's statements: the server's background sweep shares the engine.
        if threading.get_ident() == me:
            statements.append(statement)

    event.listen(database.engine, "before_cursor_execute", record)
    try:
        with unit_of_work(database) as uow:
            result = send(uow)
    finally:
        event.remove(database.engine, "before_cursor_execute", record)
    assert result.duplicate is False
    return statements


def test_send_statement_count_does_not_grow_with_recipients(api: Api, database: Database) -> None:
    small = api.agent("small-sender")
    large = api.agent("large-sender")
    few = [api.agent(f"few-{i}").name for i in range(2)]
    many = [api.agent(f"many-{i:02d}").name for i in range(50)]
    small_thread = small.open_thread("Two recipients", few)
    large_thread = large.open_thread("Fifty recipients", many)
    small_caller = _caller_for(database, small.token)
    large_caller = _caller_for(database, large.token)
    assert small_caller.username == "small-sender" and not small_caller.is_operator

    # Warm up (first-use queries such as dialect checks must not skew the comparison).
    _statements_for_send(database, small_caller, small_thread["id"])
    _statements_for_send(database, large_caller, large_thread["id"])

    with_two = _statements_for_send(database, small_caller, small_thread["id"])
    with_fifty = _statements_for_send(database, large_caller, large_thread["id"])

    with database.engine.connect() as conn:
        latest = conn.execute(
            select(Message.id)
            .where(Message.thread_id == large_thread["id"])
            .order_by(Message.id.desc())
        ).first()
        assert latest is not None
        fanned_out = conn.execute(
            select(func.count()).select_from(Delivery).where(Delivery.message_id == latest[0])
        ).scalar_one()
    assert fanned_out == 50
    assert len(with_two) == len(with_fifty), (
        f"{len(with_two)} statements for 2 recipients, {len(with_fifty)} for 50:\n"
        + "\n".join(s.split("\n")[0][:120] for s in with_fifty)
    )
    assert len(with_two) <= 15, with_two


def test_a_send_to_webhook_and_polling_recipients_stores_its_deliveries_in_one_insert(
    api: Api, database: Database
) -> None:
    """Recipients with a webhook and recipients that poll, alternating: their delivery rows
    differ in which columns are NULL (a published row has ``last_published_at``), and still go
    to the database as one INSERT. (The ORM leaves NULL columns out by default and so split
    such rows into a statement per run of alike rows.)"""
    sender = api.agent("mixed-sender")
    names = []
    for i in range(6):
        name = f"mixed-{i}"
        hook = {"webhook_url": f"http://127.0.0.1:9/hook-{i}"} if i % 2 else {}
        api.ok("POST", "/agents", 201, json={"name": name, **hook})
        names.append(name)
    thread = sender.open_thread("Webhooks and polling", names)
    caller = _caller_for(database, sender.token)
    _statements_for_send(database, caller, thread["id"])  # warm up

    statements = _statements_for_send(database, caller, thread["id"])

    inserts = [s for s in statements if s.lstrip().startswith("INSERT INTO deliveries")]
    assert len(inserts) == 1, [s.split("\n")[0][:120] for s in statements]
    with database.engine.connect() as conn:
        published = conn.execute(
            select(Delivery.last_published_at.is_not(None), func.count())
            .where(Delivery.thread_id == thread["id"])
            .group_by(Delivery.last_published_at.is_not(None))
        ).all()
    assert dict(published) == {True: 6, False: 6}  # two sends, three of each kind per send


def test_direct_send_and_broadcast_statement_counts_do_not_grow_with_recipients(
    api: Api, other_api: Api, database: Database
) -> None:
    """A send that opens its thread (``POST /v1/messages``), with an idempotency key (its
    savepoint) and a task reference, to 2 named recipients or 50; and a broadcast (``"*"``) in a
    workspace of 3 agents or one of 51: each costs the same statements either way."""
    few_sender = api.agent("few-sender")
    few = [api.agent(f"few-{i}").name for i in range(2)]
    many_sender = other_api.agent("many-sender")
    many = [other_api.agent(f"many-{i:02d}").name for i in range(50)]
    small = _caller_for(database, few_sender.token)
    large = _caller_for(database, many_sender.token)

    for caller, names in ((small, few), (large, many), (small, ["*"]), (large, ["*"])):
        _statements_for_direct(database, caller, names)  # warm up

    to_two = _statements_for_direct(database, small, few)
    to_fifty = _statements_for_direct(database, large, many)
    to_all_of_two = _statements_for_direct(database, small, ["*"])
    to_all_of_fifty = _statements_for_direct(database, large, ["*"])

    assert other_api.ok("GET", "/agents/many-49")["unread"] == 4
    assert len(to_two) == len(to_fifty), (
        f"{len(to_two)} statements for 2 recipients, {len(to_fifty)} for 50:\n"
        + "\n".join(s.split("\n")[0][:120] for s in to_fifty)
    )
    assert len(to_all_of_two) == len(to_all_of_fifty), (
        f"{len(to_all_of_two)} statements for a broadcast to 2, {len(to_all_of_fifty)} to 50:\n"
        + "\n".join(s.split("\n")[0][:120] for s in to_all_of_fifty)
    )
    assert len(to_fifty) <= 20, to_fifty
