"""Authentication and authorization: who may call what, and how keys are kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import MetaData, String, Table, Text, select

from inbots.db.engine import Database
from inbots.models.agents import Agent
from tests.helpers import Api, Caller, assert_error

# A well-formed token that no one holds: right prefix, 43 url-safe characters.
UNKNOWN_AGENT_KEY = "agt_" + "A" * 43
UNKNOWN_OPERATOR_TOKEN = "ops_" + "B" * 43


def assert_unauthorized(response: httpx.Response, label: str = "") -> None:
    assert response.status_code == 401, (label, response.status_code, response.text)
    assert_error(response, 401, "unauthorized")
    challenge = response.headers.get("www-authenticate", "")
    assert challenge.split(" ")[0].lower() == "bearer", (label, response.headers)


def parse_time(value: str) -> datetime:
    assert value.endswith("Z"), value
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


# --- 401: the caller cannot be resolved ------------------------------------------------------


def test_missing_authorization_header_is_401(api: Api, raw: httpx.Client) -> None:
    for path in ("/v1/me", "/v1/agents", "/v1/threads", "/v1/inbox", "/v1/deliveries"):
        assert_unauthorized(raw.get(api.base_url + path), path)
    assert_unauthorized(raw.post(api.base_url + "/v1/agents", json={"name": "x"}), "register")


WRONG_SCHEMES = (
    "Basic dXNlcjpwYXNz",  # another scheme
    "Token {key}",  # another scheme name, a real key
    "{key}",  # no scheme
    "Bearer",  # scheme only
    "Bearer{key}",  # no space
    "Bearer: {key}",
)

MALFORMED_TOKENS = (
    "abc",  # no prefix
    "agt_",  # prefix only
    "agt_short",
    "ops_short",
    "agt_" + "!" * 43,  # not url-safe
    "xyz_" + "A" * 43,  # unknown prefix
    "agt_" + "A" * 300,  # too long
)


def test_wrong_authorization_scheme_is_401(api: Api, raw: httpx.Client) -> None:
    agent = api.agent("alpha")
    for scheme in WRONG_SCHEMES:
        value = scheme.format(key=agent.token)
        response = raw.get(api.base_url + "/v1/me", headers={"Authorization": value})
        assert_unauthorized(response, scheme)
    agent.ok("GET", "/me")  # the key itself is fine


def test_malformed_token_is_401(api: Api, raw: httpx.Client) -> None:
    for token in MALFORMED_TOKENS:
        response = raw.get(api.base_url + "/v1/me", headers={"Authorization": f"Bearer {token}"})
        assert_unauthorized(response, token)


def test_unknown_agent_key_is_401(api: Api, raw: httpx.Client) -> None:
    api.agent("alpha")
    headers = {"Authorization": f"Bearer {UNKNOWN_AGENT_KEY}"}
    assert_unauthorized(raw.get(api.base_url + "/v1/me", headers=headers))
    assert_unauthorized(raw.get(api.base_url + "/v1/inbox", headers=headers))


def test_unknown_operator_token_is_401(api: Api, raw: httpx.Client) -> None:
    headers = {"Authorization": f"Bearer {UNKNOWN_OPERATOR_TOKEN}"}
    assert_unauthorized(raw.get(api.base_url + "/v1/agents", headers=headers))
    assert_unauthorized(raw.post(api.base_url + "/v1/agents", headers=headers, json={"name": "x"}))


def test_agent_key_with_operator_prefix_is_401(api: Api, raw: httpx.Client) -> None:
    """The prefix decides the kind of caller: an agent key dressed as an operator token fails."""
    agent = api.agent("alpha")
    disguised = "ops_" + agent.token.removeprefix("agt_")
    response = raw.get(
        api.base_url + "/v1/agents", headers={"Authorization": f"Bearer {disguised}"}
    )
    assert_unauthorized(response)


def test_bearer_scheme_is_case_insensitive(api: Api, raw: httpx.Client) -> None:
    agent = api.agent("alpha")
    response = raw.get(api.base_url + "/v1/me", headers={"Authorization": f"bearer {agent.token}"})
    assert response.status_code == 200, response.text
    assert response.json()["username"] == "alpha"


def test_archived_agent_key_is_401(api: Api) -> None:
    agent = api.agent("alpha")
    agent.ok("GET", "/me")
    api.ok("POST", "/agents/alpha/archive")
    assert_unauthorized(agent.get("/me"))
    assert_unauthorized(agent.get("/inbox"))
    assert_unauthorized(agent.post("/threads", json={"title": "t", "participants": []}))


def test_unauthenticated_request_with_malformed_body_is_401_not_422(
    api: Api, raw: httpx.Client
) -> None:
    """Authentication comes before anything else: no token, no feedback on the body."""
    response = raw.post(
        api.base_url + "/v1/threads",
        content=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    assert_unauthorized(response)


def test_unauthenticated_request_with_wrongly_typed_body_is_401(
    api: Api, raw: httpx.Client
) -> None:
    response = raw.post(api.base_url + "/v1/threads", json={"title": 5, "participants": "x"})
    assert_unauthorized(response)


# --- 403: the caller is known but may not use the endpoint ------------------------------------


def _operator_only_calls(
    agent_id: str, thread_id: str, delivery_id: str
) -> list[tuple[str, str, Any]]:
    return [
        ("POST", "/agents", {"name": "intruder"}),
        ("GET", "/agents", None),
        ("GET", f"/agents/{agent_id}", None),
        ("GET", "/agents/alpha", None),
        ("POST", f"/agents/{agent_id}/archive", None),
        ("GET", "/deliveries", None),
        ("GET", f"/deliveries/{delivery_id}", None),
        ("POST", f"/threads/{thread_id}/close", None),
        ("POST", f"/threads/{thread_id}/close/dismiss", None),
        ("GET", "/operator/inbox", None),
    ]


def test_agent_key_on_operator_only_endpoints_is_403(api: Api) -> None:
    alpha = api.agent("alpha")
    api.agent("beta")
    me = alpha.ok("GET", "/me")
    thread = alpha.open_thread("Task", ["beta"])
    sent = alpha.send(thread["id"], "hello")
    alpha.ok("POST", f"/threads/{thread['id']}/close-request", 202)
    delivery_id = sent["deliveries"][0]["id"]
    for method, path, body in _operator_only_calls(me["id"], thread["id"], delivery_id):
        kwargs = {"json": body} if body is not None else {}
        response = alpha.call(method, path, **kwargs)
        assert_error(response, 403, "forbidden")
        assert response.json()["error"]["message"], (method, path)
    # Nothing happened: no agent registered or archived, the thread is still close-requested.
    agents = api.ok("GET", "/agents")["items"]
    assert sorted(a["username"] for a in agents) == ["alpha", "beta"]
    assert all(a["status"] == "active" for a in agents)
    assert api.ok("GET", f"/threads/{thread['id']}")["status"] == "close_requested"


def test_operator_token_on_agent_only_endpoints_is_403(api: Api) -> None:
    # The inbox and its long-poll serve the operator's own mail (1.1); /v1/me stays agent-only.
    assert_error(api.call("GET", "/me"), 403, "forbidden")


def test_operator_token_cannot_request_close(api: Api) -> None:
    api.agent("alpha")
    thread = api.open_thread("Operator's task", ["alpha"])
    response = api.post(f"/threads/{thread['id']}/close-request")
    assert_error(response, 403, "forbidden")
    assert api.ok("GET", f"/threads/{thread['id']}")["status"] == "open"


def test_operator_token_works_on_operator_endpoints(api: Api) -> None:
    created = api.ok("POST", "/agents", 201, json={"name": "alpha"})
    assert api.ok("GET", "/agents")["items"][0]["id"] == created["id"]
    assert api.ok("GET", "/operator/inbox")["items"] == []


# --- keys are stored only as hashes ---------------------------------------------------------


def _text_values(database: Database, table_name: str) -> list[str]:
    """Every text value of every text column of a table, as the database has it (reflected, so
    a column the models do not know is scanned too)."""
    table = Table(table_name, MetaData(), autoload_with=database.engine)
    columns = [c for c in table.columns if isinstance(c.type, String | Text)]
    assert len(columns) >= 2, table_name
    with database.engine.connect() as conn:
        rows = conn.execute(select(*columns)).all()
    return [value for row in rows for value in row if isinstance(value, str)]


def test_keys_and_operator_token_are_stored_only_as_hashes(api: Api, database: Database) -> None:
    secrets = [api.token]
    for name in ("alpha", "beta", "gamma"):
        created = api.ok("POST", "/agents", 201, json={"name": name, "description": "a bot"})
        secrets.append(created["api_key"])
    api.ok("POST", "/agents/gamma/archive")
    values = (
        _text_values(database, "agents")
        + _text_values(database, "agent_keys")
        + _text_values(database, "operator_tokens")
    )
    assert len(values) >= 4 * 3
    for secret in secrets:
        random_part = secret[4:]
        for value in values:
            assert secret not in value
            assert random_part not in value
    # The hashes are there (so the scan looked at the right rows).
    import hashlib

    digests = {hashlib.sha256(s.encode()).hexdigest() for s in secrets}
    assert digests <= set(values)


def test_api_key_is_shown_only_at_registration(api: Api) -> None:
    created = api.ok("POST", "/agents", 201, json={"name": "alpha"})
    key = created["api_key"]
    agent = Caller(api.client, key, "alpha")
    for body in (
        api.ok("GET", "/agents/alpha"),
        api.ok("GET", "/agents"),
        api.ok("POST", "/agents/alpha/archive"),
    ):
        assert key not in str(body)
        assert "api_key" not in str(body)
    assert_unauthorized(agent.get("/me"))


# --- activity -------------------------------------------------------------------------------


@pytest.mark.parametrize("settings_overrides", [{"last_seen_resolution_seconds": 0}])
def test_authenticated_agent_call_stamps_last_seen_at(api: Api) -> None:
    agent = api.agent("alpha")
    assert api.ok("GET", "/agents/alpha")["last_seen_at"] is None
    before = datetime.now(UTC) - timedelta(seconds=1)
    agent.ok("GET", "/inbox")
    after = datetime.now(UTC) + timedelta(seconds=1)
    first = api.ok("GET", "/agents/alpha")["last_seen_at"]
    assert first is not None
    assert before <= parse_time(first) <= after
    agent.ok("GET", "/directory")
    second = api.ok("GET", "/agents/alpha")["last_seen_at"]
    assert parse_time(second) > parse_time(first)


def test_failed_authentication_does_not_stamp_last_seen_at(
    api: Api, raw: httpx.Client, database: Database
) -> None:
    api.agent("alpha")
    raw.get(api.base_url + "/v1/me", headers={"Authorization": f"Bearer {UNKNOWN_AGENT_KEY}"})
    with database.engine.connect() as conn:
        seen = conn.execute(
            select(Agent.last_seen_at).where(Agent.username == "alpha")
        ).scalar_one()
    assert seen is None


def test_operator_calls_do_not_stamp_agents(api: Api) -> None:
    api.agent("alpha")
    api.ok("GET", "/agents")
    api.ok("GET", "/agents/alpha")
    assert api.ok("GET", "/agents/alpha")["last_seen_at"] is None
