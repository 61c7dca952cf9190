"""``inbots mcp``, a stdio relay to the server's own ``/mcp``: the same scenarios as over ``/mcp``,
run through the relay in process (``over_bridge``: the official client on a transport that hands it
each message as a line, as stdio does), and the command itself, the official SDK's stdio client
(or raw lines) driving a real ``inbots mcp`` subprocess: one whole exchange, start-up, the
environment, what it sends to ``/mcp``, the errors it answers itself, and the tools and answers
compared with ``/mcp`` byte for byte."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import MCPError
from mcp.shared import inbound
from mcp_types import CLIENT_INFO_META_KEY, INVALID_REQUEST, PROTOCOL_VERSION_META_KEY
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from inbots import __version__
from inbots.mcp import stdio
from inbots.mcp.stdio import Relay
from tests.conftest import ServerThread, free_port
from tests.helpers import Api
from tests.mcp_client import (
    INITIALIZE,
    Connect,
    default_limit,
    direct_send_and_refs,
    every_send_field_arrives,
    exchange,
    inbots_executable,
    inbox_paging_and_bodies,
    isolation,
    more_waiting,
    other_workspace_sees_nothing,
    over_bridge,
    over_http,
    over_stdio,
    own_keys_and_sessions,
    run,
    same_stamps_as_http,
    send_message_errors,
    sender_sees_receipts,
    wait_answers_new_mail_behind_shown,
    wait_times_out,
    wait_until,
    wait_wakes_on_send,
)
from tests.receivers import not_inbots, relay
from tests.test_mcp_http import DEFAULT_TOOLS, TOOLS


@pytest.fixture
def connect(server: ServerThread) -> Connect:
    return lambda key: over_bridge(server.url, key)


def listening(server: ServerThread) -> int:
    return int(server.app.state.dispatch.wakeups.listening())


def test_two_agents_exchange_through_the_tools(api: Api, server: ServerThread) -> None:
    run(lambda: exchange(api, lambda key: over_stdio(server.url, key)))  # two real subprocesses


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


def test_tools_set_the_same_stamps_as_http(api: Api, connect: Connect) -> None:
    run(lambda: same_stamps_as_http(api, connect))


def test_second_workspace_agent_sees_nothing_of_the_first(
    api: Api, other_api: Api, connect: Connect
) -> None:
    run(lambda: other_workspace_sees_nothing(api, other_api, connect))


def test_own_keys_and_sessions(api: Api, connect: Connect) -> None:
    run(lambda: own_keys_and_sessions(api, connect))


# Not the defaults, so the descriptions prove that the tools ``inbots mcp`` lists are the server's.
SERVER_LIMITS = {"message_body_max": 4321, "check_inbox_default": 6, "check_inbox_max": 9}


@pytest.mark.parametrize("settings_overrides", [{}, SERVER_LIMITS], ids=["defaults", "server"])
def test_stdio_serves_exactly_the_tools_of_the_http_endpoint(
    api: Api, server: ServerThread, settings_overrides: dict[str, object]
) -> None:
    agent = api.agent("twin")
    default = f"Default {settings_overrides.get('check_inbox_default', 20)}"

    async def scenario() -> None:
        async with (
            over_stdio(server.url, agent.token) as local,
            over_http(server.url, agent.token) as remote,
        ):
            over_stdio_tools = (await local.client.list_tools()).tools
            over_http_tools = (await remote.client.list_tools()).tools
            assert [t.model_dump() for t in over_stdio_tools] == [
                t.model_dump() for t in over_http_tools
            ]
            assert [t.name for t in over_stdio_tools] == DEFAULT_TOOLS
            send = next(t for t in over_stdio_tools if t.name == "send_message")
            # The limits are in the schemas, from the request models' declared bounds, and in
            # the descriptions where a limit is a setting's.
            body = send.input_schema["properties"]["body"]
            assert body["maxLength"] == settings_overrides.get("message_body_max", 10_000)
            inbox_limit = next(t for t in over_stdio_tools if t.name == "check_inbox")
            limit = inbox_limit.input_schema["properties"]["limit"]
            assert limit["maximum"] == settings_overrides.get("check_inbox_max", 50)
            assert default in limit["description"], limit
            assert local.client.instructions == remote.client.instructions
            over_stdio_me, over_http_me = await local.ok("whoami"), await remote.ok("whoami")
            assert set(over_stdio_me) == set(over_http_me)
            for seen in (over_stdio_me, over_http_me):  # each call stamps it anew
                seen.pop("last_seen_at")
            assert over_stdio_me == over_http_me

    run(scenario)


def mcp_command(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("INBOTS_")}
    clean.update(env)
    return subprocess.run(
        [inbots_executable(), "mcp"],
        env=clean,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"INBOTS_API_KEY": "agt_" + "k" * 43}, "INBOTS_URL is not set"),
        ({"INBOTS_URL": "http://127.0.0.1:8000"}, "INBOTS_API_KEY is not set"),
        (
            {"INBOTS_URL": "127.0.0.1:8000", "INBOTS_API_KEY": "agt_" + "k" * 43},
            "INBOTS_URL must start with http:// or https://",
        ),
        (
            {"INBOTS_URL": "http://127.0.0.1:8000", "INBOTS_API_KEY": "ops_" + "k" * 43},
            "INBOTS_API_KEY must be an agent key (agt_…); the operator token is not an agent.",
        ),
        (
            {"INBOTS_URL": "http://127.0.0.1:8000", "INBOTS_API_KEY": "agt_" + "k" * 43 + "\n"},
            "INBOTS_API_KEY must be the key as printed",
        ),
        (  # a space before the key: badly pasted, not "the operator token"
            {"INBOTS_URL": "http://127.0.0.1:8000", "INBOTS_API_KEY": " agt_" + "k" * 43},
            "INBOTS_API_KEY must be the key as printed",
        ),
    ],
)
def test_inbots_mcp_without_its_settings_fails_with_one_line(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    done = mcp_command(tmp_path, **env)

    assert done.returncode == 2
    assert done.stdout == ""  # stdout belongs to the protocol
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("inbots: ") and message in line


def test_stdio_answers_are_the_http_apis_json_key_for_key_in_its_order(
    api: Api, server: ServerThread
) -> None:
    """What a tool gives back through the relay is the HTTP API's JSON as sent: the same keys in
    the same order, nothing added."""
    lead, worker = api.agent("lead"), api.agent("worker")

    async def scenario() -> None:
        async with (
            over_stdio(server.url, lead.token) as a,
            over_stdio(server.url, worker.token) as w,
        ):
            opened = await a.ok("open_thread", title="Port", participants=["worker"], ref="ENG-4")
            thread = opened["id"]
            (listed,) = lead.ok("GET", "/threads", params={"ref": "ENG-4"})["items"]
            args = {"thread_id": thread, "body": "Port it", "summary": "Port", "priority": "urgent"}
            sent = await a.ok("send_message", idempotency_key="port-1", **args)
            message = sent["message"]["id"]
            headers = {"Idempotency-Key": "port-1"}  # a repeat: the original, 200
            body = {"body": "Port it", "summary": "Port", "priority": "urgent"}
            again = lead.ok("POST", f"/threads/{thread}/messages", json=body, headers=headers)
            assert again.pop("duplicate") is True and sent.pop("duplicate") is False
            acked = await w.ok("read_message", id=message, acknowledge="declined", note="Not mine")
            assert acked["delivery"]["note"] == "Not mine"
            inbox = await w.ok("check_inbox", status="acked")
            assert inbox.pop("notice")
            me, http_me = await a.ok("whoami"), lead.ok("GET", "/me")
            assert list(me) == list(http_me)
            me.pop("last_seen_at"), http_me.pop("last_seen_at")  # each call stamps it anew
            threads = lead.ok("GET", "/threads", params={"ref": "ENG-4"})
            pairs: list[tuple[str, object, object]] = [
                ("open_thread", opened, listed),
                ("send_message", sent, again),
                ("read_message", acked, worker.ok("GET", f"/messages/{message}")),
                ("check_inbox", inbox, worker.inbox(status="acked", limit=20)),
                ("whoami", me, http_me),
                (
                    "read_message",
                    await a.ok("read_message", id=message),
                    lead.ok("GET", f"/messages/{message}"),
                ),
                (
                    "read_thread",
                    await a.ok("read_thread", thread_id=thread),
                    lead.ok("GET", f"/threads/{thread}/messages"),
                ),
                ("check_sent", await a.ok("check_sent"), lead.ok("GET", "/outbox")),
                (
                    "list_threads",
                    await a.ok("list_threads", ref="ENG-4"),
                    {"items": threads["items"]},
                ),
                ("list_agents", await a.ok("list_agents"), lead.ok("GET", "/directory")),
            ]
            for tool, answered, http in pairs:
                # json.dumps keeps the order keys came in, nested ones too.
                assert json.dumps(answered) == json.dumps(http), tool

    run(scenario)


# What the relay sends, and what it answers itself.


class Lines:
    """A real ``inbots mcp`` driven by raw JSON-RPC lines: ``ask`` writes a request and reads
    its answer, ``tell`` writes a message that must get none."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.next_id = 1
        self.stderr = ""  # once the relay has ended

    def tell(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.process.stdin.flush()

    def ask(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        request_id, self.next_id = self.next_id, self.next_id + 1
        self.tell({"id": request_id, "method": method, **({"params": params} if params else {})})
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], 30)
        assert ready, f"no answer to {method}"
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        assert answer["jsonrpc"] == "2.0" and answer["id"] == request_id, answer
        return answer


