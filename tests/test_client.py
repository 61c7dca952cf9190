"""``inbots.client`` against the real server (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import inspect
import json
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path

import httpx
import pydantic
import pytest

import inbots.client
import inbots.webhooks
from inbots.client import (
    AsyncClient,
    AuthError,
    Client,
    Conflict,
    InbotsError,
    NotFound,
    RateLimited,
    Timeout,
    TransportError,
    Unavailable,
    UnexpectedResponse,
    ValidationError,
    VerificationError,
    verify,
)
from tests.conftest import ServerThread, free_port
from tests.helpers import Api
from tests.receivers import always, hang, receiver

NewAgent = Callable[..., Client]


@pytest.fixture
def ops(api: Api) -> Iterator[Client]:
    """The workspace's operator, through the client."""
    with Client(api.base_url, api.token) as client:
        yield client


@pytest.fixture
def agent(api: Api, ops: Client) -> Iterator[NewAgent]:
    """Registers an agent and answers a client holding its key (closed after the test)."""
    with ExitStack() as stack:

        def make(name: str, **kw: object) -> Client:
            key = ops.register_agent(name, **kw).api_key
            return stack.enter_context(Client(api.base_url, key))

        yield make


def listening(server: ServerThread) -> int:
    return int(server.app.state.dispatch.wakeups.listening())


def until_listening(server: ServerThread, count: int = 1) -> None:
    deadline = time.monotonic() + 10
    while listening(server) < count:
        assert time.monotonic() < deadline, "the long-poll never started waiting"
        time.sleep(0.01)


class CountingTransport(httpx.HTTPTransport):
    """The real transport, keeping each request and its path (no answer is changed)."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []
        self.requests: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        self.requests.append(request)
        return super().handle_request(request)

    def last(self) -> tuple[str, str, dict[str, str], object]:
        """The last request: method, path, query parameters and JSON body (None if none)."""
        request = self.requests[-1]
        body = json.loads(request.content) if request.content else None
        return request.method, request.url.path, dict(request.url.params), body


class AsyncCountingTransport(httpx.AsyncHTTPTransport):
    """:class:`CountingTransport` for the async client."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return await super().handle_async_request(request)


# The package


def test_importing_the_client_loads_no_server_code() -> None:
    probe = (
        "import sys, inbots.client\n"
        "heavy = ('sqlalchemy', 'fastapi', 'celery', 'starlette', 'uvicorn', 'mcp', 'alembic')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy\n"
        "             or (m.startswith('inbots.') and not m.startswith(('inbots.client',\n"
        "                 'inbots.webhooks')))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]", out


def test_the_async_client_has_the_sync_clients_methods_and_parameters() -> None:
    def public(cls: type) -> dict[str, inspect.Signature]:
        return {
            name: inspect.signature(fn)
            for name, fn in vars(cls).items()
            if callable(fn) and not name.startswith("_")
        }

    sync, asynchronous = public(Client), public(AsyncClient)
    assert set(sync) - {"close"} == set(asynchronous) - {"aclose"}
    for name, signature in sync.items():
        if name == "close":
            continue
        assert list(signature.parameters.values()) == list(
            asynchronous[name].parameters.values()
        ), name
        assert inspect.iscoroutinefunction(vars(AsyncClient)[name]) or (
            inspect.isasyncgenfunction(vars(AsyncClient)[name])
        ), name


def test_the_public_names_are_exported_on_purpose() -> None:
    assert Client.__module__ == "inbots.client" and NotFound.__module__ == "inbots.client"
    assert all(hasattr(inbots.client, name) for name in inbots.client.__all__)
    assert verify is inbots.webhooks.verify  # re-exported, not a second implementation
    assert inbots.client.Priority.__args__ == ("normal", "urgent")  # for callers' signatures
    assert issubclass(TransportError, ConnectionError) and issubclass(Timeout, TimeoutError)
    for cls in (AuthError, NotFound, Conflict, ValidationError, RateLimited, Unavailable):
        assert issubclass(cls, InbotsError)
    error = ValidationError("Add a summary.", status=422, code="summary_required", field="summary")
    copy = pickle.loads(pickle.dumps(error))  # a task result or a log queue can carry it
    assert (type(copy), repr(copy)) == (ValidationError, repr(error))
    late = pickle.loads(pickle.dumps(Timeout("No answer.", url="http://x")))
    assert (type(late), str(late), late.url) == (Timeout, "No answer.", "http://x")


def test_every_request_carries_the_key_the_user_agent_and_the_session_label() -> None:
    """What the client sends, seen by a transport that answers like the server would."""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"items": [], "returned": 0, "waiting": 0, "more": False})

    with Client(
        "http://inbots.test/v1/",
        "agt_secret",
        session_label="ci runner 7",
        transport=httpx.MockTransport(answer),
    ) as client:
        client.inbox(limit=5)
    (request,) = seen
    assert str(request.url) == "http://inbots.test/v1/inbox?limit=5"
    assert request.headers["authorization"] == "Bearer agt_secret"
    assert request.headers["user-agent"] == f"inbots-client/{inbots.__version__}"
    assert request.headers["x-inbots-session"] == "ci runner 7"
    mcp = Client(
        "http://inbots.test",
        "agt_secret",
        headers={"User-Agent": "inbots-mcp/9"},
        transport=httpx.MockTransport(answer),
    )
    with mcp:
        mcp.wait(5)
    assert seen[-1].headers["user-agent"] == "inbots-mcp/9"
    assert seen[-1].url.params["timeout"] == "5" and "x-inbots-session" not in seen[-1].headers
    with pytest.raises(ValueError):
        Client("http://inbots.test", "agt_x", session_label="two\nlines")
    with pytest.raises(ValueError):
        Client("inbots.test", "agt_x")


# End to end, against the real server


