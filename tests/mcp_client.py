"""MCP test clients and the scenarios both transports must pass.

The clients are the official SDK's: over real Streamable HTTP (``{server}/mcp`` with an agent's
key), over stdio (a real ``inbots mcp`` subprocess, a relay to ``/mcp``), and through that relay
run in process (``over_bridge``). A scenario takes the workspace's operator (``Api``, plain HTTP,
for setup and for reading receipts) and ``connect``, which opens one agent's MCP session by key,
so ``test_mcp_http`` and ``test_mcp_stdio`` run the same checks.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client._transport import TransportStreams
from mcp.client.client import ConnectMode
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from mcp_types import CallToolResult, jsonrpc_message_adapter

from inbots.errors import CALLS
from inbots.mcp.stdio import Relay
from tests.helpers import Api
from tests.processes import inbots_executable

T = TypeVar("T")
STAMPS = (
    "accepted_at",
    "notified_at",
    "delivered_at",
    "fetched_at",
    "acknowledged_at",
    "failed_at",
    "stalled_at",
)


# A raw JSON-RPC `initialize`, and the Accept header /mcp wants, for tests that post by hand.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    """Run an async scenario from a plain (sync) test."""
    return anyio.run(scenario)


class Tools:
    """One agent's MCP session. ``call`` returns the raw result; ``ok`` insists on success and
    returns the structured content; ``error`` insists on a tool error and returns
    ``(code, text)``."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def call(self, name: str, **arguments: Any) -> CallToolResult:
        return await self.client.call_tool(name, arguments)

    async def ok(self, name: str, **arguments: Any) -> Any:
        result = await self.call(name, **arguments)
        assert not result.is_error, (name, text_of(result))
        assert isinstance(result.structured_content, dict), result
        assert text_of(result).strip(), "every result has a text rendering"
        return result.structured_content

    async def error(self, name: str, **arguments: Any) -> tuple[str, str]:
        result = await self.call(name, **arguments)
        assert result.is_error, (name, result.structured_content)
        assert isinstance(result.structured_content, dict), result
        error = result.structured_content["error"]
        assert error["message"] == text_of(result)
        # A tool error points to tools and arguments, never to the HTTP API's paths or headers.
        text = text_of(result)
        assert "/v1" not in text and "Idempotency-Key" not in text, (name, text)
        return error["code"], text


Connect = Callable[[str], AbstractAsyncContextManager[Tools]]


def text_of(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


@asynccontextmanager
async def over_http(
    base_url: str, key: str, mode: ConnectMode = "auto", headers: dict[str, str] | None = None
) -> AsyncIterator[Tools]:
    """A session on ``{base_url}/mcp`` with ``Authorization: Bearer {key}`` (and ``headers``)."""
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}", **(headers or {})},
        timeout=httpx2.Timeout(30.0, read=120.0),
    )
    transport = streamable_http_client(f"{base_url}/mcp", http_client=http)
    async with http, Client(transport, mode=mode) as client:
        yield Tools(client)


@asynccontextmanager
async def over_stdio(base_url: str, key: str, *options: str) -> AsyncIterator[Tools]:
    """A session with a real ``inbots mcp`` subprocess (with ``options``), relaying to
    ``{base_url}/mcp``."""
    params = StdioServerParameters(
        command=inbots_executable(),
        args=["mcp", *options],
        env={"INBOTS_URL": base_url, "INBOTS_API_KEY": key, "PYTHONUNBUFFERED": "1"},
        cwd=os.getcwd(),
    )
    async with Client(params) as client:
        yield Tools(client)


@asynccontextmanager
async def relayed(relay: Relay) -> AsyncIterator[TransportStreams]:
    """A client transport whose messages go through ``relay`` as ``inbots mcp`` sends them: each
    one a line of JSON, each answer read back from its line (as the SDK's stdio client does)."""
    to_client, from_relay = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_relay, from_client = anyio.create_memory_object_stream[SessionMessage](0)

    async def lines() -> AsyncIterator[bytes]:
        async with from_client:
            async for sent in from_client:
                yield sent.message.model_dump_json(by_alias=True, exclude_unset=True).encode()

    async def write(line: bytes) -> None:
        assert b"\n" not in line, "one message a line"
        message = jsonrpc_message_adapter.validate_json(line, by_name=False)
        await to_client.send(SessionMessage(message))

    async def serve() -> None:
        async with to_client:
            await relay.serve(lines(), write)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(serve)
        try:
            yield from_relay, to_relay
        finally:
            await to_relay.aclose()  # the client is done: stdin closes


@asynccontextmanager
async def over_bridge(
    base_url: str, key: str, mode: ConnectMode = "legacy"
) -> AsyncIterator[Tools]:
    """A session through the relay ``inbots mcp`` runs (:class:`inbots.mcp.stdio.Relay`), in this
    process, posting to ``{base_url}/mcp``: the official client on a transport that hands it each
    message as a line of JSON and reads each answer back from its line. Everything ``inbots mcp``
    runs but the process and its stdin/stdout, which ``over_stdio`` keeps: the stdio tests use
    this where they check what the relay answers, and the subprocess where they check the command
    (start-up, environment, errors). ``legacy`` (the initialize handshake and the
    ``Mcp-Session-Id`` the relay carries) by default; ``over_stdio`` lets the client choose,
    which is the per-request protocol. It saves the second of CPU each subprocess spends
    starting."""
    async with (
        Relay(base_url, key, "stdio") as relay,
        Client(relayed(relay), mode=mode) as client,
    ):
        yield Tools(client)


