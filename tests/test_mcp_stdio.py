"""The agent tools of ``inbots mcp``, which calls the HTTP API of the test server: the same
scenarios as over ``/mcp``, run against the bridge in process (``over_bridge``: the official
client on the SDK's in-memory transport), and the command itself, the official SDK's stdio client
driving a real ``inbots mcp`` subprocess (``over_stdio``): one whole exchange, start-up, the
environment, errors, and the tools and answers compared with ``/mcp`` byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from inbots import __version__
from inbots.mcp.tools import tool_specs
from tests.conftest import ServerThread, free_port
from tests.helpers import Api
from tests.mcp_client import (
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
    wait_wakes_on_send,
)
from tests.receivers import not_inbots, relay


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


# Not the defaults, so the descriptions prove that ``inbots mcp`` asked the server for them.
SERVER_LIMITS = {"message_body_max": 4321, "check_inbox_default": 6, "check_inbox_max": 9}


@pytest.mark.parametrize("settings_overrides", [{}, SERVER_LIMITS], ids=["defaults", "server"])
def test_stdio_serves_exactly_the_tools_of_the_http_endpoint(
    api: Api, server: ServerThread, settings_overrides: dict[str, object]
) -> None:
    agent = api.agent("twin")
    body_max = f"1 to {settings_overrides.get('message_body_max', 10_000):,} characters"

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
            send = next(t for t in over_stdio_tools if t.name == "send_message")
            assert body_max in (send.description or ""), send.description
            # The limits are in the schemas too, from the request models' declared bounds.
            body = send.input_schema["properties"]["body"]
            assert body["maxLength"] == settings_overrides.get("message_body_max", 10_000)
            assert body_max in body["description"]
            inbox_limit = next(t for t in over_stdio_tools if t.name == "check_inbox")
            limit = inbox_limit.input_schema["properties"]["limit"]
            assert limit["maximum"] == settings_overrides.get("check_inbox_max", 50)
            assert local.client.instructions == remote.client.instructions
            over_stdio_me, over_http_me = await local.ok("whoami"), await remote.ok("whoami")
            assert set(over_stdio_me) == set(over_http_me)
            for seen in (over_stdio_me, over_http_me):  # each call stamps it anew
                seen.pop("last_seen_at")
            assert over_stdio_me == over_http_me

    run(scenario)


def test_stdio_with_an_unknown_key_answers_the_http_sentence(
    api: Api, server: ServerThread
) -> None:
    async def scenario() -> None:
        async with over_stdio(server.url, "agt_" + "x" * 43) as tools:
            code, text = await tools.error("whoami")
            assert code == "unauthorized"
            assert text == (
                "The bearer token is missing, malformed, unknown or belongs to an archived agent."
            )
            assert (await tools.error("check_inbox"))[0] == "unauthorized"

    run(scenario)


def test_stdio_without_a_server_answers_tool_errors_and_goes_on() -> None:
    url = f"http://127.0.0.1:{free_port()}"

    async def scenario() -> None:
        async with over_stdio(url, "agt_" + "x" * 43) as tools:
            for _ in range(2):
                code, text = await tools.error("check_inbox")
                assert code == "error"
                assert text.startswith(f"Could not reach Inbots at {url} ("), text
            assert len((await tools.client.list_tools()).tools) == len(tool_specs())

    run(scenario)


def test_stdio_bad_ids_answer_not_found_without_reaching_elsewhere(
    api: Api, server: ServerThread
) -> None:
    """Ids go into URL paths: an id that could change the path names nothing."""
    agent = api.agent("prober")

    async def scenario() -> None:
        async with (
            over_stdio(server.url, agent.token) as tools,
            over_http(server.url, agent.token) as direct,
        ):
            for ident in ("../me", "th_1/participants", "", "a b", "th_?x=1"):
                expected = await direct.error("read_thread", thread_id=ident)
                assert await tools.error("read_thread", thread_id=ident) == expected, ident
                expected = await direct.error("read_message", id=ident)
                assert await tools.error("read_message", id=ident) == expected, ident

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
    """The bridge reads answers through ``inbots.client``'s typed models; what a tool gives back
    is still the HTTP API's JSON as sent: the same keys in the same order, nothing added."""
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


def test_stdio_calls_the_api_through_inbots_client_as_inbots_mcp(
    api: Api, server: ServerThread
) -> None:
    """Every request the bridge makes is the package client's (its ``Accept`` header), named
    ``inbots-mcp/<version>``: seen by a loopback relay in front of the real server."""
    alice, bob = api.agent("alice"), api.agent("bob")

    async def scenario(url: str) -> None:
        async with over_stdio(url, alice.token) as tools:
            opened = await tools.ok("open_thread", title="Relay", participants=["bob"])
            await tools.ok("send_message", thread_id=opened["id"], body="through the relay")
            await tools.ok("check_sent")
            assert (await tools.error("read_message", id="msg_nothing"))[0] == "not_found"

    with relay(server.url) as seen:
        run(lambda: scenario(f"http://127.0.0.1:{seen.port}"))
    paths = [request.path.split("?")[0] for request in seen.requests]
    assert paths == [
        "/v1/limits",
        "/v1/threads",
        f"/v1/threads/{bob.ok('GET', '/threads')['items'][0]['id']}/messages",
        "/v1/outbox",
        "/v1/messages/msg_nothing",
    ]
    for request in seen.requests:
        headers = {name.lower(): value for name, value in request.headers.items()}
        assert headers["user-agent"] == f"inbots-mcp/{__version__}", request.path
        assert headers["accept"] == "application/json", request.path  # the client's
        assert headers["authorization"] == f"Bearer {alice.token}"


def test_stdio_pointed_at_something_else_says_so_in_the_clients_sentence() -> None:
    """An answer the client cannot read as Inbots' is the client's error, named for the URL:
    not "something went wrong"."""

    async def scenario(url: str) -> None:
        async with over_stdio(url, "agt_" + "x" * 43) as tools:
            code, text = await tools.error("whoami")
            assert code == "error"
            assert text.startswith(
                f"Inbots at {url} answered GET /v1/me with a body this client"
            ), text
            assert text.endswith("is the URL an Inbots server?"), text

    with not_inbots() as url:
        run(lambda: scenario(url))
