"""Agent keys: several per agent, labelled, issued by the operator or the agent itself, listed
without the key, revoked at once on every web process; the last key stays. The migration moves
each agent's existing key into ``agent_keys``. On SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from inbots.db.engine import Database
from inbots.kit.tokens import hash_token
from inbots.models.agents import Agent, AgentKey
from tests.conftest import ServerThread
from tests.helpers import Api, Caller
from tests.processes import serve

KEY_FIELDS = {"id", "label", "hint", "created_at", "last_used_at", "current"}


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    error: dict[str, Any] = response.json()["error"]
    return error


def test_an_agent_starts_with_one_default_key_and_the_operator_issues_more(api: Api) -> None:
    bot = api.agent("bot")
    listed = api.ok("GET", "/agents/bot/keys")["items"]
    assert len(listed) == 1 and set(listed[0]) == KEY_FIELDS
    assert listed[0]["label"] == "default" and listed[0]["id"].startswith("key_")
    assert bot.token.startswith(listed[0]["hint"]) and len(listed[0]["hint"]) == 8

    created = api.ok("POST", "/agents/bot/keys", 201, json={"label": "laptop"})
    assert set(created) == {"id", "label", "api_key", "hint", "created_at"}
    assert created["label"] == "laptop" and created["api_key"].startswith("agt_")
    laptop = Caller(api.client, created["api_key"], "bot")
    assert laptop.ok("GET", "/me")["username"] == "bot"  # it works at once
    assert bot.ok("GET", "/me")["username"] == "bot"  # and the first one still does

    mine = laptop.ok("GET", "/me/keys")["items"]
    assert [k["label"] for k in mine] == ["default", "laptop"]
    assert [k["current"] for k in mine] == [False, True]
    assert mine[1]["last_used_at"] is not None
    assert created["api_key"] not in str(mine) and bot.token not in str(mine)
    # By id too, and an agent of another workspace is not found.
    agent_id = api.ok("GET", "/agents/bot")["id"]
    assert len(api.ok("GET", f"/agents/{agent_id}/keys")["items"]) == 2


def test_an_agent_issues_and_revokes_its_own_keys(api: Api) -> None:
    bot = api.agent("bot")
    created = bot.ok("POST", "/me/keys", 201, json={"label": "ci"})
    ci = Caller(api.client, created["api_key"], "bot")
    assert ci.ok("GET", "/me")["username"] == "bot"
    assert bot.call("DELETE", f"/me/keys/{created['id']}").status_code == 204
    assert error_of(ci.get("/me"), 401)["code"] == "unauthorized"
    assert [k["label"] for k in bot.ok("GET", "/me/keys")["items"]] == ["default"]
    missing = error_of(bot.call("DELETE", f"/me/keys/{created['id']}"), 404)
    assert "GET /v1/me/keys" in missing["message"]


def test_the_last_key_cannot_be_revoked_until_another_is_issued(api: Api) -> None:
    bot = api.agent("bot")
    (default,) = bot.ok("GET", "/me/keys")["items"]
    refused = error_of(bot.call("DELETE", f"/me/keys/{default['id']}"), 409)
    assert "issue another first" in refused["message"]
    refused = error_of(api.call("DELETE", f"/agents/bot/keys/{default['id']}"), 409)
    assert "archive the agent" in refused["message"]
    assert bot.ok("GET", "/me")["username"] == "bot"  # nothing changed

    # Rotation: issue a new key, then retire the old one with itself.
    fresh = bot.ok("POST", "/me/keys", 201, json={"label": "rotated"})
    assert bot.call("DELETE", f"/me/keys/{default['id']}").status_code == 204
    assert error_of(bot.get("/me"), 401)["code"] == "unauthorized"
    rotated = Caller(api.client, fresh["api_key"], "bot")
    assert [k["label"] for k in rotated.ok("GET", "/me/keys")["items"]] == ["rotated"]


@pytest.mark.parametrize("settings_overrides", [{"agent_keys_max": 2}])
def test_keys_are_bounded_and_labels_checked(api: Api) -> None:
    bot = api.agent("bot")
    long = "x" * 101
    refused = error_of(bot.post("/me/keys", json={"label": long}), 422)
    assert refused["field"] == "label"
    assert error_of(bot.post("/me/keys", json={"lable": "x"}), 422)["code"] == "unknown_field"
    bot.ok("POST", "/me/keys", 201)  # no body, no label
    full = error_of(bot.post("/me/keys", json={"label": "third"}), 409)
    assert "revoke one" in full["message"]
    assert len(bot.ok("GET", "/me/keys")["items"]) == 2


def test_keys_are_the_agents_own_and_roles_are_checked(api: Api, other_api: Api) -> None:
    bot = api.agent("bot")
    other = other_api.agent("other")
    (key,) = bot.ok("GET", "/me/keys")["items"]
    # The other workspace's operator cannot see or touch bot's keys.
    assert error_of(other_api.get("/agents/bot/keys"), 404)["code"] == "not_found"
    assert error_of(other_api.call("DELETE", f"/agents/bot/keys/{key['id']}"), 404)
    # Another agent cannot revoke bot's key through its own /me/keys.
    other_api.ok("POST", "/agents/other/keys", 201)
    assert error_of(other.call("DELETE", f"/me/keys/{key['id']}"), 404)["code"] == "not_found"
    # Roles: agents cannot use the operator's paths, nor the operator /me/keys.
    assert error_of(bot.get("/agents/bot/keys"), 403)["code"] == "forbidden"
    assert error_of(api.get("/me/keys"), 403)["code"] == "forbidden"
    assert bot.ok("GET", "/me")["username"] == "bot"


def test_an_archived_agents_keys_all_stop(api: Api) -> None:
    bot = api.agent("bot")
    second = Caller(api.client, api.ok("POST", "/agents/bot/keys", 201)["api_key"], "bot")
    api.ok("POST", "/agents/bot/archive")
    assert error_of(bot.get("/me"), 401)["code"] == "unauthorized"
    assert error_of(second.get("/me"), 401)["code"] == "unauthorized"
    # Nothing new is made for it: a key that authenticates nothing, a webhook that receives
    # nothing, a secret that signs nothing.
    listed = api.ok("GET", "/agents/bot/keys")["items"]
    refused = error_of(api.post("/agents/bot/keys", json={"label": "late"}), 409)
    assert refused["code"] == "conflict" and "archived" in refused["message"]
    assert api.ok("GET", "/agents/bot/keys")["items"] == listed
    hooked = api.call("PUT", "/agents/bot/webhook", json={"url": "https://example.com/hook"})
    assert error_of(hooked, 409)["code"] == "conflict"
    assert error_of(api.post("/agents/bot/webhook/rotate"), 409)["code"] == "conflict"
    assert api.get("/agents/bot/webhook").status_code == 404  # none was set


def test_only_hashes_are_stored(api: Api, database: Database) -> None:
    bot = api.agent("bot")
    created = bot.ok("POST", "/me/keys", 201, json={"label": "ci"})
    with database.engine.connect() as conn:
        rows = conn.execute(select(AgentKey)).all()
        agent_hash = conn.execute(select(Agent.key_hash).where(Agent.username == "bot")).scalar()
    stored = " ".join(str(v) for row in rows for v in row)
    assert bot.token not in stored and created["api_key"] not in stored
    assert {r.key_hash for r in rows} == {hash_token(bot.token), hash_token(created["api_key"])}
    assert agent_hash is None  # agents.key_hash is no longer written


def test_a_revoked_key_stops_on_every_web_process(
    backend: str, db_url: str, api: Api, server: ServerThread, tmp_path: Path
) -> None:
    """Two web processes on one database: a key revoked through one is refused by the other
    on the very next request (nothing caches a key)."""
    if backend != "postgres":
        pytest.skip("two web processes share a database on PostgreSQL")
    bot = api.agent("bot")
    spare = api.ok("POST", "/agents/bot/keys", 201, json={"label": "spare"})
    with (
        serve(tmp_path, INBOTS_DATABASE_URL=db_url, INBOTS_LOG_LEVEL="WARNING") as other,
        httpx.Client(base_url=other.url, timeout=30) as client,
    ):
        there = Caller(client, spare["api_key"], "bot")
        assert there.ok("GET", "/me")["username"] == "bot"
        assert there.ok("GET", "/me")["username"] == "bot"  # warm: seen twice
        assert api.call("DELETE", f"/agents/bot/keys/{spare['id']}").status_code == 204
        assert error_of(there.get("/me"), 401)["code"] == "unauthorized"
        assert error_of(there.get("/inbox"), 401)["code"] == "unauthorized"
        # The key that remains works on both.
        assert Caller(client, bot.token, "bot").ok("GET", "/me")["username"] == "bot"
    assert bot.ok("GET", "/me")["username"] == "bot"
