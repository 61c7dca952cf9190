"""Briefs: ``PUT /v1/me/brief``, the operator's ``PUT /v1/agents/{id}/brief``, ``GET
/v1/agents/{username}/brief``, and the ``read_brief`` / ``set_brief`` tools (over ``/mcp`` and over
stdio); the limit ``brief_max`` everywhere it is shown; the operator in the directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inbots.config import Settings
from tests.conftest import ServerThread
from tests.helpers import Api
from tests.mcp_client import Connect, over_bridge, over_http, run
from tests.test_cli import inbots, ok

BRIEF = "# Reviewer\n\nSend me **schema migrations** as a task; I answer within the hour."


def test_an_agent_sets_its_brief_and_every_agent_and_the_operator_read_it(api: Api) -> None:
    reviewer = api.agent("reviewer")
    reader = api.agent("reader")
    empty = reader.ok("GET", "/agents/reviewer/brief")
    assert empty == {"username": "reviewer", "brief": None, "updated_at": None}

    written = reviewer.ok("PUT", "/me/brief", json={"brief": BRIEF})
    assert written["username"] == "reviewer" and written["brief"] == BRIEF
    assert written["updated_at"]
    for who in (reader, reviewer, api):
        assert who.ok("GET", "/agents/reviewer/brief") == written
    by_id = api.ok("GET", "/agents/reviewer")["id"]
    assert reader.ok("GET", f"/agents/{by_id}/brief") == written

    listed = {i["username"]: i for i in reader.ok("GET", "/directory")["items"]}
    assert listed["reviewer"]["has_brief"] is True
    assert listed["operator"]["has_brief"] is False
    assert {a["username"]: a["has_brief"] for a in api.ok("GET", "/agents")["items"]} == {
        "reviewer": True,
        "reader": False,
    }

    # Replaced whole; empty (or null) removes it.
    assert reviewer.ok("PUT", "/me/brief", json={"brief": "Short now."})["brief"] == "Short now."
    removed = reviewer.ok("PUT", "/me/brief", json={"brief": ""})
    assert removed["brief"] is None and removed["updated_at"]
    assert reader.ok("GET", "/agents/reviewer/brief")["brief"] is None


def test_the_operator_sets_an_agents_brief(api: Api) -> None:
    worker = api.agent("worker")
    written = api.ok("PUT", "/agents/worker/brief", json={"brief": "Runs the nightly build."})
    assert written["brief"] == "Runs the nightly build."
    assert worker.ok("GET", "/agents/worker/brief")["brief"] == "Runs the nightly build."
    # Only the operator sets another agent's brief; an agent sets its own at /me/brief.
    refused = worker.call("PUT", "/agents/worker/brief", json={"brief": "mine"})
    assert refused.status_code == 403
    assert api.call("PUT", "/me/brief", json={"brief": "x"}).status_code == 403
    missing = api.call("PUT", "/agents/ghost/brief", json={"brief": "x"})
    assert missing.status_code == 404


def test_the_brief_limit_is_20000_characters(api: Api, settings: Settings) -> None:
    assert settings.brief_max == 20_000
    writer = api.agent("writer")
    fits = writer.call("PUT", "/me/brief", json={"brief": "é" * 20_000})
    assert fits.status_code == 200, fits.text
    assert len(fits.json()["brief"]) == 20_000
    over = writer.call("PUT", "/me/brief", json={"brief": "x" * 20_001})
    assert over.status_code == 422, over.text
    error = over.json()["error"]
    assert error["field"] == "brief" and "20,000" in error["message"]
    assert writer.ok("GET", "/agents/writer/brief")["brief"] == "é" * 20_000  # unchanged
    assert api.ok("GET", "/limits")["brief_max"] == 20_000
    schema = api.client.get("/openapi.json").json()
    assert schema["components"]["schemas"]["BriefUpdate"]["properties"]["brief"]["maxLength"] == (
        20_000
    )


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"brief": "x", "summary": "y"}, "unknown_field"),
        ({"breif": "x"}, "unknown_field"),
        ({}, "validation_error"),
        ({"brief": 12}, "validation_error"),
        ({"brief": "nul \u0000 inside"}, "validation_error"),
    ],
)
def test_bad_briefs_are_refused_and_change_nothing(api: Api, body: Any, code: str) -> None:
    writer = api.agent("writer")
    writer.ok("PUT", "/me/brief", json={"brief": "kept"})
    refused = writer.call("PUT", "/me/brief", json=body)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == code
    assert writer.ok("GET", "/agents/writer/brief")["brief"] == "kept"


def test_an_unknown_username_names_the_call_that_lists_agents(api: Api) -> None:
    reader = api.agent("reader")
    missing = reader.call("GET", "/agents/nobody/brief")
    assert missing.status_code == 404
    message = missing.json()["error"]["message"]
    # Each surface names its own way: HTTP the path (MCP's read_brief names list_agents).
    assert "GET /v1/directory" in message and "list_agents" not in message
    # The operator is a person with no brief, but it is there.
    assert reader.ok("GET", "/agents/operator/brief") == {
        "username": "operator",
        "brief": None,
        "updated_at": None,
    }


def test_a_brief_never_leaks_across_workspaces(api: Api, other_api: Api) -> None:
    api.agent("secretive").ok("PUT", "/me/brief", json={"brief": "Holds the launch codes."})
    outsider = other_api.agent("outsider")
    for who in (outsider, other_api):
        refused = who.call("GET", "/agents/secretive/brief")
        assert refused.status_code == 404, refused.text
        assert "launch" not in refused.text
    assert other_api.call("PUT", "/agents/secretive/brief", json={"brief": "x"}).status_code == 404
    # A namesake in the other workspace has its own brief.
    namesake = other_api.agent("secretive")
    assert outsider.ok("GET", "/agents/secretive/brief")["brief"] is None
    namesake.ok("PUT", "/me/brief", json={"brief": "Nothing to hide."})
    assert api.agent("reader").ok("GET", "/agents/secretive/brief")["brief"] == (
        "Holds the launch codes."
    )


def test_agents_can_write_to_the_operator(api: Api) -> None:
    """The operator is listed (kind person) and reachable: a direct send to it lands in its
    inbox."""
    agent = api.agent("asker")
    listed = {i["username"]: i for i in agent.ok("GET", "/directory")["items"]}
    assert listed["operator"]["kind"] == "person"
    assert listed["operator"]["description"]  # says who it is
    sent = agent.ok(
        "POST", "/messages", 201, json={"to": ["operator"], "body": "May I drop the table?"}
    )
    assert [d["recipient"] for d in sent["deliveries"]] == ["operator"]
    inbox = api.ok("GET", "/operator/inbox")
    assert [i["message_id"] for i in inbox["items"]] == [sent["message"]["id"]]


@pytest.fixture(params=["http", "bridge"])
def connect(request: pytest.FixtureRequest, server: ServerThread) -> Connect:
    """``/mcp``, or the ``inbots mcp`` bridge in process (see ``tests.mcp_client.over_bridge``)."""
    if request.param == "http":
        return lambda key: over_http(server.url, key)
    return lambda key: over_bridge(server.url, key)


def test_briefs_through_the_tools(api: Api, other_api: Api, connect: Connect) -> None:
    writer = api.agent("writer")
    reader = api.agent("reader")
    outsider = other_api.agent("outsider")

    async def scenario() -> None:
        async with connect(writer.token) as w:
            listed = {t.name: t for t in (await w.client.list_tools()).tools}
            text = listed["set_brief"].input_schema["properties"]["text"]
            assert text["maxLength"] == 20_000
            assert "20,000" in (listed["set_brief"].description or "")
            assert listed["read_brief"].annotations
            assert listed["read_brief"].annotations.read_only_hint is True
            instructions = w.client.instructions or ""
            assert "operator" in instructions and "read_brief" in instructions
            written = await w.ok("set_brief", text=BRIEF)
            assert written["username"] == "writer" and written["brief"] == BRIEF
            code, message = await w.error("set_brief", text="x" * 20_001)
            assert code == "validation_error" and "20,000" in message
            code, _ = await w.error("set_brief", brief="wrong name")
            assert code == "unknown_field"
        async with connect(reader.token) as r:
            directory = await r.ok("list_agents")
            kinds = {a["username"]: (a["kind"], a["has_brief"]) for a in directory["items"]}
            assert kinds == {"writer": ("agent", True), "operator": ("person", False)}
            assert "operator" in (await r.call("list_agents")).content[0].text  # type: ignore[union-attr]
            read = await r.ok("read_brief", username="writer")
            assert read["brief"] == BRIEF
            shown = await r.call("read_brief", username="writer")
            assert BRIEF in shown.content[0].text  # type: ignore[union-attr]
            code, message = await r.error("read_brief", username="nobody")
            assert code == "not_found" and "list_agents" in message
        async with connect(outsider.token) as o:
            code, _ = await o.error("read_brief", username="writer")
            assert code == "not_found"

    run(scenario)
    assert api.ok("GET", "/agents/writer/brief")["brief"] == BRIEF


def test_the_cli_reads_and_sets_a_brief(api: Api, tmp_path: Path) -> None:
    api.agent("builder")
    assert "has no brief" in ok(api, "agents", "brief", "builder").stdout
    source = tmp_path / "brief.md"
    source.write_text(BRIEF, encoding="utf-8")
    written = inbots(api, "agents", "brief", "builder", "--set", str(source), "--json").json()
    assert written["brief"] == BRIEF and written["username"] == "builder"
    assert "schema migrations" in ok(api, "agents", "brief", "builder").stdout
    assert api.ok("GET", "/agents/builder/brief")["brief"] == BRIEF
    assert "yes" in ok(api, "agents", "show", "builder").stdout
    missing = inbots(api, "agents", "brief", "builder", "--set", str(tmp_path / "none.md"))
    assert missing.code != 0 and "--set" in missing.stderr and "Traceback" not in missing.stderr
    assert api.ok("GET", "/agents/builder/brief")["brief"] == BRIEF  # unchanged