def test_sync_client_end_to_end(ops: Client, agent: NewAgent) -> None:
    reviewer = agent("reviewer", description="Reviews pull requests")
    implementer = agent("implementer")
    agent("tester")

    me = reviewer.me()
    assert (me.username, me.description, me.status) == (
        "reviewer",
        "Reviews pull requests",
        "active",
    )
    assert isinstance(me.created_at, datetime) and me.created_at.tzinfo is not None
    assert {e.username for e in reviewer.directory()} >= {"implementer", "tester"}
    assert [e.username for e in reviewer.directory(query="impl")] == ["implementer"]

    thread = reviewer.open_thread("Review the schema migration", ["implementer"], goal="Merge")
    assert (thread.opened_by, thread.status, thread.goal) == ("reviewer", "open", "Merge")
    assert sorted(thread.participants) == ["implementer", "reviewer"]
    assert "tester" in reviewer.add_participant(thread.id, "tester").participants

    first = reviewer.send(thread.id, "Please review PR 12.", kind="task", idempotency_key="pr-12")
    again = reviewer.send(thread.id, "Please review PR 12.", kind="task", idempotency_key="pr-12")
    assert first.duplicate is False and again.duplicate is True
    assert again.message.id == first.message.id and again.message.body == "Please review PR 12."
    assert sorted(d.recipient for d in first.deliveries) == ["implementer", "tester"]

    inbox = implementer.inbox()
    assert (inbox.returned, inbox.waiting, inbox.more) == (1, 1, False)
    (item,) = inbox.items
    assert (item.message_id, item.sender, item.kind, item.state) == (
        first.message.id,
        "reviewer",
        "task",
        "delivered",
    )
    assert item.thread_title == "Review the schema migration" and item.body is None

    read = implementer.read(item.delivery_id)
    assert read.message.body == "Please review PR 12."
    assert read.delivery is not None and read.delivery.state == "fetched"

    acked = implementer.acknowledge(item.delivery_id, "done", "Looks good")
    assert (acked.acknowledged, acked.already, acked.not_found) == ([item.delivery_id], [], [])
    assert implementer.acknowledge([item.delivery_id, "dlv_nothing"]).not_found == ["dlv_nothing"]
    assert implementer.inbox().items == []
    receipt = ops.delivery(item.delivery_id)
    assert (receipt.state, receipt.outcome, receipt.note) == ("acknowledged", "done", "Looks good")
    assert receipt.acknowledged_at is not None and receipt.attempts == []

    history = reviewer.history(thread.id)
    assert [m.id for m in history.items] == [first.message.id] and history.next_cursor is None
    assert [t.id for t in reviewer.threads().items] == [thread.id]
    assert reviewer.thread(thread.id).title == "Review the schema migration"
    operators_view = ops.thread(thread.id).messages
    assert operators_view and sorted(d.recipient for d in operators_view[0].deliveries) == [
        "implementer",
        "tester",
    ]
    assert reviewer.limits().summary_required_over == 200
    assert reviewer.close_request(thread.id).status == "close_requested"
    assert ops.close_thread(thread.id).status == "closed"
    assert {a.username for a in ops.agents()} >= {"reviewer", "implementer", "tester"}


def test_answers_dump_back_to_the_servers_json(api: Api, ops: Client) -> None:
    """``model_dump(mode="json", exclude_unset=True)`` is the server's JSON, field for field in
    its order and byte for byte in its times: what ``inbots … --output json`` prints."""
    sender_raw, reader_raw = api.agent("sender"), api.agent("reader")  # plain HTTP, same keys
    thread_id = sender_raw.open_thread("Round trip", ["reader"])["id"]
    post = {"json": {"body": "hello", "summary": "hi"}, "headers": {"Idempotency-Key": "rt"}}
    sender_raw.ok("POST", f"/threads/{thread_id}/messages", 201, **post)
    reader_raw.inbox()  # from here on, listing and reading change nothing
    with (
        Client(api.base_url, sender_raw.token) as sender,
        Client(api.base_url, reader_raw.token) as reader,
    ):
        message_id = reader.history(thread_id).items[0].id
        delivery_id = reader.inbox().items[0].delivery_id
        pairs = [
            (reader.inbox(), reader_raw.ok("GET", "/inbox")),
            (reader.read(message_id), reader_raw.ok("GET", f"/messages/{message_id}")),
            (reader.history(thread_id), reader_raw.ok("GET", f"/threads/{thread_id}/messages")),
            (reader.thread(thread_id), reader_raw.ok("GET", f"/threads/{thread_id}")),
            (reader.limits(), reader_raw.ok("GET", "/limits")),
            (ops.thread(thread_id), api.ok("GET", f"/threads/{thread_id}")),
            (ops.threads(), api.ok("GET", "/threads")),
            (ops.delivery(delivery_id), api.ok("GET", f"/deliveries/{delivery_id}")),
            (sender.outbox(), sender_raw.ok("GET", "/outbox")),
            (sender.read(message_id), sender_raw.ok("GET", f"/messages/{message_id}")),
            (
                sender.send(thread_id, "hello", "hi", idempotency_key="rt"),
                sender_raw.ok("POST", f"/threads/{thread_id}/messages", 200, **post),
            ),
        ]
    for answer, expected in pairs:
        # json.dumps keeps the order keys came in: the same keys, in the server's order.
        dumped = answer.model_dump(mode="json", exclude_unset=True)
        assert json.dumps(dumped) == json.dumps(expected), type(answer).__name__