def http_error(response: Any) -> tuple[str, str]:
    """The HTTP API's ``(code, message)`` for a rejected call."""
    assert response.status_code >= 400, (response.status_code, response.text)
    error = response.json()["error"]
    return error["code"], error["message"]


def as_tools_say(refusal: tuple[str, str]) -> tuple[str, str]:
    """An HTTP refusal ``(code, message)`` as the tools say it: the same sentence, with each
    call it points to (a path, a header) named as the tools name it (``inbots.errors.CALLS``)."""
    code, message = refusal
    for call in sorted(CALLS, key=lambda c: len(c.http), reverse=True):
        message = message.replace(call.http, call.tool)
    return code, message


def stamps_of(api: Api, delivery_id: str) -> tuple[str, set[str]]:
    receipt = api.delivery(delivery_id)
    return receipt["state"], {name for name in STAMPS if receipt[name] is not None}


async def wait_until(probe: Callable[[], bool], limit: float = 10.0) -> None:
    deadline = time.monotonic() + limit
    while not probe():
        assert time.monotonic() < deadline, "condition not reached in time"
        await anyio.sleep(0.01)


# Scenarios.


async def exchange(api: Api, connect: Connect) -> None:
    """Two agents: open a thread, send, check, read, reply, acknowledge, read the history."""
    reviewer = api.agent("reviewer", "Reviews schema changes")
    implementer = api.agent("implementer", "Writes migrations")
    async with connect(reviewer.token) as r, connect(implementer.token) as i:
        me = await r.ok("whoami")
        assert me["username"] == "reviewer" and me["description"] == "Reviews schema changes"
        assert me["webhook_url"] is None and me["unread"] == 0
        directory = await r.ok("list_agents")
        assert [a["username"] for a in directory["items"]] == ["implementer", "operator"]
        assert directory["items"][0]["description"] == "Writes migrations"
        assert (await r.ok("list_threads")) == {"items": []}

        thread = await r.ok(
            "open_thread",
            title="Review the schema migration",
            goal="Migration merged",
            participants=["implementer"],
        )
        assert thread["status"] == "open" and thread["opened_by"] == "reviewer"
        assert sorted(thread["participants"]) == ["implementer", "reviewer"]
        listed = await i.ok("list_threads")
        assert [t["id"] for t in listed["items"]] == [thread["id"]]

        sent = await r.ok(
            "send_message",
            thread_id=thread["id"],
            body="Please review PR 12",
            kind="task",
            summary="Review PR 12",
        )
        assert sent["duplicate"] is False
        assert [(d["recipient"], d["state"]) for d in sent["deliveries"]] == [
            ("implementer", "accepted")
        ]
        delivery_id = sent["deliveries"][0]["id"]

        inbox = await i.ok("check_inbox")
        (item,) = inbox["items"]
        assert item["delivery_id"] == delivery_id
        assert item["message_id"] == sent["message"]["id"] and item["thread_id"] == thread["id"]
        assert item["sender"] == "reviewer" and item["kind"] == "task"
        assert item["summary"] == "Review PR 12" and item["state"] == "delivered"
        assert item["thread_title"] == "Review the schema migration"
        assert (inbox["returned"], inbox["waiting"], inbox["more"]) == (1, 1, False)
        assert stamps_of(api, delivery_id) == ("delivered", {"accepted_at", "delivered_at"})

        read = await i.ok("read_message", id=item["message_id"])
        assert read["message"]["body"] == "Please review PR 12"
        assert read["delivery"]["id"] == delivery_id and read["delivery"]["state"] == "fetched"

        reply = await i.ok(
            "send_message",
            thread_id=thread["id"],
            body="Looks good, merged.",
            kind="decision",
            reply_to=item["message_id"],
        )
        acked = await i.ok("acknowledge", ids=[delivery_id], outcome="done", note="Reviewed")
        assert acked == {"acknowledged": [delivery_id], "already": [], "not_found": []}
        again = await i.ok("acknowledge", ids=[delivery_id])
        assert again == {"acknowledged": [], "already": [delivery_id], "not_found": []}
        assert (await i.ok("check_inbox"))["items"] == []

        answer = await r.ok("check_inbox")
        assert [x["message_id"] for x in answer["items"]] == [reply["message"]["id"]]
        history = await r.ok("read_thread", thread_id=thread["id"])
        assert [m["body"] for m in history["items"]] == [
            "Please review PR 12",
            "Looks good, merged.",
        ]
        assert history["items"][1]["reply_to"] == sent["message"]["id"]
        assert history["next_cursor"] is None
        await r.ok("acknowledge", ids=[reply["message"]["id"]], outcome="done")

        closing = await r.ok("request_close", thread_id=thread["id"])
        assert closing["status"] == "close_requested"

    receipt = api.delivery(delivery_id)
    assert receipt["state"] == "acknowledged"
    assert (receipt["outcome"], receipt["note"]) == ("done", "Reviewed")
    assert stamps_of(api, reply["deliveries"][0]["id"]) == (
        "acknowledged",
        {"accepted_at", "delivered_at", "fetched_at", "acknowledged_at"},
    )
    assert api.ok("GET", "/agents/implementer")["last_seen_at"] is not None


