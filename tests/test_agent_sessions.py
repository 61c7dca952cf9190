"""Agent sessions: each MCP session and each client sending ``X-Inbots-Session`` is a session of
its agent (label, client, first and last seen, active), listed to the agent and the operator,
recorded at most once per ``last_seen_resolution_seconds``. On SQLite and PostgreSQL."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest
from mcp import Client
from sqlalchemy import func, select

from inbots.db.engine import Database
from inbots.models.agents import AgentSession
from tests.helpers import Api
from tests.mcp_client import INITIALIZE, MCP_HEADERS, Tools, over_http, run

CSRF = re.compile(r'name="csrf" value="([^"]+)"')
SESSION_FIELDS = {"id", "label", "client", "first_seen_at", "last_seen_at", "active"}


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    error: dict[str, Any] = response.json()["error"]
    return error


def named(label: str, agent: str = "worker/1.0") -> dict[str, str]:
    return {"X-Inbots-Session": label, "User-Agent": agent}


@pytest.mark.parametrize("settings_overrides", [{"last_seen_resolution_seconds": 0}])
def test_a_client_naming_its_session_is_listed_to_the_agent_and_the_operator(api: Api) -> None:
    bot = api.agent("bot")
    bot.ok("GET", "/inbox", headers=named("worker-1"))
    bot.ok("GET", "/me", headers=named("worker-2", "other-client/2"))
    bot.ok("GET", "/me")  # no header: no session
    first = bot.ok("GET", "/me/sessions")["items"]
    assert all(set(s) == SESSION_FIELDS for s in first)
    assert [(s["label"], s["client"], s["active"]) for s in first] == [
        ("worker-2", "other-client/2", True),
        ("worker-1", "worker/1.0", True),
    ]
    assert all(s["id"].startswith("ses_") for s in first)
    assert api.ok("GET", "/agents/bot/sessions")["items"] == first

    time.sleep(0.05)
    bot.ok("GET", "/inbox", headers=named("worker-1"))
    again = {s["label"]: s for s in bot.ok("GET", "/me/sessions")["items"]}
    before = {s["label"]: s for s in first}
    assert again["worker-1"]["id"] == before["worker-1"]["id"]  # the same session, moved on
    assert again["worker-1"]["first_seen_at"] == before["worker-1"]["first_seen_at"]
    assert again["worker-1"]["last_seen_at"] > before["worker-1"]["last_seen_at"]
    assert bot.ok("GET", "/me/sessions")["items"][0]["label"] == "worker-1"


def test_sessions_are_the_agents_own(api: Api, other_api: Api) -> None:
    bot = api.agent("bot")
    peer = api.agent("peer")
    bot.ok("GET", "/me", headers=named("secret-host"))
    assert peer.ok("GET", "/me/sessions")["items"] == []
    assert error_of(peer.get("/agents/bot/sessions"), 403)["code"] == "forbidden"
    assert error_of(other_api.get("/agents/bot/sessions"), 404)["code"] == "not_found"
    assert error_of(api.get("/me/sessions"), 403)["code"] == "forbidden"
    # The operator's own header is ignored: the operator has no agent sessions.
    api.ok("GET", "/agents", headers=named("console"))
    assert api.ok("GET", "/agents/peer/sessions")["items"] == []


def test_a_bad_session_label_is_refused_and_changes_nothing(api: Api, database: Database) -> None:
    bot = api.agent("bot")
    for label in ("x" * 65, "-starts-with-a-dash", "semi;colon", ""):
        error = error_of(bot.get("/me", headers={"X-Inbots-Session": label}), 422)
        assert error["field"] == "X-Inbots-Session" and "leave it out" in error["message"]
    with database.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(AgentSession)).scalar() == 0
    # An unknown key is 401 before the label is looked at.
    stranger = {"Authorization": "Bearer agt_" + "z" * 43, "X-Inbots-Session": ";"}
    assert error_of(api.client.get("/v1/me", headers=stranger), 401)["code"] == "unauthorized"
    assert bot.ok("GET", "/me", headers=named("x" * 64))["username"] == "bot"


@pytest.mark.parametrize("settings_overrides", [{"session_active_seconds": 1.5}])
def test_a_session_is_active_while_seen_recently(api: Api) -> None:
    bot = api.agent("bot")
    bot.ok("GET", "/me", headers=named("short"))
    assert bot.ok("GET", "/me/sessions")["items"][0]["active"] is True
    time.sleep(1.7)
    assert bot.ok("GET", "/me/sessions")["items"][0]["active"] is False


@pytest.mark.parametrize("settings_overrides", [{"last_seen_resolution_seconds": 60}])
def test_a_session_is_written_at_most_once_per_resolution(api: Api) -> None:
    bot = api.agent("bot")
    bot.ok("GET", "/me", headers=named("busy"))
    (first,) = bot.ok("GET", "/me/sessions", headers=named("busy"))["items"]
    for _ in range(3):
        bot.ok("GET", "/inbox", headers=named("busy"))
    (after,) = bot.ok("GET", "/me/sessions")["items"]
    assert after["last_seen_at"] == first["last_seen_at"]
    bot.ok("GET", "/me", headers=named("second"))  # a new session is written at once
    assert len(bot.ok("GET", "/me/sessions")["items"]) == 2


@pytest.mark.parametrize("settings_overrides", [{"last_seen_resolution_seconds": 0}])
def test_an_mcp_session_is_a_session_with_its_client_info(api: Api) -> None:
    bot = api.agent("bot")

    async def scenario() -> None:
        async with over_http(api.base_url, bot.token, mode="legacy") as tools:
            await tools.ok("whoami")
            await tools.ok("check_inbox")

    run(scenario)
    (legacy,) = bot.ok("GET", "/me/sessions")["items"]
    assert legacy["label"] is None and legacy["client"] == "mcp/0.1.0"
    assert legacy["last_seen_at"] > legacy["first_seen_at"]  # the tool calls were seen

    # A second connection is a second session.
    run(scenario)
    assert len(bot.ok("GET", "/me/sessions")["items"]) == 2


def test_an_mcp_client_of_either_protocol_era_is_one_session(api: Api) -> None:
    """``auto`` picks the 2026 per-request protocol when the server offers it (no initialize,
    clientInfo on every call), else the handshake: either way one session with its client."""
    bot = api.agent("bot")

    async def scenario() -> None:
        async with over_http(api.base_url, bot.token) as tools:
            await tools.ok("whoami")
            await tools.ok("check_inbox")

    run(scenario)
    (session,) = bot.ok("GET", "/me/sessions")["items"]
    assert session["client"] == "mcp/0.1.0" and session["active"] is True


def test_an_mcp_session_with_a_label_is_listed_under_it(api: Api) -> None:
    bot = api.agent("bot")

    async def scenario() -> None:
        http = httpx.AsyncClient(
            headers={"Authorization": f"Bearer {bot.token}", "X-Inbots-Session": "planner"},
            timeout=30,
        )
        from mcp.client.streamable_http import streamable_http_client

        async with (
            http,
            Client(streamable_http_client(f"{api.base_url}/mcp", http_client=http)) as c,
        ):
            await Tools(c).ok("whoami")

    try:
        run(scenario)
    except TypeError:
        pytest.skip("the MCP client takes only its own HTTP client type")
    sessions = bot.ok("GET", "/me/sessions")["items"]
    assert [s["label"] for s in sessions] == ["planner"]
    assert sessions[0]["client"] == "mcp/0.1.0"


def test_the_dashboards_agents_page_lists_each_agents_sessions(api: Api) -> None:
    """The page as served (the headless-browser check is in test_dashboard.py)."""
    worker = api.agent("worker")
    api.agent("quiet")
    for label in ("laptop", "ci-runner"):
        worker.ok("GET", "/me", headers=named(label, "harness/2.1"))
    with httpx.Client(base_url=api.base_url, timeout=30) as page:
        csrf = CSRF.search(page.get("/login").text)
        assert csrf
        signed = page.post("/login", data={"token": api.token, "csrf": csrf.group(1)})
        assert signed.status_code == 303, signed.text
        html = page.get("/agents").text
    row = html[html.index('data-agent="worker"') :]
    row = row[: row.index("</tr>")]
    assert row.index("ci-runner") < row.index("laptop")  # most recently seen first
    assert "harness/2.1" in row and 'data-active="yes"' in row
    quiet = html[html.index('data-agent="quiet"') :]
    assert "none named" in quiet[: quiet.index("</tr>")]


@pytest.mark.parametrize("settings_overrides", [{"last_seen_resolution_seconds": 0}])
def test_the_mcp_session_id_given_out_is_the_id_the_session_is_listed_under(api: Api) -> None:
    """The ``Mcp-Session-Id`` an ``initialize`` answer carries is the ``id`` of the session the
    agent and the operator see, and later calls with it move that session on. Another agent
    sending the same id gets a session of its own (under another id), never the first one."""
    bot, other = api.agent("bot"), api.agent("other")
    accept = MCP_HEADERS
    opened = httpx.post(
        f"{api.base_url}/mcp", json=INITIALIZE, headers={**accept, **bot.headers}, timeout=15
    )
    assert opened.status_code == 200, opened.text
    given = opened.headers["mcp-session-id"]
    assert re.fullmatch(r"ses_[0-9a-z]{26}", given), given
    (listed,) = bot.ok("GET", "/me/sessions")["items"]
    assert listed["id"] == given and listed["client"] == "probe/1"
    assert [s["id"] for s in api.ok("GET", "/agents/bot/sessions")["items"]] == [given]

    tools = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    again = {**accept, **bot.headers, "Mcp-Session-Id": given, "MCP-Protocol-Version": "2025-06-18"}
    assert httpx.post(f"{api.base_url}/mcp", json=tools, headers=again).status_code == 200
    (moved,) = bot.ok("GET", "/me/sessions")["items"]
    assert moved["id"] == given and moved["last_seen_at"] > listed["last_seen_at"]

    borrowed = {**again, **other.headers}
    assert httpx.post(f"{api.base_url}/mcp", json=tools, headers=borrowed).status_code == 200
    (own,) = other.ok("GET", "/me/sessions")["items"]
    assert own["id"] != given
    assert [s["id"] for s in bot.ok("GET", "/me/sessions")["items"]] == [given]