def test_async_client_end_to_end(api: Api, ops: Client, server: ServerThread) -> None:
    keys = {name: ops.register_agent(name).api_key for name in ("reviewer", "implementer")}

    async def scenario() -> None:
        async with (
            AsyncClient(api.base_url, keys["reviewer"]) as reviewer,
            AsyncClient(api.base_url, keys["implementer"]) as implementer,
        ):
            assert (await implementer.me()).username == "implementer"
            thread = await reviewer.open_thread("Async task", ["implementer"])
            first = await reviewer.send(thread.id, "one", idempotency_key="k-1")
            assert (await reviewer.send(thread.id, "one", idempotency_key="k-1")).duplicate
            assert [i.message_id for i in (await implementer.inbox()).items] == [first.message.id]

            # A long-poll wakes on another agent's send, long before its 20 s timeout (the
            # bound leaves room for a loaded machine; nothing but the send can end it early).
            waiting = asyncio.create_task(implementer.wait(timeout=20))
            while listening(server) < 1:
                await asyncio.sleep(0.01)
            sent_at = time.monotonic()
            second = await reviewer.send(thread.id, "two", kind="question")
            woke = await waiting
            assert time.monotonic() - sent_at < 5.0
            assert [i.message_id for i in woke.items] == [second.message.id]
            assert woke.waiting == 2

            read = await implementer.read(second.message.id)
            assert read.message.kind == "question"
            acked = await implementer.acknowledge([first.message.id, second.message.id], "done")
            assert sorted(acked.acknowledged) == sorted([first.message.id, second.message.id])
            with pytest.raises(NotFound) as missing:
                await implementer.thread("th_doesnotexist")
            assert missing.value.code == "not_found" and missing.value.status == 404

        async with AsyncClient(api.base_url, api.token) as operator:  # the operator's calls too
            page = await operator.deliveries(thread=thread.id, state="acknowledged")
            assert sorted(d.message_id for d in page.items) == sorted(
                [first.message.id, second.message.id]
            )
            assert (await operator.stats()).deliveries["acknowledged"] == 2
            assert [e.type for e in (await operator.events(agent="reviewer")).items] == [
                "message.acknowledged"
            ] * 2

    asyncio.run(scenario())


def test_wait_wakes_at_once_when_another_agent_sends(agent: NewAgent, server: ServerThread) -> None:
    sender, reader = agent("sender"), agent("reader")
    thread = sender.open_thread("Watch the build", ["reader"])
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(reader.wait, 20)
        until_listening(server)
        sent_at = time.monotonic()
        sent = sender.send(thread.id, "build is green", kind="update")
        woke = waiting.result(timeout=10)
        elapsed = time.monotonic() - sent_at
    # Woken by the send, far from the 20 s timeout (a loaded machine may take a few seconds).
    assert elapsed < 3.0, elapsed
    assert [i.message_id for i in woke.items] == [sent.message.id]
    assert reader.wait(1).items == []  # shown once: the next wait times out empty


def test_a_sender_follows_its_mail_outbox_receipts_and_wait_events(
    agent: NewAgent, server: ServerThread
) -> None:
    lead, worker, helper = agent("lead"), agent("worker"), agent("helper")
    thread = lead.open_thread("Delegated", ["worker", "helper"])
    sent = lead.send(thread.id, "Port the parser", kind="task")
    worker.read(sent.message.id)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(lead.wait, 20, events="receipts")
        until_listening(server)
        worker.acknowledge(sent.message.id, "declined", "Not my area")
        acked_at = time.monotonic()
        woke = waiting.result(timeout=30)
        elapsed = time.monotonic() - acked_at
    # Woken by the decline, not by its 20 s timeout (a loaded machine may take a few seconds).
    assert elapsed < 5.0, elapsed
    assert woke.items == []
    (receipt,) = woke.receipts
    assert (receipt.message_id, receipt.thread_id, receipt.recipient) == (
        sent.message.id,
        thread.id,
        "worker",
    )
    assert (receipt.state, receipt.outcome, receipt.note) == (
        "acknowledged",
        "declined",
        "Not my area",
    )
    assert receipt.event_id and receipt.delivery_id and receipt.acknowledged_at is not None
    assert lead.wait(1, events="receipts").receipts == []  # each receipt is shown once

    page = lead.outbox()
    (item,) = page.items
    assert item.message.id == sent.message.id and page.next_cursor is None
    receipts = {r.recipient: r for r in item.receipts}
    assert receipts["worker"].fetched_at is not None and receipts["worker"].note == "Not my area"
    assert receipts["helper"].state == "accepted"
    assert [i.message.id for i in lead.outbox(state="acknowledged", thread=thread.id).items] == [
        sent.message.id
    ]
    assert lead.outbox(state="failed").items == [] and worker.outbox().items == []
    with pytest.raises(ValidationError) as bad:
        lead.outbox(state="lost")
    assert bad.value.field == "state"

    read = lead.read(sent.message.id)
    assert read.delivery is None and read.receipts is not None
    assert {r.recipient: r.outcome for r in read.receipts} == {"worker": "declined", "helper": None}
    mine = lead.history(thread.id).items[0]
    assert mine.receipts is not None and len(mine.receipts) == 2
    assert helper.history(thread.id).items[0].receipts is None


def test_an_agent_chooses_its_webhooks_notification_types(agent: NewAgent) -> None:
    me = agent("chooser")
    made = me.set_webhook("http://127.0.0.1:9/hook")
    assert made.webhook_events == ["message.created"]
    chosen = me.set_webhook(made.url, events=["message.acknowledged", "thread.closed"])
    assert chosen.webhook_events == ["message.acknowledged", "thread.closed"]
    assert me.set_webhook("http://127.0.0.1:9/moved").webhook_events == chosen.webhook_events
    with pytest.raises(ValidationError) as rejected:
        me.set_webhook(made.url, events=["message.deleted"])
    assert rejected.value.field == "webhook_events"
    assert "thread.close_requested" in str(rejected.value)


# Errors