async def send_message_errors(api: Api, connect: Connect) -> None:
    """Every rejection of send_message is a tool error with the HTTP API's code and sentence
    (worded for the tools where it points to another call), and stores nothing."""
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("Main task", ["bob"])
    other = alice.open_thread("Another task", ["bob"])
    elsewhere = alice.send(other["id"], "in the other thread")["message"]["id"]
    api.agent("carl")
    alone = alice.open_thread("Just me", ["carl"])
    api.ok("POST", "/agents/carl/archive")
    pending = alice.open_thread("Winding down", ["bob"])
    alice.ok("POST", f"/threads/{pending['id']}/close-request", 202)
    first = alice.send(thread["id"], "first", headers={"Idempotency-Key": "key-1"})

    main = thread["id"]
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("unknown thread", {"thread_id": "th_0000000000000000000000000", "body": "hi"}, ""),
        ("thread not open", {"thread_id": pending["id"], "body": "hi"}, "thread_not_open"),
        ("no recipients", {"thread_id": alone["id"], "body": "hi"}, "no_recipients"),
        ("summary required", {"thread_id": main, "body": "x" * 201}, "summary_required"),
        ("body too long", {"thread_id": main, "body": "y" * 10_001, "summary": "s"}, ""),
        ("empty body", {"thread_id": main, "body": "   "}, ""),
        ("bad kind", {"thread_id": main, "body": "hi", "kind": "shout"}, ""),
        ("summary two lines", {"thread_id": main, "body": "hi", "summary": "a\nb"}, ""),
        ("reply_to elsewhere", {"thread_id": main, "body": "hi", "reply_to": elsewhere}, ""),
        ("reply_to unknown", {"thread_id": main, "body": "hi", "reply_to": "msg_nope"}, ""),
        (
            "idempotency key reused",
            {"thread_id": main, "body": "second", "idempotency_key": "key-1"},
            "idempotency_key_reused",
        ),
        ("bad idempotency key", {"thread_id": main, "body": "hi", "idempotency_key": "a b"}, ""),
    ]
    expected_codes = {
        "unknown thread": "not_found",
        "body too long": "validation_error",
        "empty body": "validation_error",
        "bad kind": "validation_error",
        "summary two lines": "validation_error",
        "reply_to elsewhere": "validation_error",
        "reply_to unknown": "validation_error",
        "bad idempotency key": "validation_error",
    }
    async with connect(alice.token) as a:
        for name, args, code in cases:
            body = {k: v for k, v in args.items() if k not in ("thread_id", "idempotency_key")}
            headers = (
                {"Idempotency-Key": args["idempotency_key"]} if "idempotency_key" in args else {}
            )
            over_http = http_error(
                alice.post(f"/threads/{args['thread_id']}/messages", json=body, headers=headers)
            )
            assert over_http[0] == (code or expected_codes[name]), (name, over_http)
            assert await a.error("send_message", **args) == as_tools_say(over_http), name

        # The same key with the same content is the original, not a second message.
        again = await a.ok("send_message", thread_id=main, body="first", idempotency_key="key-1")
        assert again["duplicate"] is True
        assert again["message"]["id"] == first["message"]["id"]
        assert [d["id"] for d in again["deliveries"]] == [d["id"] for d in first["deliveries"]]

    history = alice.ok("GET", f"/threads/{main}/messages")["items"]
    assert [m["body"] for m in history] == ["first"]  # no rejected send stored anything
    assert alice.ok("GET", f"/threads/{alone['id']}/messages")["items"] == []
    assert alice.ok("GET", f"/threads/{pending['id']}/messages")["items"] == []


async def every_send_field_arrives(api: Api, connect: Connect) -> None:
    """Every field of send_message reaches the server as given, in both forms (a thread; ``to``
    with a new thread's title and ref): ``inbots mcp`` once dropped ``ttl_seconds``."""
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("Main task", ["bob"])["id"]
    first = alice.send(thread, "first")["message"]["id"]
    fields = {
        "body": "the body",
        "summary": "the summary",
        "kind": "question",
        "priority": "urgent",
        "ttl_seconds": 3_600,
    }
    async with connect(alice.token) as a:
        posted = await a.ok("send_message", thread_id=thread, reply_to=first, **fields)
        direct = await a.ok("send_message", to=["bob"], title="New", ref="T-9", **fields)
    for sent in (posted, direct):
        message = alice.ok("GET", f"/messages/{sent['message']['id']}")["message"]
        assert {k: message[k] for k in fields} == fields, message
        assert message["expires_at"] is not None, message
    assert alice.ok("GET", f"/messages/{posted['message']['id']}")["message"]["reply_to"] == first
    opened = alice.ok("GET", f"/threads/{direct['message']['thread_id']}")
    assert (opened["title"], opened["ref"]) == ("New", "T-9"), opened