@contextmanager
def raw_relay(url: str, key: str) -> Iterator[Lines]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INBOTS_")}
    env |= {"INBOTS_URL": url, "INBOTS_API_KEY": key}
    process = subprocess.Popen(
        [inbots_executable(), "mcp"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        lines = Lines(process)
        yield lines
        out, err = process.communicate(b"", timeout=30)  # stdin closes: the relay ends
        assert process.returncode == 0, err
        assert out == b"", "a notification got an answer, or something else reached stdout"
        lines.stderr = err.decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def relay_error(answer: dict[str, Any]) -> tuple[str, str]:
    """The ``(data.code, message)`` of an error the relay answered itself."""
    error = answer["error"]
    assert error["code"] == stdio.RELAY_ERROR, answer
    return error["data"]["code"], error["message"]


TOOL_CALL = {"name": "whoami", "arguments": {}}


def test_a_server_that_is_down_starts_the_relay_which_serves_once_it_is_up(
    api: Api, server: ServerThread
) -> None:
    """spec §3: a server that is only down still starts the relay, with one warning line; it
    answers initialize itself (so the harness's session starts), each call answers that the
    server cannot be reached, and once a server is up on that address the same process serves
    the tools."""
    agent = api.agent("early")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with raw_relay(url, agent.token) as lines:
        answer = lines.ask("initialize", INITIALIZE["params"])
        assert answer["result"] == {
            "protocolVersion": INITIALIZE["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "inbots", "version": __version__},
        }
        lines.tell({"method": "notifications/initialized"})  # no answer, a line on stderr
        code, text = relay_error(lines.ask("tools/call", TOOL_CALL))
        assert code == "unreachable"
        assert text.startswith(f"Could not reach Inbots at {url} ("), text
        assert text.endswith("check that the server is running and that INBOTS_URL points at it.")
        assert relay_error(lines.ask("tools/list"))[0] == "unreachable"
        with relay(server.url, port):  # the server is up on that port now
            listed = lines.ask("tools/list")["result"]["tools"]
            assert [t["name"] for t in listed] == DEFAULT_TOOLS
            called = lines.ask("tools/call", TOOL_CALL)["result"]
            assert called["structuredContent"]["username"] == "early"
    warnings = [line for line in lines.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1, lines.stderr
    assert warnings[0].startswith(f"inbots mcp: warning: could not reach Inbots at {url} (")
    assert lines.stderr.count("inbots mcp: Could not reach Inbots") == 3, lines.stderr


REFUSED_KEY = "The bearer token is missing, malformed, unknown or belongs to an archived agent."


def test_a_key_the_server_refuses_stops_inbots_mcp_naming_inbots_api_key(
    api: Api, server: ServerThread, tmp_path: Path
) -> None:
    """spec §3: before any tool is listed, one line naming the variable to fix, exit 2."""
    for key in ("agt_" + "x" * 43, archived_key(api)):
        done = mcp_command(tmp_path, INBOTS_URL=server.url, INBOTS_API_KEY=key)
        assert done.returncode == 2, done.stderr
        assert done.stdout == ""
        (line,) = done.stderr.strip().splitlines()
        assert line == f"inbots: INBOTS_API_KEY is refused by Inbots at {server.url}: {REFUSED_KEY}"

    async def scenario() -> None:  # the official client cannot connect, as over /mcp
        with pytest.raises(BaseExceptionGroup) as raised:
            async with over_stdio(server.url, "agt_" + "x" * 43) as tools:
                await tools.call("whoami")
        assert raised.group_contains(MCPError)

    run(scenario)


def archived_key(api: Api) -> str:
    gone = api.agent("gone")
    api.ok("POST", "/agents/gone/archive")
    return gone.token


def test_a_key_refused_while_the_relay_runs_is_answered_with_the_http_sentence(
    api: Api, server: ServerThread
) -> None:
    """A key revoked after ``inbots mcp`` started: each request is answered with the HTTP
    API's sentence, and the relay goes on."""
    answers: list[dict[str, Any]] = []

    async def lines() -> AsyncIterator[bytes]:
        for n, (method, params) in enumerate(
            (("initialize", INITIALIZE["params"]), ("tools/call", TOOL_CALL)), 1
        ):
            yield json.dumps(
                {"jsonrpc": "2.0", "id": n, "method": method, "params": params}
            ).encode()

    async def write(line: bytes) -> None:
        answers.append(json.loads(line))

    async def scenario() -> None:
        async with Relay(server.url, "agt_" + "x" * 43) as bridge:
            await bridge.serve(lines(), write)

    run(scenario)
    assert sorted(relay_error(a) for a in answers) == [("unauthorized", REFUSED_KEY)] * 2
    assert {a["error"]["data"]["status"] for a in answers} == {401}


def test_a_url_that_is_not_an_inbots_server_stops_inbots_mcp_naming_inbots_url(
    tmp_path: Path,
) -> None:
    """A web server that answers, but not as Inbots does: one line naming INBOTS_URL, exit 2."""
    with not_inbots() as url:
        done = mcp_command(tmp_path, INBOTS_URL=url, INBOTS_API_KEY="agt_" + "x" * 43)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"inbots: INBOTS_URL ({url}) is not an Inbots server: "), line
    assert "GET /v1/me answered HTTP 200 with text/html" in line, line


def test_pointed_at_something_else_while_running_the_relay_says_so() -> None:
    """What answers POST /mcp with a web page (a server replaced after the relay started):
    each request is answered saying so."""
    answers: list[dict[str, Any]] = []

    async def lines() -> AsyncIterator[bytes]:
        ask = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE["params"]}
        yield json.dumps(ask).encode()

    async def write(line: bytes) -> None:
        answers.append(json.loads(line))

    with not_inbots() as url:

        async def scenario() -> None:
            async with Relay(url, "agt_" + "x" * 43) as bridge:
                await bridge.serve(lines(), write)

        run(scenario)
    ((code, text),) = [relay_error(a) for a in answers]
    assert code == "not_mcp"
    assert text.startswith(f"Inbots at {url} answered POST /mcp with text/html that is not MCP")
    assert text.endswith("is INBOTS_URL the base URL of an Inbots server?"), text


def test_inbots_mcp_takes_a_url_ending_in_mcp_or_v1(api: Api, server: ServerThread) -> None:
    agent = api.agent("pathy")

    async def scenario() -> None:
        for url in (f"{server.url}/mcp", f"{server.url}/v1/"):
            async with over_stdio(url, agent.token) as tools:
                assert (await tools.ok("whoami"))["username"] == "pathy"

    run(scenario)


def test_inbots_mcp_tools_all_lists_every_tool(api: Api, server: ServerThread) -> None:
    """``inbots mcp --tools all`` asks /mcp for every tool (X-Inbots-Tools: all): list_keys and
    list_sessions too, exactly as /mcp lists them with that header."""
    agent = api.agent("keeper")

    async def scenario() -> None:
        async with (
            over_stdio(server.url, agent.token, "--tools", "all") as local,
            over_http(server.url, agent.token, headers={"X-Inbots-Tools": "all"}) as remote,
        ):
            listed = (await local.client.list_tools()).tools
            assert [t.name for t in listed] == TOOLS
            assert [t.model_dump() for t in listed] == [
                t.model_dump() for t in (await remote.client.list_tools()).tools
            ]
            assert (await local.ok("list_sessions"))["items"]

    run(scenario)


def test_the_relay_posts_each_message_to_mcp_as_inbots_mcp(api: Api, server: ServerThread) -> None:
    """Both protocol eras through a loopback proxy in front of the server: every message is one
    POST to ``/mcp`` with the agent's key, ``X-Inbots-Session`` and ``User-Agent: inbots-mcp/…``,
    its body as the client wrote it. The handshake era carries the ``Mcp-Session-Id`` and the
    version ``initialize`` settled; the per-request era the routing headers of each body. The
    agent's sessions list the bridge as before."""
    alice = api.agent("alice")

    async def scenario(url: str, mode: str) -> None:
        async with over_bridge(url, alice.token, mode) as tools:
            await tools.ok("whoami")
            await tools.ok("check_inbox", limit=5)

    for mode in ("legacy", "auto"):
        with relay(server.url) as seen:
            run(lambda: scenario(f"http://127.0.0.1:{seen.port}", mode))  # noqa: B023
        requests = seen.requests
        assert {r.path for r in requests} == {"/mcp"}
        for request in requests:
            headers = {name.lower(): value for name, value in request.headers.items()}
            assert headers["user-agent"] == f"inbots-mcp/{__version__}"
            assert headers["authorization"] == f"Bearer {alice.token}"
            assert headers["x-inbots-session"] == "stdio"
            assert headers["accept"] == "application/json"
        bodies = [r.json() for r in requests]
        calls = [(r, b) for r, b in zip(requests, bodies, strict=True) if "id" in b]
        if mode == "legacy":
            # initialize first (the client waits for its answer); the bridge posts what follows
            # as it comes, so the initialized notification and the first call may cross.
            methods = [b["method"] for b in bodies]
            assert methods[0] == "initialize" and "notifications/initialized" in methods, methods
            session_id = None
            for request, body in zip(requests, bodies, strict=True):
                headers = {name.lower(): value for name, value in request.headers.items()}
                if body["method"] == "initialize":
                    assert "mcp-session-id" not in headers
                    assert "mcp-protocol-version" not in headers
                else:
                    session_id = session_id or headers["mcp-session-id"]
                    assert headers["mcp-session-id"] == session_id
                    assert headers["mcp-protocol-version"] == LATEST_HANDSHAKE_VERSION
            assert session_id and session_id.startswith("ses_")
        else:
            tool_calls = [(r, b) for r, b in calls if b["method"] == "tools/call"]
            assert [b["params"]["name"] for _, b in tool_calls] == ["whoami", "check_inbox"]
            for request, body in calls:
                headers = {name.lower(): value for name, value in request.headers.items()}
                meta = body["params"]["_meta"]
                assert headers["mcp-protocol-version"] == meta[PROTOCOL_VERSION_META_KEY]
                assert headers["mcp-method"] == body["method"]
                assert CLIENT_INFO_META_KEY in meta
            for request, body in tool_calls:
                assert request.headers.get("Mcp-Name") == body["params"]["name"]
    (session,) = alice.ok("GET", "/me/sessions")["items"]
    assert (session["label"], session["client"]) == ("stdio", f"inbots-mcp/{__version__}")


def test_a_cancelled_request_is_aborted_and_not_answered(api: Api, server: ServerThread) -> None:
    """``notifications/cancelled`` aborts the POST of the request it names (a wait for mail),
    which gets no answer; other calls are answered while it waits and after."""
    agent = api.agent("waiter")
    answers: dict[int, dict[str, Any]] = {}
    listening = server.app.state.dispatch.wakeups.listening
    ended: dict[str, float] = {}

    async def lines() -> AsyncIterator[bytes]:
        def line(message: dict[str, Any]) -> bytes:
            return json.dumps({"jsonrpc": "2.0", **message}).encode()

        yield line(INITIALIZE)
        await wait_until(lambda: 1 in answers)
        wait = {"name": "wait_for_mail", "arguments": {"timeout_seconds": 30}}
        yield line({"id": 2, "method": "tools/call", "params": wait})
        await wait_until(lambda: listening() >= 1)
        yield line({"id": 3, "method": "ping"})
        await wait_until(lambda: 3 in answers)  # answered while the wait goes on
        yield line({"method": "notifications/cancelled", "params": {"requestId": 2}})
        yield line({"id": 4, "method": "tools/call", "params": TOOL_CALL})
        await wait_until(lambda: 4 in answers)
        ended["lines"] = time.monotonic()

    async def write(answer: bytes) -> None:
        message = json.loads(answer)
        answers[message["id"]] = message

    async def scenario() -> None:
        async with Relay(server.url, agent.token, "stdio") as bridge:
            await bridge.serve(lines(), write)
        ended["relay"] = time.monotonic()

    run(scenario)
    assert sorted(answers) == [1, 3, 4]  # no answer to the cancelled wait
    assert answers[4]["result"]["structuredContent"]["username"] == "waiter"
    # Nothing was left in flight when the lines ended: else the relay gives it its grace period.
    assert ended["relay"] - ended["lines"] < stdio.EOF_GRACE_SECONDS * 0.75


# /mcp takes the send routes' larger cap only for send_message's attachments: a request
# without any is held to INBOTS_REQUEST_BODY_MAX_BYTES (64 KiB), as before attachments.
def test_a_request_over_the_body_limit_is_answered_with_its_own_id(
    api: Api, connect: Connect
) -> None:
    """The endpoint refuses a body over the limit before reading it, with a JSON-RPC error whose
    id is null: the relay gives it the request's id, so the client raises the sentence."""
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("Big", ["bob"])

    async def scenario() -> None:
        async with connect(alice.token) as tools:
            with pytest.raises(MCPError) as refused:
                await tools.call("send_message", thread_id=thread["id"], body="x" * 65_600)
            assert "larger than 65536 bytes" in str(refused.value), str(refused.value)
            assert refused.value.error.code == INVALID_REQUEST
            assert (await tools.ok("whoami"))["username"] == "alice"

    run(scenario)


def test_the_relays_protocol_constants_are_the_sdks() -> None:
    """The relay imports no MCP SDK (it starts on every agent session): the few names it needs
    are written out, and must stay the SDK's."""
    assert stdio.PROTOCOL_VERSION_META_KEY == PROTOCOL_VERSION_META_KEY
    assert dict(inbound.NAME_BEARING_METHODS) == stdio.NAME_BEARING_METHODS
    assert stdio.MCP_PROTOCOL_VERSION.lower() == inbound.MCP_PROTOCOL_VERSION_HEADER
    assert stdio.MCP_METHOD.lower() == inbound.MCP_METHOD_HEADER
    assert stdio.MCP_NAME.lower() == inbound.MCP_NAME_HEADER
    for value in ("whoami", "read me", " edge", "naïve", "=?base64?eA==?=", "a\nb", ""):
        encoded = stdio._header_value(value)
        assert encoded == inbound.encode_header_value(value), value
        assert inbound.decode_header_value(encoded) == value


def test_the_server_url_may_be_given_with_v1_or_mcp() -> None:
    for given in ("http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/mcp/"):
        assert stdio.server_url(given) == "http://h:1"


def test_a_long_poll_is_given_its_timeout_and_every_other_call_the_usual_one() -> None:
    seen: list[tuple[str, float]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append((body["params"]["name"], request.extensions["timeout"]["read"]))
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": {}})

    async def lines() -> AsyncIterator[bytes]:
        for i, (name, arguments) in enumerate(
            [
                ("wait_for_mail", {"timeout_seconds": 300}),
                ("wait_for_mail", {"timeout_seconds": "120"}),  # as some harnesses send it
                ("wait_for_mail", {}),
                ("whoami", {}),
            ]
        ):
            params = {"name": name, "arguments": arguments}
            call = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}
            yield json.dumps(call).encode()

    async def scenario() -> None:
        transport = httpx.MockTransport(answer)
        async with Relay("http://inbots.test", "agt_k", transport=transport) as bridge:
            await bridge.serve(lines(), write)

    written: list[bytes] = []

    async def write(line: bytes) -> None:
        written.append(line)

    run(scenario)
    assert sorted(seen) == [
        ("wait_for_mail", 90.0),
        ("wait_for_mail", 150.0),
        ("wait_for_mail", 330.0),
        ("whoami", 90.0),
    ]
    assert len(written) == 4