def test_errors_map_to_their_types_with_code_and_field(
    api: Api, ops: Client, agent: NewAgent
) -> None:
    reviewer, implementer = agent("reviewer"), agent("implementer")
    thread = reviewer.open_thread("Errors", ["implementer"])

    with pytest.raises(NotFound) as missing:
        implementer.read("msg_doesnotexist")
    assert (missing.value.status, missing.value.code) == (404, "not_found")
    with pytest.raises(ValidationError) as long_body:
        reviewer.send(thread.id, "x" * 201)
    assert (long_body.value.status, long_body.value.code, long_body.value.field) == (
        422,
        "summary_required",
        "summary",
    )
    with pytest.raises(ValidationError) as bad_title:
        reviewer.open_thread("", ["implementer"])
    assert (bad_title.value.code, bad_title.value.field) == ("validation_error", "title")
    with pytest.raises(Conflict) as taken:
        ops.register_agent("reviewer")
    assert (taken.value.status, taken.value.code) == (409, "username_taken")
    reviewer.send(thread.id, "first", idempotency_key="same-key")
    with pytest.raises(Conflict) as reused:
        reviewer.send(thread.id, "a different body", idempotency_key="same-key")
    assert reused.value.code == "idempotency_key_reused"
    with pytest.raises(AuthError) as forbidden:
        reviewer.agents()
    assert (forbidden.value.status, forbidden.value.code) == (403, "forbidden")
    with Client(api.base_url, "agt_not-a-real-key") as stranger, pytest.raises(AuthError) as who:
        stranger.me()
    assert (who.value.status, who.value.code) == (401, "unauthorized")
    assert who.value.message  # the server's sentence

    # Refused before any request: nothing could be sent, or it could name nothing.
    with pytest.raises(ValidationError) as key:
        reviewer.send(thread.id, "hello", idempotency_key="has a space")
    assert key.value.field == "idempotency_key"
    with pytest.raises(NotFound):
        reviewer.thread("../agents")
    with pytest.raises(TypeError):
        reviewer.send(thread.id, "hello", to=["implementer"])


def test_an_unreachable_server_is_a_transport_error() -> None:
    client = Client(f"http://127.0.0.1:{free_port()}", "agt_x")
    with client, pytest.raises(TransportError) as refused:
        client.me()
    assert isinstance(refused.value, ConnectionError)
    assert not isinstance(refused.value, InbotsError) and "127.0.0.1" in str(refused.value)


def test_a_long_poll_is_allowed_its_wait_on_top_of_the_timeout(ops: Client, api: Api) -> None:
    key = ops.register_agent("sleeper").api_key
    with Client(api.base_url, key, timeout=0.5) as client:
        started = time.monotonic()
        assert client.wait(2).items == []
    assert time.monotonic() - started >= 1.9


def test_no_answer_in_time_is_a_timeout_that_says_the_call_may_have_happened() -> None:
    with (
        receiver(hang(2)) as silent,
        Client(silent.url, "agt_x", timeout=0.5) as client,
        pytest.raises(Timeout) as late,
    ):
        client.send("th_1", "hello", idempotency_key="k")
    assert isinstance(late.value, TimeoutError) and isinstance(late.value, TransportError)
    assert "may or may not" in str(late.value)


@pytest.mark.parametrize(
    ("status", "headers", "cls", "retry_after"),
    [
        (429, {"Retry-After": "7"}, RateLimited, 7.0),
        (503, {"Retry-After": "5"}, Unavailable, 5.0),
        (410, {}, InbotsError, None),
    ],
)
def test_limits_and_outages_carry_retry_after(
    status: int, headers: dict[str, str], cls: type[InbotsError], retry_after: float | None
) -> None:
    """Today's server answers 429 only at the dashboard's sign-in and 503 only while its
    database is down: a transport answers with the documented envelope instead."""
    envelope = {"error": {"code": "rate_limited", "message": "Slow down.", "field": None}}

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=envelope, headers=headers)

    client = Client("http://inbots.test", "agt_x", transport=httpx.MockTransport(answer))
    with client, pytest.raises(cls) as refused:
        client.me()
    assert type(refused.value) is cls
    assert (refused.value.status, refused.value.retry_after) == (status, retry_after)
    assert refused.value.message == "Slow down." and refused.value.field is None


def test_answers_that_are_not_inbots_answers_say_so() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/me":
            return httpx.Response(502, text="<html>Bad Gateway</html>")
        return httpx.Response(200, json={"unexpected": True})

    with Client("http://inbots.test", "agt_x", transport=httpx.MockTransport(answer)) as client:
        with pytest.raises(InbotsError) as proxy:
            client.me()
        assert (proxy.value.status, proxy.value.code) == (502, "http_502")
        assert "Bad Gateway" in proxy.value.message
        with pytest.raises(UnexpectedResponse):
            client.limits()


# The inbox iterator


def test_messages_yields_each_message_once_across_several_waits(
    api: Api, ops: Client, agent: NewAgent
) -> None:
    """Five messages wait before the iterator starts, more come while it long-polls. The
    reader acknowledges nothing: the iterator pages through what waits by cursor, then each
    long-poll answers only what is new, and each message comes out exactly once. (A wait of 2 s
    leaves a loaded machine time to send the second of each pair before a quiet wait ends it.)"""
    reader_key = ops.register_agent("reader").api_key
    sender = agent("sender")
    thread = sender.open_thread("Stream", ["reader"])
    sent = [sender.send(thread.id, f"before {i}").message.id for i in range(5)]

    def send_later(count: int) -> None:
        time.sleep(0.3)  # while the iterator's long-poll waits
        sent.extend(sender.send(thread.id, f"later {i}").message.id for i in range(count))

    counting = CountingTransport()
    got: list[str] = []
    later: list[threading.Thread] = []
    with Client(api.base_url, reader_key, transport=counting) as reader:
        for item in reader.messages(wait=2, limit=2, forever=False):
            got.append(item.message_id)
            if len(got) in (5, 7):
                later.append(threading.Thread(target=send_later, args=(2,)))
                later[-1].start()
    for t in later:
        t.join()

    assert got == sent and len(set(got)) == 9
    assert counting.paths.count("/v1/inbox/wait") >= 3, counting.paths
    assert "/v1/acks" not in counting.paths