async def isolation(api: Api, connect: Connect) -> None:
    """An agent outside a thread gets not found for its ids, through every tool, and the HTTP
    API's sentence worded for the tools; nothing of the thread's receipts moves."""
    alice = api.agent("alice")
    bob = api.agent("bob")
    eve = api.agent("eve")
    thread = alice.open_thread("Private", ["bob"])
    sent = alice.send(thread["id"], "for bob only", kind="task")
    message_id, delivery_id = sent["message"]["id"], sent["deliveries"][0]["id"]
    tid = thread["id"]

    async with connect(eve.token) as e:
        assert (await e.ok("list_threads"))["items"] == []
        assert (await e.ok("check_inbox"))["items"] == []
        for ident in (message_id, delivery_id):
            expected = http_error(eve.get(f"/messages/{ident}"))
            assert expected[0] == "not_found"
            assert await e.error("read_message", id=ident) == as_tools_say(expected)
        expected = http_error(eve.get(f"/threads/{tid}/messages"))
        assert await e.error("read_thread", thread_id=tid) == as_tools_say(expected)
        expected = http_error(eve.post(f"/threads/{tid}/messages", json={"body": "hi"}))
        assert await e.error("send_message", thread_id=tid, body="hi") == as_tools_say(expected)
        expected = http_error(eve.post(f"/threads/{tid}/participants", json={"username": "eve"}))
        said = await e.error("add_participant", thread_id=tid, username="eve")
        assert said == as_tools_say(expected)
        expected = http_error(eve.post(f"/threads/{tid}/close-request"))
        assert await e.error("request_close", thread_id=tid) == as_tools_say(expected)
        acked = await e.ok("acknowledge", ids=[delivery_id, message_id], outcome="done")
        assert acked == {"acknowledged": [], "already": [], "not_found": [delivery_id, message_id]}
        # The answer for a real foreign id reads exactly like the one for a made-up id.
        made_up = "th_" + "0" * (len(tid) - 3)
        _, foreign = await e.error("read_thread", thread_id=tid)
        _, invented = await e.error("read_thread", thread_id=made_up)
        assert foreign.replace(tid, "ID") == invented.replace(made_up, "ID")

    assert stamps_of(api, delivery_id) == ("accepted", {"accepted_at"})
    assert bob.inbox()["waiting"] == 1


async def more_waiting(api: Api, connect: Connect) -> None:
    """check_inbox lists at most ``limit``, says in words how many more are waiting, and pages
    on with its cursor: nothing needs acknowledging to see what is behind a page."""
    sender = api.agent("sender")
    reader = api.agent("reader")
    thread = sender.open_thread("Many things", ["reader"])
    sent = [sender.send(thread["id"], f"item {n}")["deliveries"][0]["id"] for n in range(5)]

    async with connect(reader.token) as r:
        result = await r.call("check_inbox", limit=2)
        inbox = result.structured_content
        assert inbox is not None and not result.is_error
        assert [i["delivery_id"] for i in inbox["items"]] == sent[:2]
        assert (inbox["returned"], inbox["waiting"], inbox["more"]) == (2, 5, True)
        cursor = inbox["next_cursor"]
        sentence = (
            f'3 more messages are waiting: to see the next page, call check_inbox with cursor "'
            f'{cursor}" (and the same other arguments). You do not need to acknowledge anything '
            "to see it; acknowledge each message only once you have finished with it."
        )
        assert inbox["notice"] == sentence
        assert sentence in text_of(result)
        assert "after acknowledging" not in text_of(result)

        again = await r.ok("check_inbox", limit=2)  # listing marks nothing: the same two
        assert [i["delivery_id"] for i in again["items"]] == sent[:2]
        page = await r.ok("check_inbox", limit=2, cursor=cursor)
        assert [i["delivery_id"] for i in page["items"]] == sent[2:4]
        assert page["notice"].startswith("More mail follows: to see the next page, call ")
        last = await r.ok("check_inbox", limit=2, cursor=page["next_cursor"])
        assert [i["delivery_id"] for i in last["items"]] == sent[4:]
        assert last["next_cursor"] is None and last["more"] is False
        assert last["notice"] == "That is the last page. 5 unacknowledged messages in all."

        await r.ok("acknowledge", ids=sent[:2], outcome="done")
        await r.ok("acknowledge", ids=sent[2:4], outcome="declined", note="not mine")
        rest = await r.ok("check_inbox")
        assert [i["delivery_id"] for i in rest["items"]] == sent[4:]
        assert (rest["more"], rest["notice"]) == (False, "That is everything waiting for you.")
        await r.ok("acknowledge", ids=sent[4:])
        empty = await r.call("check_inbox")
        assert empty.structured_content == {
            "items": [],
            "returned": 0,
            "waiting": 0,
            "more": False,
            "next_cursor": None,
            "notice": "Your inbox is empty: no unacknowledged mail.",
        }
        assert text_of(empty) == "Your inbox is empty: no unacknowledged mail."

    for delivery_id in sent:  # listing stamped delivered, never fetched
        state, stamps = stamps_of(api, delivery_id)
        assert state == "acknowledged" and "fetched_at" not in stamps


