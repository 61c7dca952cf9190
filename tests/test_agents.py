"""Agents: registration, usernames, listing, archiving, activity, unread counts, the directory."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from inbots.db.engine import Database
from inbots.models.agents import Agent
from inbots.models.deliveries import Delivery
from tests.helpers import Api, Caller, assert_error

SLACK = timedelta(seconds=1)
AGENT_FIELDS = {
    "id",
    "name",
    "username",
    "description",
    "status",
    "created_at",
    "last_seen_at",
    "active",
    "never_connected",
    "webhook_url",
    "unread",
}


def parse_time(value: str) -> datetime:
    assert value.endswith("Z"), value
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def register(api: Api, name: str, **fields: Any) -> dict[str, Any]:
    return api.ok("POST", "/agents", 201, json={"name": name, **fields})  # type: ignore[no-any-return]


# --- registration ---------------------------------------------------------------------------


def test_register_returns_agent_with_key_shown_once(api: Api) -> None:
    before = datetime.now(UTC)
    created = register(api, "reviewer", description="Reviews migrations")
    after = datetime.now(UTC)
    assert set(created) >= AGENT_FIELDS | {"api_key", "webhook"}
    key = created["api_key"]
    assert key.startswith("agt_")
    assert len(key) - len("agt_") >= 43
    assert all(c.isalnum() or c in "-_" for c in key[4:])
    assert created["webhook"] is None
    assert created["webhook_url"] is None
    assert created["name"] == created["username"] == "reviewer"
    assert created["description"] == "Reviews migrations"
    assert created["status"] == "active"
    assert created["last_seen_at"] is None
    assert created["active"] is False
    assert created["never_connected"] is False  # still inside the new-agent grace period
    assert created["unread"] == 0
    assert isinstance(created["id"], str) and created["id"]
    assert before - SLACK <= parse_time(created["created_at"]) <= after + SLACK
    shown = api.ok("GET", f"/agents/{created['id']}")
    assert set(shown) >= AGENT_FIELDS
    assert "api_key" not in shown
    assert {k: shown[k] for k in AGENT_FIELDS} == {k: created[k] for k in AGENT_FIELDS}


def test_registered_key_authenticates_as_that_agent(api: Api) -> None:
    created = register(api, "alpha")
    agent = Caller(api.client, created["api_key"], "alpha")
    me = agent.ok("GET", "/me")
    assert me["id"] == created["id"] and me["username"] == "alpha"


def test_each_registration_mints_a_different_key(api: Api) -> None:
    keys = {register(api, f"agent-{i}")["api_key"] for i in range(5)}
    assert len(keys) == 5


def test_register_without_description_has_null_description(api: Api) -> None:
    created = register(api, "alpha")
    assert created["description"] is None


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("abc", id="three-chars"),
        pytest.param("a" * 32, id="thirty-two-chars"),
        pytest.param("a-1-b", id="digits-and-hyphens"),
        pytest.param("123", id="digits-only"),
    ],
)
def test_valid_usernames_are_accepted(api: Api, name: str) -> None:
    assert register(api, name)["username"] == name


BAD_USERNAMES = (
    "ab",  # too short
    "a" * 33,  # too long
    "Upper",  # upper case
    "under_score",  # underscore
    "sp ace",  # space
    "",  # empty
    "dot.ted",
    "émile",  # non-ASCII letter
    "tab\tbed",
    "new\nline",
)


def test_bad_usernames_are_rejected_naming_the_field(api: Api) -> None:
    for name in BAD_USERNAMES:
        response = api.post("/agents", json={"name": name})
        assert response.status_code == 422, (name, response.text)
        assert_error(response, 422, "validation_error", field="name")
    assert api.ok("GET", "/agents")["items"] == []


def test_username_of_wrong_type_is_rejected(api: Api) -> None:
    for value in (5, None, ["abc"], {"x": 1}):
        response = api.post("/agents", json={"name": value})
        assert response.status_code == 422, (value, response.text)
        assert_error(response, 422, "validation_error", field="name")


def test_username_taken_is_409(api: Api) -> None:
    first = register(api, "alpha")
    response = api.post("/agents", json={"name": "alpha", "description": "another one"})
    assert_error(response, 409, "username_taken")
    agents = api.ok("GET", "/agents")["items"]
    assert [a["id"] for a in agents] == [first["id"]]
    assert agents[0]["description"] is None


def test_archived_agent_keeps_its_username_taken(api: Api) -> None:
    register(api, "alpha")
    api.ok("POST", "/agents/alpha/archive")
    assert_error(api.post("/agents", json={"name": "alpha"}), 409, "username_taken")
    assert len(api.ok("GET", "/agents")["items"]) == 1


def test_operator_username_is_reserved(api: Api) -> None:
    refused = api.post("/agents", json={"name": "operator"})
    assert_error(refused, 409, "username_taken")
    assert "reserved" in refused.json()["error"]["message"], refused.text
    assert api.ok("GET", "/agents")["items"] == []


def test_description_over_200_characters_is_rejected(api: Api) -> None:
    response = api.post("/agents", json={"name": "alpha", "description": "d" * 201})
    assert_error(response, 422, "validation_error", field="description")
    assert api.ok("GET", "/agents")["items"] == []
    assert register(api, "alpha", description="é" * 200)["description"] == "é" * 200


def test_multi_line_description_is_rejected(api: Api) -> None:
    response = api.post("/agents", json={"name": "alpha", "description": "one\ntwo"})
    assert_error(response, 422, "validation_error", field="description")


# --- listing and finding --------------------------------------------------------------------


def test_list_includes_archived_agents(api: Api) -> None:
    alpha = register(api, "alpha")
    beta = register(api, "beta")
    api.ok("POST", f"/agents/{beta['id']}/archive")
    items = api.ok("GET", "/agents")["items"]
    by_name = {a["username"]: a for a in items}
    assert set(by_name) == {"alpha", "beta"}
    assert by_name["alpha"]["status"] == "active" and by_name["alpha"]["id"] == alpha["id"]
    assert by_name["beta"]["status"] == "archived" and by_name["beta"]["id"] == beta["id"]
    for agent in items:
        assert set(agent) >= AGENT_FIELDS
        assert "api_key" not in agent


def test_an_archived_agent_is_not_active_however_recently_it_was_seen(api: Api) -> None:
    """``active`` is "seen in the last few minutes" for an agent that can still be seen: an
    agent archived a moment after its last call is listed archived and not active."""
    beta = api.agent("beta")
    beta.ok("GET", "/me")
    assert api.ok("GET", "/agents/beta")["active"] is True
    api.ok("POST", "/agents/beta/archive")
    for agent in (api.ok("GET", "/agents/beta"), api.ok("GET", "/agents")["items"][0]):
        assert agent["status"] == "archived" and agent["active"] is False, agent


def test_list_leaves_out_the_operator(api: Api) -> None:
    register(api, "alpha")
    api.agent("beta").open_thread("t", ["operator"])
    assert [a["username"] for a in api.ok("GET", "/agents")["items"]] == ["alpha", "beta"]


def test_get_agent_by_id_and_by_username(api: Api) -> None:
    created = register(api, "alpha", description="first")
    register(api, "beta")
    by_id = api.ok("GET", f"/agents/{created['id']}")
    by_name = api.ok("GET", "/agents/alpha")
    assert by_id == by_name
    assert by_id["id"] == created["id"] and by_id["description"] == "first"


def test_get_unknown_agent_is_404(api: Api) -> None:
    register(api, "alpha")
    for ident in ("nobody", "ag_01m8makqtj6nat830c07nrym3a", "operator"):
        assert_error(api.get(f"/agents/{ident}"), 404, "not_found")


def test_archive_unknown_agent_is_404(api: Api) -> None:
    assert_error(api.post("/agents/nobody/archive"), 404, "not_found")


# --- archiving ------------------------------------------------------------------------------


def test_archive_is_idempotent(api: Api) -> None:
    created = register(api, "alpha")
    first = api.ok("POST", f"/agents/{created['id']}/archive")
    second = api.ok("POST", "/agents/alpha/archive")
    assert first["status"] == second["status"] == "archived"
    assert first["id"] == second["id"] == created["id"]
    assert api.ok("GET", "/agents/alpha")["status"] == "archived"


def test_archived_key_stops_working_at_once(api: Api) -> None:
    agent = api.agent("alpha")
    agent.ok("GET", "/me")
    api.ok("POST", "/agents/alpha/archive")
    assert_error(agent.get("/me"), 401, "unauthorized")


def test_archived_agent_is_no_longer_a_recipient(api: Api, database: Database) -> None:
    alpha = api.agent("alpha")
    api.agent("beta")
    api.agent("gamma")
    thread = alpha.open_thread("Three-way", ["beta", "gamma"])
    api.ok("POST", "/agents/gamma/archive")
    sent = alpha.send(thread["id"], "only beta should get this")
    assert [d["recipient"] for d in sent["deliveries"]] == ["beta"]
    assert api.ok("GET", "/deliveries", params={"agent": "gamma"})["items"] == []
    with database.engine.connect() as conn:
        to_gamma = conn.execute(
            select(func.count())
            .select_from(Delivery)
            .join(Agent, Agent.id == Delivery.recipient_id)
            .where(Agent.username == "gamma")
        ).scalar_one()
    assert to_gamma == 0


def test_archived_agent_cannot_be_added_to_a_thread(api: Api) -> None:
    alpha = api.agent("alpha")
    api.agent("beta")
    thread = alpha.open_thread("Task", ["beta"])
    api.agent("gamma")
    api.ok("POST", "/agents/gamma/archive")
    response = alpha.post(f"/threads/{thread['id']}/participants", json={"username": "gamma"})
    assert_error(response, 422, "validation_error", field="username")
    response = alpha.post("/threads", json={"title": "new", "participants": ["gamma"]})
    assert_error(response, 422, "validation_error", field="participants")


def test_thread_with_only_archived_others_rejects_send(api: Api) -> None:
    alpha = api.agent("alpha")
    api.agent("beta")
    thread = alpha.open_thread("Pair", ["beta"])
    api.ok("POST", "/agents/beta/archive")
    assert_error(
        alpha.post(f"/threads/{thread['id']}/messages", json={"body": "hi"}), 409, "no_recipients"
    )


def test_archived_agents_messages_stay_readable(api: Api) -> None:
    alpha = api.agent("alpha")
    beta = api.agent("beta")
    api.agent("gamma")
    thread = alpha.open_thread("Task", ["beta", "gamma"])
    sent = alpha.send(thread["id"], "alpha's words, before archiving")
    delivery_to_beta = next(d for d in sent["deliveries"] if d["recipient"] == "beta")
    api.ok("POST", "/agents/alpha/archive")

    read = beta.ok("GET", f"/messages/{sent['message']['id']}")
    assert read["message"]["body"] == "alpha's words, before archiving"
    assert read["message"]["sender"] == "alpha"
    history = beta.ok("GET", f"/threads/{thread['id']}/messages")["items"]
    assert [m["id"] for m in history] == [sent["message"]["id"]]
    assert [i["sender"] for i in beta.inbox()["items"]] == ["alpha"]
    detail = api.ok("GET", f"/threads/{thread['id']}")
    assert "alpha" in detail["participants"]
    assert [m["sender"] for m in detail["messages"]] == ["alpha"]
    assert api.delivery(delivery_to_beta["id"])["state"] == "fetched"


# --- activity flags -------------------------------------------------------------------------


@pytest.mark.parametrize("settings_overrides", [{"new_agent_grace_seconds": 1.0}])
def test_never_connected_flagged_only_after_grace_period(api: Api) -> None:
    api.agent("quiet")
    talker = api.agent("talker")
    assert api.ok("GET", "/agents/quiet")["never_connected"] is False
    talker.ok("GET", "/me")
    time.sleep(1.2)
    quiet = api.ok("GET", "/agents/quiet")
    assert quiet["never_connected"] is True and quiet["last_seen_at"] is None
    assert api.ok("GET", "/agents/talker")["never_connected"] is False
    listed = {a["username"]: a["never_connected"] for a in api.ok("GET", "/agents")["items"]}
    assert listed == {"quiet": True, "talker": False}


@pytest.mark.parametrize("settings_overrides", [{"new_agent_grace_seconds": 1.0}])
def test_never_connected_clears_on_first_call(api: Api) -> None:
    late = api.agent("late")
    time.sleep(1.2)
    assert api.ok("GET", "/agents/late")["never_connected"] is True
    late.ok("GET", "/inbox")
    assert api.ok("GET", "/agents/late")["never_connected"] is False


@pytest.mark.parametrize(
    "settings_overrides", [{"active_seconds": 1.0, "last_seen_resolution_seconds": 0}]
)
def test_active_after_a_call_and_inactive_after_active_seconds(api: Api) -> None:
    agent = api.agent("alpha")
    assert api.ok("GET", "/agents/alpha")["active"] is False
    agent.ok("GET", "/me")
    assert api.ok("GET", "/agents/alpha")["active"] is True
    time.sleep(1.2)
    assert api.ok("GET", "/agents/alpha")["active"] is False
    agent.ok("GET", "/me")
    assert api.ok("GET", "/agents/alpha")["active"] is True


def test_me_reports_active_after_its_own_call(api: Api) -> None:
    agent = api.agent("alpha")
    me = agent.ok("GET", "/me")
    assert me["active"] is True
    assert me["last_seen_at"] is not None
    assert me["never_connected"] is False


# --- unread ---------------------------------------------------------------------------------


def test_unread_counts_unacknowledged_deliveries(api: Api) -> None:
    alpha = api.agent("alpha")
    beta = api.agent("beta")
    thread = alpha.open_thread("Task", ["beta"])
    sent = [alpha.send(thread["id"], f"message {i}") for i in range(3)]
    assert api.ok("GET", "/agents/beta")["unread"] == 3
    assert api.ok("GET", "/agents/alpha")["unread"] == 0
    beta.inbox()  # shown, not acknowledged
    beta.ok("GET", f"/messages/{sent[0]['message']['id']}")  # fetched, not acknowledged
    assert api.ok("GET", "/agents/beta")["unread"] == 3
    beta.ok("POST", "/acks", json={"ids": [sent[0]["deliveries"][0]["id"]]})
    assert api.ok("GET", "/agents/beta")["unread"] == 2
    assert beta.ok("GET", "/me")["unread"] == 2
    listed = {a["username"]: a["unread"] for a in api.ok("GET", "/agents")["items"]}
    assert listed == {"alpha": 0, "beta": 2}


# --- me -------------------------------------------------------------------------------------


def test_me_returns_the_calling_agent(api: Api) -> None:
    created = register(api, "alpha", description="I review")
    register(api, "beta")
    agent = Caller(api.client, created["api_key"], "alpha")
    me = agent.ok("GET", "/me")
    assert set(me) >= AGENT_FIELDS
    assert me["id"] == created["id"]
    assert me["username"] == me["name"] == "alpha"
    assert me["description"] == "I review"
    assert me["status"] == "active"
    assert me["webhook_url"] is None
    assert "api_key" not in me and "signing_secret" not in str(me)
    assert created["api_key"] not in str(me)


# --- directory ------------------------------------------------------------------------------


def test_directory_lists_other_active_agents_and_the_operator(api: Api) -> None:
    me = api.agent("caller", description="the caller")
    api.agent("alpha", description="first")
    api.agent("beta")
    api.agent("gone")
    api.ok("POST", "/agents/gone/archive")
    me.open_thread("brings the operator in", ["operator"])
    items = me.ok("GET", "/directory")["items"]
    names = [i["username"] for i in items]
    assert sorted(names) == ["alpha", "beta", "operator"]
    for item in items:
        assert set(item) >= {"username", "kind", "description", "active", "last_seen_at"}
        assert "api_key" not in item
    assert next(i for i in items if i["username"] == "alpha")["description"] == "first"
    kinds = {i["username"]: i["kind"] for i in items}
    assert kinds == {"alpha": "agent", "beta": "agent", "operator": "person"}
    # The operator is the one listing: itself it does not see.
    assert sorted(i["username"] for i in api.ok("GET", "/directory")["items"]) == [
        "alpha",
        "beta",
        "caller",
    ]


def test_directory_active_filter_takes_true_or_false_and_refuses_anything_else(
    api: Api,
) -> None:
    caller = api.agent("caller")
    seen = api.agent("seen")
    api.agent("never")
    seen.ok("GET", "/me")
    everyone = ["never", "operator", "seen"]
    for value in ("", "false", "0", "no", "FALSE"):
        items = caller.ok("GET", "/directory", params={"active": value})["items"]
        assert sorted(i["username"] for i in items) == everyone, value
    for value in ("true", "1", "yes", "True"):
        items = caller.ok("GET", "/directory", params={"active": value})["items"]
        assert [i["username"] for i in items] == ["seen"], value
    for value in ("bogus", "2", "on please"):
        response = caller.get("/directory", params={"active": value})
        assert_error(response, 422, "validation_error", field="active", label=value)


@pytest.mark.parametrize("settings_overrides", [{"last_seen_resolution_seconds": 0}])
def test_directory_is_most_recently_active_first(api: Api) -> None:
    caller = api.agent("caller")
    agents = {name: api.agent(name) for name in ("first", "second", "third")}
    api.agent("never")
    for name in ("second", "first", "third"):
        agents[name].ok("GET", "/me")
        time.sleep(0.01)
    names = [i["username"] for i in caller.ok("GET", "/directory")["items"]]
    assert names == ["third", "first", "second", "never", "operator"]
    agents["second"].ok("GET", "/me")
    names = [i["username"] for i in caller.ok("GET", "/directory")["items"]]
    assert names == ["second", "third", "first", "never", "operator"]


def test_directory_query_filters_on_username_and_description(api: Api) -> None:
    caller = api.agent("caller")
    api.agent("db-migrator", description="Runs schema changes")
    api.agent("reviewer", description="Reviews DATABASE migrations")
    api.agent("linter", description="Style checks")
    names = lambda q: sorted(  # noqa: E731
        i["username"] for i in caller.ok("GET", "/directory", params={"query": q})["items"]
    )
    assert names("migrat") == ["db-migrator", "reviewer"]
    assert names("database") == ["reviewer"]
    assert names("lint") == ["linter"]
    assert names("Schema") == ["db-migrator"]
    assert names("nothing-like-this") == []
    assert names("caller") == []  # never the caller itself


def test_directory_query_wildcards_are_literal(api: Api) -> None:
    caller = api.agent("caller")
    api.agent("percent", description="100% coverage")
    api.agent("plain", description="1000 coverage")
    api.agent("snake", description="likes snake_case")
    api.agent("camel", description="likes snakeXcase")
    names = lambda q: sorted(  # noqa: E731
        i["username"] for i in caller.ok("GET", "/directory", params={"query": q})["items"]
    )
    assert names("0%") == ["percent"]
    assert names("%") == ["percent"]
    assert names("_") == ["snake"]
    assert names("snake_case") == ["snake"]
    assert names("\\") == []


def test_directory_active_filter(api: Api) -> None:
    caller = api.agent("caller")
    busy = api.agent("busy")
    api.agent("idle")
    busy.ok("GET", "/inbox")
    items = caller.ok("GET", "/directory", params={"active": "true"})["items"]
    assert [i["username"] for i in items] == ["busy"]
    assert items[0]["active"] is True and items[0]["last_seen_at"] is not None
    everyone = caller.ok("GET", "/directory")["items"]
    assert {i["username"]: i["active"] for i in everyone} == {
        "busy": True,
        "idle": False,
        "operator": False,
    }


@pytest.mark.parametrize("settings_overrides", [{"active_seconds": 1.0}])
def test_directory_active_filter_drops_agents_gone_quiet(api: Api) -> None:
    caller = api.agent("caller")
    busy = api.agent("busy")
    busy.ok("GET", "/me")
    assert [i["username"] for i in caller.ok("GET", "/directory?active=true")["items"]] == ["busy"]
    time.sleep(1.2)
    assert caller.ok("GET", "/directory?active=true")["items"] == []