def test_messages_with_bodies_and_acknowledging_as_it_goes(agent: NewAgent) -> None:
    sender, reader = agent("sender"), agent("reader")
    thread = sender.open_thread("Bodies", ["reader"])
    bodies = [f"body {i}" for i in range(3)]
    for body in bodies:
        sender.send(thread.id, body)
    seen = []
    for item in reader.messages(wait=1, limit=1, include_body=True, forever=False):
        seen.append(item.body)
        reader.acknowledge(item.delivery_id, "done")
    assert seen == bodies
    assert reader.inbox().waiting == 0


def test_async_messages_yields_mail_as_it_comes(
    api: Api, ops: Client, agent: NewAgent, server: ServerThread
) -> None:
    reader_key = ops.register_agent("reader").api_key
    sender = agent("sender")
    thread = sender.open_thread("Async stream", ["reader"])
    sent = [sender.send(thread.id, "waiting already").message.id]

    def send_while_it_waits() -> None:
        until_listening(server)
        sent.append(sender.send(thread.id, "came later").message.id)

    async def scenario() -> list[str]:
        got: list[str] = []
        async with AsyncClient(api.base_url, reader_key) as reader:
            async for item in reader.messages(wait=1, forever=False):
                got.append(item.message_id)
                if len(got) == 1:
                    threading.Thread(target=send_while_it_waits).start()
        return got

    got = asyncio.run(scenario())
    assert got == sent and len(got) == 2


# The docs