async def default_limit(api: Api, connect: Connect) -> None:
    """Without a limit, or with one outside 1–50, check_inbox lists 20."""
    sender = api.agent("sender")
    reader = api.agent("reader")
    thread = sender.open_thread("A pile", ["reader"])
    for n in range(22):
        sender.send(thread["id"], f"item {n}")
    async with connect(reader.token) as r:
        for limit in (None, 0, 51, 500):
            args = {} if limit is None else {"limit": limit}
            inbox = await r.ok("check_inbox", **args)
            assert (inbox["returned"], inbox["waiting"], inbox["more"]) == (20, 22, True), limit
            assert inbox["notice"].startswith("2 more messages are waiting")
        assert (await r.ok("check_inbox", limit=50))["returned"] == 22


async def wait_wakes_on_send(api: Api, connect: Connect, listening: Callable[[], bool]) -> float:
    """wait_for_mail answers within a second of a send; returns how long after it did.
    ``listening`` says when the wait is surely in place (the server's hub has a listener)."""
    sender = api.agent("sender")
    reader = api.agent("reader")
    thread = sender.open_thread("Watch the build", ["reader"])
    outcome: dict[str, Any] = {}

    async with connect(reader.token) as r:

        async def wait() -> None:
            outcome["result"] = await r.ok("wait_for_mail", timeout_seconds=20)
            outcome["at"] = time.monotonic()

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await wait_until(listening)
            await anyio.sleep(0.2)
            assert "result" not in outcome, "the wait returned before any mail was sent"
            send_started = time.monotonic()
            sent = await anyio.to_thread.run_sync(
                lambda: sender.send(thread["id"], "build is green", kind="update")
            )

    woke_after = outcome["at"] - send_started
    # Woken by the send (its request included), far from the wait's timeout; well under a
    # second on a quiet machine, allowed a few under a loaded test run.
    assert woke_after < 3.0, woke_after
    inbox = outcome["result"]
    (item,) = inbox["items"]
    assert item["message_id"] == sent["message"]["id"] and item["state"] == "delivered"
    assert (inbox["returned"], inbox["waiting"], inbox["more"]) == (1, 1, False)
    assert inbox["notice"] == "That is everything waiting for you."
    return woke_after


async def wait_times_out(api: Api, connect: Connect) -> None:
    reader = api.agent("reader")
    async with connect(reader.token) as r:
        started = time.monotonic()
        inbox = await r.ok("wait_for_mail", timeout_seconds=1)
        elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 4.0, elapsed
    assert inbox["items"] == [] and inbox["waiting"] == 0
    assert inbox["notice"] == "Your inbox is empty: no unacknowledged mail."


async def wait_answers_new_mail_behind_shown(api: Api, connect: Connect) -> None:
    """A full page of mail already shown does not hide the new message from wait_for_mail."""
    sender, reader = api.agent("sender"), api.agent("reader")
    thread = sender.open_thread("Busy", ["reader"])["id"]
    for i in range(50):
        sender.send(thread, f"older {i}")
    assert reader.inbox()["returned"] == 50  # all shown
    new = sender.send(thread, "the new one")["message"]["id"]
    async with connect(reader.token) as r:
        inbox = await r.ok("wait_for_mail", timeout_seconds=5)
        assert [i["message_id"] for i in inbox["items"]] == [new]
        assert inbox["waiting"] == 51
        started = time.monotonic()
        again = await r.ok("wait_for_mail", timeout_seconds=1)
        assert time.monotonic() - started >= 0.9 and again["items"] == []


async def same_stamps_as_http(api: Api, connect: Connect) -> None:
    """One message, two recipients: bob takes each step over HTTP, carol the same step through
    the tools; after every step their receipts carry the same stamps."""
    alice = api.agent("alice")
    bob = api.agent("bob")
    carol = api.agent("carol")
    thread = alice.open_thread("Stamps", ["bob", "carol"])
    sent = alice.send(thread["id"], "first", kind="task")
    by = {d["recipient"]: d["id"] for d in sent["deliveries"]}
    message_id = sent["message"]["id"]

    def same(step: str, expected: str) -> None:
        over_http, over_mcp = stamps_of(api, by["bob"]), stamps_of(api, by["carol"])
        assert over_http == over_mcp, (step, over_http, over_mcp)
        assert over_http[0] == expected, (step, over_http)

    same("sent", "accepted")
    async with connect(carol.token) as c:
        listed_http = bob.inbox()
        listed_mcp = await c.ok("check_inbox")
        assert [set(i) for i in listed_http["items"]] == [set(i) for i in listed_mcp["items"]]
        same("listed", "delivered")

        read_http = bob.ok("GET", f"/messages/{message_id}")
        read_mcp = await c.ok("read_message", id=message_id)
        assert read_http["message"] == read_mcp["message"]
        assert set(read_http["delivery"]) == set(read_mcp["delivery"])
        same("read", "fetched")

        ack = {"outcome": "declined", "note": "Out of scope for me"}
        bob.ok("POST", "/acks", json={"ids": [by["bob"]], **ack})
        await c.ok("acknowledge", ids=[by["carol"]], **ack)
        same("acknowledged", "acknowledged")
        for name in ("bob", "carol"):
            receipt = api.delivery(by[name])
            assert (receipt["outcome"], receipt["note"]) == ("declined", "Out of scope for me")

        # The long-poll stamps delivered; reading the history stamps fetched.
        second = alice.send(thread["id"], "second")
        by = {d["recipient"]: d["id"] for d in second["deliveries"]}
        waited_http = bob.ok("GET", "/inbox/wait", params={"timeout": "5"})
        waited_mcp = await c.ok("wait_for_mail", timeout_seconds=5)
        assert [i["delivery_id"] for i in waited_http["items"]] == [by["bob"]]
        assert [i["delivery_id"] for i in waited_mcp["items"]] == [by["carol"]]
        same("waited", "delivered")
        history_http = bob.ok("GET", f"/threads/{thread['id']}/messages")
        history_mcp = await c.ok("read_thread", thread_id=thread["id"])
        assert history_http == history_mcp
        same("history", "fetched")


async def other_workspace_sees_nothing(api: Api, other_api: Api, connect: Connect) -> None:
    """An agent of a second workspace sees nothing of the first through any tool."""
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("First workspace only", ["bob"])
    sent = alice.send(thread["id"], "secret plans", kind="task")
    message_id, delivery_id = sent["message"]["id"], sent["deliveries"][0]["id"]
    tid = thread["id"]
    mallory = other_api.agent("mallory")

    async with connect(mallory.token) as m:
        assert (await m.ok("whoami"))["username"] == "mallory"
        listed = (await m.ok("list_agents"))["items"]
        assert [(a["username"], a["kind"]) for a in listed] == [("operator", "person")]
        assert (await m.ok("list_agents", query="bob"))["items"] == []
        assert (await m.ok("list_threads"))["items"] == []
        assert (await m.ok("check_inbox"))["items"] == []
        waited = await m.ok("wait_for_mail", timeout_seconds=1)
        assert waited["items"] == [] and waited["waiting"] == 0
        code, _ = await m.error("open_thread", title="Reach over", participants=["bob"])
        assert code == "validation_error"  # no such username here
        for tool, args in (
            ("read_thread", {"thread_id": tid}),
            ("send_message", {"thread_id": tid, "body": "hello?"}),
            ("add_participant", {"thread_id": tid, "username": "mallory"}),
            ("request_close", {"thread_id": tid}),
            ("read_message", {"id": message_id}),
            ("read_message", {"id": delivery_id}),
        ):
            code, text = await m.error(tool, **args)
            assert code == "not_found" and "is visible to you" in text, (tool, text)
        acked = await m.ok("acknowledge", ids=[delivery_id, message_id])
        assert acked["not_found"] == [delivery_id, message_id]

    assert stamps_of(api, delivery_id) == ("accepted", {"accepted_at"})


async def own_keys_and_sessions(api: Api, connect: Connect) -> None:
    """``list_keys`` and ``list_sessions`` answer what ``GET /v1/me/keys`` and ``/v1/me/sessions``
    do, for the caller alone, and never show a key itself."""
    alice = api.agent("alice")
    bob = api.agent("bob")
    laptop = alice.ok("POST", "/me/keys", 201, json={"label": "laptop"})
    async with connect(alice.token) as c:
        keys = await c.ok("list_keys")
        listed = alice.ok("GET", "/me/keys")["items"]
        assert [k["id"] for k in keys["items"]] == [k["id"] for k in listed]
        assert laptop["id"] in [k["id"] for k in keys["items"]]
        assert [k["current"] for k in keys["items"]].count(True) == 1
        assert {k["label"] for k in keys["items"]} >= {"laptop"}
        shown = str(keys) + text_of(await c.call("list_keys"))
        assert alice.token not in shown and laptop["api_key"] not in shown
        await c.ok("whoami")  # this session is seen by now
        sessions = await c.ok("list_sessions")
        over_http_too = alice.ok("GET", "/me/sessions")["items"]
        assert [s["id"] for s in sessions["items"]] == [s["id"] for s in over_http_too]
        assert any(s["active"] for s in sessions["items"]), sessions
        assert text_of(await c.call("list_sessions")).startswith("Your sessions")
    async with connect(bob.token) as c:
        theirs = await c.ok("list_keys")
        assert laptop["id"] not in [k["id"] for k in theirs["items"]]
        assert [k["id"] for k in theirs["items"]] == [
            k["id"] for k in bob.ok("GET", "/me/keys")["items"]
        ]