def run_tested_block(page: str, api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the Python block marked ``<!-- tested: … -->`` in ``page`` against the test server,
    as its reader would: the server's URL and the operator token in the environment."""
    text = (Path(__file__).resolve().parent.parent / page).read_text()
    marked = text.split("<!-- tested:", 1)[1]
    code = marked.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.setenv("INBOTS_URL", api.base_url)
    monkeypatch.setenv("INBOTS_OPERATOR_TOKEN", api.token)
    exec(compile(code, page, "exec"), {})


def test_the_first_session_in_the_docs_runs(
    api: Api, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_tested_block("docs/client.md", api, monkeypatch)
    out = capsys.readouterr().out
    assert "['accepted']" in out and "reviewer: Please review PR 12 before Friday." in out


def test_the_readme_walk_through_runs(
    api: Api, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_tested_block("README.md", api, monkeypatch)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("th_") and lines[0].endswith(" ['accepted']")
    assert lines[1:] == [
        "urgent from reviewer [PR-12]: Please review PR 12 before Friday.",
        "implementer acknowledged done Looks good",
    ]
    (receipt,) = api.ok("GET", "/deliveries", params={"thread": lines[0].split()[0]})["items"]
    assert (receipt["state"], receipt["outcome"]) == ("acknowledged", "done")


# Webhooks


def test_verify_a_real_notification_from_the_embedded_engine(
    ops: Client, agent: NewAgent, api: Api
) -> None:
    with receiver(always(204)) as hook:
        created = ops.register_agent("pusher", webhook_url=hook.url)
        assert created.webhook is not None
        secret = created.webhook.signing_secret
        sender = agent("sender")
        thread = sender.open_thread("Push me", ["pusher"])
        sent = sender.send(thread.id, "Wake up", summary="Wake up please", kind="question")
        (request,) = hook.wait_for(1)

    notification = verify(request.body, request.headers, secret)
    delivery_id = sent.deliveries[0].id
    assert notification["delivery_id"] == delivery_id
    assert notification["summary"] == "Wake up please" and "body" not in notification
    with pytest.raises(VerificationError):
        verify(request.body + b" ", request.headers, secret)
    with Client(api.base_url, created.api_key) as pusher:
        assert pusher.received(delivery_id).state == "delivered"
        assert pusher.read(delivery_id).message.body == "Wake up"


def test_an_agent_manages_its_own_webhook(agent: NewAgent) -> None:
    me = agent("hooked")
    assert me.webhook() is None
    made = me.set_webhook("http://127.0.0.1:9/hook")
    assert made.signing_secret.startswith("whsec_") and made.previous_secret_expires_at is None
    assert me.webhook() == made
    assert me.me().webhook_url == "http://127.0.0.1:9/hook"
    rotated = me.rotate_webhook()
    assert rotated.signing_secret != made.signing_secret
    assert rotated.previous_secret_expires_at is not None
    with pytest.raises(ValidationError) as rejected:
        me.set_webhook("ftp://example.com/hook")
    assert rejected.value.code == "webhook_url_rejected"
    me.remove_webhook()
    assert me.webhook() is None


# Inbots 1.1 against the real server: the inbox, read-and-acknowledge, priority, refs, direct send


def test_messages_pages_by_cursor_without_acknowledging(
    api: Api, ops: Client, agent: NewAgent
) -> None:
    reader_key = ops.register_agent("reader").api_key
    sender = agent("sender")
    thread = sender.open_thread("Paged", ["reader"])
    sent = [sender.send(thread.id, f"message {n}").message.id for n in range(5)]
    counting = CountingTransport()
    with Client(api.base_url, reader_key, transport=counting) as reader:
        got = [item.message_id for item in reader.messages(wait=1, limit=2, forever=False)]
        assert reader.inbox().waiting == 5
    assert got == sent
    assert counting.paths.count("/v1/inbox") == 3 + 1  # three pages, then the check above
    assert counting.paths.count("/v1/inbox/wait") == 1  # then one quiet wait ends it
    assert "/v1/acks" not in counting.paths


def test_messages_gets_bodies_with_the_page(api: Api, ops: Client, agent: NewAgent) -> None:
    reader_key = ops.register_agent("reader").api_key
    sender = agent("sender")
    thread = sender.open_thread("Bodies", ["reader"])
    for n in range(3):
        sender.send(thread.id, f"body {n}")
    counting = AsyncCountingTransport()

    async def scenario() -> list[str | None]:
        async with AsyncClient(api.base_url, reader_key, transport=counting) as client:
            return [i.body async for i in client.messages(wait=1, include_body=True, forever=False)]

    assert asyncio.run(scenario()) == ["body 0", "body 1", "body 2"]
    assert not [p for p in counting.paths if p.startswith("/v1/messages/")]  # no read per item


def test_inbox_pages_bodies_priority_and_refs(ops: Client, agent: NewAgent) -> None:
    sender, reader = agent("sender"), agent("reader")
    thread = sender.open_thread("Triage", ["reader"], ref="PR-12")
    assert thread.ref == "PR-12"
    first = sender.send(thread.id, "first", summary="First")
    loud = sender.send(thread.id, "now", priority="urgent")
    assert loud.message.priority == "urgent" and first.message.priority == "normal"
    third = sender.send(thread.id, "third")

    page = reader.inbox(1, include="body")
    (item,) = page.items
    assert (item.message_id, item.priority, item.thread_ref, item.body) == (
        loud.message.id,
        "urgent",
        "PR-12",
        "now",
    )
    assert item.state == "fetched" and page.next_cursor and page.more
    rest = reader.inbox(cursor=page.next_cursor)
    assert [i.message_id for i in rest.items] == [first.message.id, third.message.id]
    assert rest.next_cursor is None and rest.items[0].body is None
    assert [i.message_id for i in reader.inbox(priority="urgent").items] == [loud.message.id]
    since = reader.inbox(since=first.deliveries[0].id)
    assert [i.message_id for i in since.items] == [loud.message.id, third.message.id]
    when = reader.inbox(since=first.message.created_at)
    assert [i.message_id for i in when.items] == [loud.message.id, third.message.id]

    read = reader.read(first.deliveries[0].id, ack="declined", note="not mine")
    assert read.delivery is not None and read.delivery.outcome == "declined"
    assert read.delivery.note == "not mine" and read.delivery.state == "acknowledged"
    assert [i.message_id for i in reader.inbox(status="acked").items] == [first.message.id]
    assert len(reader.inbox(status="all").items) == 3 and reader.inbox().waiting == 2

    assert [t.id for t in reader.threads(ref="PR-12").items] == [thread.id]
    assert [t.id for t in reader.threads(query="triage").items] == [thread.id]
    assert reader.threads(query="%").items == []
    assert ops.limits().inbox_bodies_max == 20 and ops.limits().thread_ref_max == 128


def test_reading_with_ack_is_a_post_and_a_plain_read_a_get(
    api: Api, ops: Client, agent: NewAgent
) -> None:
    """Issue 25: acknowledging changes something, so the client never does it with a GET."""
    reader_key = ops.register_agent("reader").api_key
    sender = agent("sender")
    thread = sender.open_thread("Read", ["reader"])
    first, second = (sender.send(thread.id, f"message {n}") for n in (1, 2))
    counting = CountingTransport()
    with Client(api.base_url, reader_key, transport=counting) as reader:
        plain = reader.read(first.message.id)
        assert counting.last() == ("GET", f"/v1/messages/{first.message.id}", {}, None)
        delivery_id = second.deliveries[0].id
        acked = reader.read(delivery_id, ack="done", note="thanks")
        assert counting.last() == (
            "POST",
            f"/v1/messages/{delivery_id}/read",
            {},
            {"ack": "done", "note": "thanks"},
        )
    assert plain.delivery is not None and plain.delivery.state == "fetched"
    assert acked.delivery is not None and acked.delivery.state == "acknowledged"
    assert (acked.delivery.outcome, acked.delivery.note) == ("done", "thanks")


def test_send_to_usernames_opens_a_thread(ops: Client, agent: NewAgent) -> None:
    sender, reader = agent("sender"), agent("reader")
    agent("bystander")
    sent = sender.send(
        to=["reader"],
        body="Ship it",
        title="Release",
        ref="REL-3",
        priority="urgent",
        idempotency_key="rel-3",
    )
    assert sent.message.priority == "urgent" and not sent.duplicate
    assert [d.recipient for d in sent.deliveries] == ["reader"]
    thread = reader.thread(sent.message.thread_id)
    assert (thread.title, thread.ref, thread.opened_by) == ("Release", "REL-3", "sender")
    again = sender.send(
        to=["reader"],
        body="Ship it",
        title="Release",
        ref="REL-3",
        priority="urgent",
        idempotency_key="rel-3",
    )
    assert again.duplicate and again.message.id == sent.message.id
    assert not sent.reused_thread
    went_on = sender.send(to=["reader"], body="Shipped", ref="REL-3")
    assert went_on.reused_thread and went_on.message.thread_id == sent.message.thread_id
    with pytest.raises(Conflict) as reused:
        sender.send(to=["reader"], body="Other", idempotency_key="rel-3")
    assert reused.value.code == "idempotency_key_reused"

    everyone = sender.send(to=["*"], body="Freeze until Monday")
    assert sorted(d.recipient for d in everyone.deliveries) == ["bystander", "reader"]
    assert sorted(sender.open_thread("All", ["*"]).participants) == [
        "bystander",
        "reader",
        "sender",
    ]
    with pytest.raises(ValidationError) as alone:
        sender.open_thread("Alone", [])
    assert alone.value.field == "participants"


# What the calls send, as the server receives it


def test_the_calls_send_the_apis_paths_parameters_and_fields(api: Api, ops: Client) -> None:
    """The requests behind the answers the other tests read: each call's method, path, query
    parameters, body fields and headers, against the real server."""
    mine, theirs = CountingTransport(), CountingTransport()
    keys = {name: ops.register_agent(name).api_key for name in ("reviewer", "implementer")}
    with (
        Client(api.base_url, keys["reviewer"], transport=mine) as reviewer,
        Client(api.base_url, keys["implementer"], transport=theirs) as implementer,
    ):
        sent = reviewer.send(
            to=["implementer"],
            body="Ship it",
            title="Release",
            ref="REL-3",
            priority="urgent",
            idempotency_key="rel-3",
            ttl_seconds=3600,  # a field the client names no argument for is sent as given
        )
        assert (sent.message.priority, sent.message.ttl_seconds) == ("urgent", 3600)
        assert mine.last() == (
            "POST",
            "/v1/messages",
            {},
            {
                "to": ["implementer"],
                "title": "Release",
                "ref": "REL-3",
                "body": "Ship it",
                "priority": "urgent",
                "ttl_seconds": 3600,
            },
        )
        assert mine.requests[-1].headers["idempotency-key"] == "rel-3"
        thread_id = sent.message.thread_id

        woke = reviewer.wait(1, events="receipts")
        assert woke.items == [] and woke.receipts == []
        assert mine.last()[1:3] == ("/v1/inbox/wait", {"timeout": "1", "events": "receipts"})

        outbox = reviewer.outbox(state="accepted", thread=thread_id, limit=5)
        assert [i.message.id for i in outbox.items] == [sent.message.id]
        assert mine.last()[1:3] == (
            "/v1/outbox",
            {"state": "accepted", "thread": thread_id, "limit": "5"},
        )

        since = datetime.fromisoformat("2026-01-02T03:04:05+00:00")
        hits = reviewer.search("ship", sender="reviewer", since=since, limit=5)
        assert [h.message_id for h in hits.items] == [sent.message.id]
        assert mine.last()[1:3] == (
            "/v1/search",
            {
                "q": "ship",
                "sender": "reviewer",
                "since": "2026-01-02T03:04:05.000000Z",
                "limit": "5",
            },
        )

        assert reviewer.set_brief("# Me").brief == "# Me"
        assert mine.last() == ("PUT", "/v1/me/brief", {}, {"brief": "# Me"})
        assert implementer.brief("reviewer").updated_at is not None
        assert theirs.last()[:2] == ("GET", "/v1/agents/reviewer/brief")

        (item,) = implementer.inbox().items
        working = implementer.working(item.delivery_id, note="halfway")
        assert (working.state, working.working_note) == ("working", "halfway")
        assert theirs.last() == (
            "POST",
            f"/v1/deliveries/{item.delivery_id}/working",
            {},
            {"note": "halfway"},
        )
        (person,) = [e for e in implementer.directory() if e.kind == "person"]
        assert person.username == "operator"


def dumped(answer: object) -> object:
    """A client's answer as JSON: a model's dump, or a list's items as the API sends them."""
    if isinstance(answer, list):
        return {"items": [dumped(item) for item in answer]}
    assert isinstance(answer, pydantic.BaseModel)
    return answer.model_dump(mode="json", exclude_unset=True)


def shape(value: object) -> object:
    """The keys, in their order, at every depth: what two answers made apart share (their
    values differ: new keys and secrets, stamps that moved in between)."""
    if isinstance(value, dict):
        return [(key, shape(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [shape(item) for item in value]
    return "…"


def test_the_operators_calls_answer_the_servers_json(api: Api, ops: Client) -> None:
    """The operator's calls (what ``inbots`` prints with ``--output json``) beside the same call
    over plain HTTP: the same JSON key for key; for what is minted anew each time (keys,
    secrets, tokens) the same keys in the same order."""
    sender_raw, reader_raw = api.agent("sender"), api.agent("reader")
    thread_id = sender_raw.open_thread("Operated", ["reader"])["id"]
    sent = sender_raw.send(thread_id, "hello")
    delivery_id = sent["deliveries"][0]["id"]
    reader_raw.ok("POST", "/acks", json={"ids": [delivery_id], "outcome": "done", "note": "ok"})
    reader_raw.ok("GET", "/me", headers={"X-Inbots-Session": "laptop"})
    (event,) = api.ok("GET", "/events")["items"]
    hook = ops.set_agent_webhook("reader", "http://127.0.0.1:9/hook", events=["thread.closed"])
    assert hook.webhook_events == ["thread.closed"] and hook.signing_secret.startswith("whsec_")
    alerts = ops.set_alert_webhook("http://127.0.0.1:9/alerts", events=["delivery.failed"])
    assert alerts.events == ["delivery.failed"] and alerts.signing_secret
    made = ops.create_enrollment(uses=2, expires_in=600, label="farm")
    assert (made.uses, made.label) == (2, "farm") and made.token.startswith("enr_")
    assert ops.set_agent_brief("reader", "# Reader").brief == "# Reader"
    sender_raw.ok("POST", f"/threads/{thread_id}/close-request", 202)

    same = [
        (ops.agents(), api.ok("GET", "/agents")),
        (ops.agent("reader"), api.ok("GET", "/agents/reader")),
        (ops.agent_keys("reader"), api.ok("GET", "/agents/reader/keys")),
        (ops.agent_sessions("reader"), api.ok("GET", "/agents/reader/sessions")),
        (ops.brief("reader"), api.ok("GET", "/agents/reader/brief")),
        (ops.agent_webhook("reader"), api.ok("GET", "/agents/reader/webhook")),
        (ops.deliveries(), api.ok("GET", "/deliveries")),
        (
            ops.deliveries(state="acknowledged", agent="reader", thread=thread_id, limit=1),
            api.ok(
                "GET",
                "/deliveries",
                params={
                    "state": "acknowledged",
                    "agent": "reader",
                    "thread": thread_id,
                    "limit": 1,
                },
            ),
        ),
        (ops.events(), api.ok("GET", "/events")),
        (
            ops.events(type="message.acknowledged", agent="sender", limit=5),
            api.ok(
                "GET",
                "/events",
                params={"type": "message.acknowledged", "agent": "sender", "limit": 5},
            ),
        ),
        (ops.event(event["id"]), api.ok("GET", f"/events/{event['id']}")),
        (ops.alert_webhook(), api.ok("GET", "/operator/webhook")),
        (ops.enrollments(), api.ok("GET", "/enrollments")),
        (ops.approvals(), api.ok("GET", "/approvals")),
        (ops.policy(), api.ok("GET", "/policy")),
    ]
    for answer, expected in same:
        # json.dumps keeps the order keys came in: the same keys, in the server's order.
        assert json.dumps(dumped(answer)) == json.dumps(expected), type(answer).__name__
    policy = ops.set_policy(kinds=["decision"], priorities=["urgent"])
    rules = {"kinds": ["decision"], "priorities": ["urgent"], "senders": []}
    assert dumped(policy)["approval"] == rules
    assert json.dumps(dumped(policy)) == json.dumps(api.ok("GET", "/policy"))
    assert ops.set_policy().approval.kinds == []  # replaced whole: what is left out is emptied
    assert ops.dismiss_close_request(thread_id).status == "open"
    assert json.dumps(dumped(ops.thread(thread_id))) == json.dumps(
        api.ok("GET", f"/threads/{thread_id}")
    )

    with receiver(always(204)) as hook:
        ops.set_agent_webhook("reader", hook.url, events=["message.created"])
        ops.set_agent_webhook("sender", hook.url, events=["message.acknowledged"])
        minted = [
            (
                ops.issue_agent_key("reader", "ci"),
                api.ok("POST", "/agents/reader/keys", 201, json={"label": "x"}),
            ),
            (ops.rotate_agent_webhook("reader"), api.ok("POST", "/agents/reader/webhook/rotate")),
            (ops.rotate_alert_webhook(), api.ok("POST", "/operator/webhook/rotate")),
            (ops.create_token("ci"), api.ok("POST", "/tokens", 201, json={"label": "x"})),
            (ops.create_enrollment(), api.ok("POST", "/enrollments", 201, json={})),
            (
                ops.redeliver(delivery_id),
                api.ok("POST", f"/deliveries/{delivery_id}/redeliver", 202),
            ),
            (
                ops.redeliver_event(event["id"]),
                api.ok("POST", f"/events/{event['id']}/redeliver", 202),
            ),
            (ops.tokens(), api.ok("GET", "/tokens")),  # last_used_at moves with every call
            (ops.stats(), api.ok("GET", "/stats")),  # its times and ages move
        ]
        for answer, expected in minted:
            assert shape(dumped(answer)) == shape(expected), type(answer).__name__
        hook.wait_for(2)  # the delivery and the event, pushed again
    archived = ops.archive_agent("sender")  # idempotent: the second answer is the first
    assert json.dumps(dumped(archived)) == json.dumps(api.ok("POST", "/agents/sender/archive"))
    stats = ops.stats()
    assert stats.agents["total"] == 1 and stats.agents["archived"] == 1
    assert stats.deliveries["acknowledged"] == 1 and stats.threads["open"] == 1

    key = ops.issue_agent_key("reader")
    ops.revoke_agent_key("reader", key.id)
    assert key.id not in {k.id for k in ops.agent_keys("reader")}
    token = ops.create_token("spare")
    ops.revoke_token(token.id)
    assert next(t for t in ops.tokens() if t.id == token.id).revoked_at is not None
    ops.revoke_enrollment(made.id)
    assert next(e for e in ops.enrollments() if e.id == made.id).state == "revoked"
    ops.remove_agent_webhook("reader")
    with pytest.raises(NotFound):
        ops.agent_webhook("reader")
    ops.remove_alert_webhook()
    with pytest.raises(NotFound):
        ops.alert_webhook()
    with pytest.raises(Conflict):
        ops.dismiss_close_request(thread_id)


def test_models_keep_the_fields_they_do_not_declare() -> None:
    item = inbots.client.InboxItem.model_validate(
        {
            "delivery_id": "dlv_1",
            "message_id": "msg_1",
            "thread_id": "th_1",
            "thread_title": "t",
            "sender": "s",
            "kind": "task",
            "summary": "hi",
            "sent_at": "2026-11-29T19:47:51.977083Z",
            "state": "delivered",
            "held": True,
        }
    )
    assert item.model_extra == {"held": True} and item.priority == "normal"
    assert item.model_dump(mode="json")["sent_at"] == "2026-11-29T19:47:51.977083Z"


def test_clients_share_one_verifying_tls_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every client of a process uses one TLS context (building one parses the whole CA bundle),
    and sharing it keeps certificate and host name checks on. The webhook clients do the same."""
    import ssl

    import httpx._config
    import httpx._transports.default

    from inbots.config import load_settings
    from inbots.deliveries.attempt import make_client

    # httpx as shipped: the suite's conftest shares httpx's default context for its own clients.
    monkeypatch.setattr(
        httpx._transports.default, "create_ssl_context", httpx._config.create_ssl_context
    )

    def context_of(http: httpx.Client | httpx.AsyncClient | httpx.BaseTransport) -> ssl.SSLContext:
        transport = http if isinstance(http, httpx.BaseTransport) else http._transport
        return transport._pool._ssl_context  # type: ignore[union-attr,no-any-return]

    first, second = Client("https://inbots.test", "agt_x"), Client("https://other.test", "agt_y")
    async_client = AsyncClient("https://inbots.test", "agt_x")
    try:
        shared = context_of(first._http)
        assert context_of(second._http) is shared
        assert context_of(async_client._http) is shared
        assert shared.verify_mode == ssl.CERT_REQUIRED and shared.check_hostname
    finally:
        first.close()
        second.close()
        asyncio.run(async_client.aclose())
    settings = load_settings(database_url="sqlite://")
    hooks, more = make_client(settings), make_client(settings)
    try:
        assert context_of(hooks) is context_of(more)
        assert context_of(hooks).verify_mode == ssl.CERT_REQUIRED
        assert context_of(hooks).check_hostname
    finally:
        hooks.close()
        more.close()