async def inbox_paging_and_bodies(api: Api, connect: Connect) -> None:
    """Inbots 1.1's check_inbox: bodies in the listing (at most 20), urgent first, the cursor
    pages on without acknowledging, acknowledged mail listed again, urgent only; and
    read_message that acknowledges in the same call."""
    sender, reader = api.agent("sender"), api.agent("reader")
    thread = sender.open_thread("Backlog", ["reader"], ref="OPS-1")["id"]
    sent = [sender.send(thread, f"body {n}") for n in range(24)]
    urgent = sender.send(thread, "urgent body", priority="urgent", summary="Now please")
    order = [urgent, *sent]

    async with connect(reader.token) as r:
        result = await r.call("check_inbox", include_bodies=True, limit=50)
        first = result.structured_content
        assert first is not None and not result.is_error
        assert (first["returned"], first["waiting"], first["more"]) == (20, 25, True)
        assert [i["message_id"] for i in first["items"]] == [s["message"]["id"] for s in order[:20]]
        top = first["items"][0]
        assert (top["priority"], top["thread_ref"], top["body"]) == (
            "urgent",
            "OPS-1",
            "urgent body",
        )
        assert [i["body"] for i in first["items"][1:3]] == ["body 0", "body 1"]
        assert first["next_cursor"] and first["next_cursor"] in first["notice"]
        text = text_of(result)
        assert "URGENT [update] from sender" in text and "urgent body" in text
        assert "[ref OPS-1]" in text and "after acknowledging" not in text

        rest = await r.ok("check_inbox", include_bodies=True, cursor=first["next_cursor"])
        assert [i["message_id"] for i in rest["items"]] == [s["message"]["id"] for s in order[20:]]
        assert rest["next_cursor"] is None and rest["waiting"] == 25
        assert stamps_of(api, order[24]["deliveries"][0]["id"])[0] == "fetched"

        only = await r.ok("check_inbox", urgent_only=True)
        assert [i["message_id"] for i in only["items"]] == [urgent["message"]["id"]]
        assert "body" not in only["items"][0]

        code, text = await r.error("read_message", id=urgent["message"]["id"], note="seen")
        assert code == "validation_error" and "note goes with" in text, text
        read = await r.call("read_message", id=urgent["message"]["id"], acknowledge="done")
        content = read.structured_content
        assert content is not None and not read.is_error
        assert content["message"]["priority"] == "urgent"
        assert content["delivery"]["state"] == "acknowledged"
        assert "is acknowledged (done)" in text_of(read)
        declined = await r.ok(
            "read_message", id=sent[0]["deliveries"][0]["id"], acknowledge="declined", note="dup"
        )
        assert (declined["delivery"]["outcome"], declined["delivery"]["note"]) == (
            "declined",
            "dup",
        )
        acked = await r.ok("check_inbox", status="acked")
        assert [i["message_id"] for i in acked["items"]] == [
            urgent["message"]["id"],
            sent[0]["message"]["id"],
        ]
        assert acked["waiting"] == 23
        everything = await r.ok("check_inbox", status="all", limit=50)
        assert everything["returned"] == 25

    receipt = api.delivery(urgent["deliveries"][0]["id"])
    assert receipt["outcome"] == "done" and receipt["fetched_at"] and receipt["acknowledged_at"]


async def direct_send_and_refs(api: Api, connect: Connect) -> None:
    """send_message with to opens a thread (with a ref, the open thread of the same people and
    ref goes on); list_threads finds threads by ref and by words; open_thread with nobody else is
    refused at once; "*" reaches every agent."""
    alice, bob = api.agent("alice"), api.agent("bob")
    api.agent("carol")
    async with connect(alice.token) as a, connect(bob.token) as b:
        sent = await a.ok(
            "send_message",
            to=["bob"],
            title="Rotate the keys",
            ref="SEC-9",
            body="Please rotate the staging keys today.",
            summary="Rotate staging keys",
            kind="task",
            priority="urgent",
        )
        thread_id = sent["message"]["thread_id"]
        assert [d["recipient"] for d in sent["deliveries"]] == ["bob"]
        assert sent["message"]["priority"] == "urgent"
        found = await b.ok("list_threads", ref="SEC-9")
        assert [(t["id"], t["title"], t["ref"]) for t in found["items"]] == [
            (thread_id, "Rotate the keys", "SEC-9")
        ]
        assert (await b.ok("list_threads", query="ROTATE"))["items"][0]["id"] == thread_id
        assert (await b.ok("list_threads", query="%"))["items"] == []
        assert (await b.ok("list_threads", ref="SEC-1"))["items"] == []
        # The same people and ref: the task goes on in its open thread, and the answer says so.
        went_on = await a.call("send_message", to=["bob"], ref="SEC-9", body="Done with staging?")
        assert went_on.structured_content is not None
        assert went_on.structured_content["reused_thread"] is True
        assert went_on.structured_content["message"]["thread_id"] == thread_id
        assert "the open thread of these people with this ref" in text_of(went_on)
        assert "reused_thread" not in sent and "the open thread" not in text_of(
            await a.call("send_message", to=["bob", "carol"], ref="SEC-9", body="More people")
        )

        code, text = await a.error("open_thread", title="Alone", participants=[])
        assert code == "validation_error" and "at least one agent other than you" in text
        everyone = await a.ok("open_thread", title="All hands", participants=["*"], ref="ALL")
        assert sorted(everyone["participants"]) == ["alice", "bob", "carol"]
        assert everyone["ref"] == "ALL"
        blast = await a.ok("send_message", to=["*"], body="Deploy freeze until Monday")
        assert sorted(d["recipient"] for d in blast["deliveries"]) == ["bob", "carol"]

        again = await a.ok(
            "send_message", to=["bob"], body="once", idempotency_key="once-1", ref="R-1"
        )
        repeat = await a.ok(
            "send_message", to=["bob"], body="once", idempotency_key="once-1", ref="R-1"
        )
        assert repeat["duplicate"] is True and repeat["message"] == again["message"]
    assert len(bob.ok("GET", "/threads")["items"]) == 5  # SEC-9 twice (bob and carol), ALL, *, R-1


async def sender_sees_receipts(api: Api, connect: Connect, listening: Callable[[], bool]) -> None:
    """A sender learns what became of its mail through the tools: wait_for_mail with
    include_receipts wakes within a second of a declined acknowledgement (with the note),
    each receipt is shown once, and check_sent, read_message and read_thread show every
    recipient's receipt."""
    lead = api.agent("lead")
    worker = api.agent("worker")
    api.agent("helper")
    thread = lead.open_thread("Split the work", ["worker", "helper"])
    sent = lead.send(thread["id"], "Port the parser", kind="task", summary="Port it")
    message_id = sent["message"]["id"]
    (worker_delivery,) = [d["id"] for d in sent["deliveries"] if d["recipient"] == "worker"]
    outcome: dict[str, Any] = {}

    async with connect(lead.token) as m:

        async def wait() -> None:
            outcome["result"] = await m.ok(
                "wait_for_mail", timeout_seconds=20, include_receipts=True
            )
            outcome["at"] = time.monotonic()

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await wait_until(listening)
            await anyio.sleep(0.2)
            assert "result" not in outcome, "the wait returned before anything happened"
            worker.ok("GET", f"/messages/{worker_delivery}")
            await anyio.to_thread.run_sync(
                lambda: worker.ok(
                    "POST",
                    "/acks",
                    json={"ids": [message_id], "outcome": "declined", "note": "Not my area"},
                )
            )
            acked_at = time.monotonic()
        # Woken by the decline, not by its 20 s timeout (a loaded machine may take a few seconds).
        assert outcome["at"] - acked_at < 5.0, outcome["at"] - acked_at
        woke = outcome["result"]
        assert woke["items"] == []
        (receipt,) = woke["receipts"]
        assert receipt["message_id"] == message_id and receipt["thread_id"] == thread["id"]
        assert receipt["delivery_id"] == worker_delivery and receipt["recipient"] == "worker"
        assert (receipt["state"], receipt["outcome"], receipt["note"]) == (
            "acknowledged",
            "declined",
            "Not my area",
        )
        assert receipt["acknowledged_at"] and receipt["event_id"].startswith("evt_")
        started = time.monotonic()
        again = await m.ok("wait_for_mail", timeout_seconds=1, include_receipts=True)
        assert time.monotonic() - started >= 0.9 and again["receipts"] == []

        page = await m.ok("check_sent")
        (item,) = page["items"]
        assert item["message"]["id"] == message_id and page["next_cursor"] is None
        by_name = {r["recipient"]: r for r in item["receipts"]}
        assert (by_name["worker"]["state"], by_name["worker"]["note"]) == (
            "acknowledged",
            "Not my area",
        )
        assert by_name["worker"]["fetched_at"] and by_name["helper"]["state"] == "accepted"
        assert "worker: acknowledged (declined) — “Not my area”" in text_of(
            await m.call("check_sent")
        )
        fetched = await m.ok("check_sent", state="accepted", thread_id=thread["id"])
        assert [i["message"]["id"] for i in fetched["items"]] == [message_id]
        assert (await m.ok("check_sent", state="failed"))["items"] == []
        code, text = await m.error("check_sent", state="lost")
        assert code == "validation_error" and "state must be one of" in text

        read = await m.ok("read_message", id=message_id)
        assert read["delivery"] is None
        assert sorted(r["recipient"] for r in read["receipts"]) == ["helper", "worker"]
        assert "receipts" not in read["message"]
        history = await m.ok("read_thread", thread_id=thread["id"])
        outcomes = {r["recipient"]: r["outcome"] for r in history["items"][0]["receipts"]}
        assert outcomes == {"worker": "declined", "helper": None}

    async with connect(worker.token) as w:
        history = await w.ok("read_thread", thread_id=thread["id"])
        assert "receipts" not in history["items"][0]  # not its message
        assert (await w.ok("check_sent"))["items"] == []
