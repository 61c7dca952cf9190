"""Enrolment tokens and self-registration: the operator creates tokens (shown once, stored
hashed), lists and revokes them; an agent registers with one (``POST /v1/register``, the real
``inbots enroll`` CLI, ``inbots mcp --enroll`` through the official MCP stdio client). Uses are
spent atomically. On SQLite and PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from sqlalchemy import select

from inbots.db.engine import Database
from inbots.kit.tokens import hash_token
from inbots.models.enrollments import Enrollment
from tests.conftest import ServerThread
from tests.helpers import Api, Caller
from tests.mcp_client import Tools, inbots_executable, run

CREATED_FIELDS = {"id", "token", "uses", "expires_at", "label"}
LISTED_FIELDS = {
    "id",
    "label",
    "uses",
    "uses_left",
    "created_at",
    "expires_at",
    "last_used_at",
    "revoked_at",
    "state",
}


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    error: dict[str, Any] = response.json()["error"]
    return error


def register(raw: httpx.Client, api: Api, token: str, name: str, **kw: Any) -> httpx.Response:
    body = {"enrollment_token": token, "name": name, **kw}
    return raw.post(f"{api.base_url}/v1/register", json=body)


def test_create_list_and_revoke_enrollment_tokens(api: Api) -> None:
    created = api.ok("POST", "/enrollments", 201, json={"uses": 3, "label": "build farm"})
    assert set(created) == CREATED_FIELDS
    assert created["token"].startswith("enr_") and created["id"].startswith("enl_")
    assert created["uses"] == 3 and created["label"] == "build farm"
    default = api.ok("POST", "/enrollments", 201)  # no body: 1 use, a day
    assert default["uses"] == 1 and default["label"] is None
    expires = datetime.fromisoformat(default["expires_at"])
    assert abs(expires - (datetime.now(UTC) + timedelta(days=1))) < timedelta(minutes=1)

    listed = api.ok("GET", "/enrollments")["items"]
    assert [e["id"] for e in listed] == [default["id"], created["id"]]  # newest first
    assert all(set(e) == LISTED_FIELDS for e in listed)
    assert created["token"] not in str(listed) and default["token"] not in str(listed)
    assert listed[1]["uses_left"] == 3 and listed[1]["state"] == "active"

    assert api.call("DELETE", f"/enrollments/{created['id']}").status_code == 204
    revoked = api.ok("GET", "/enrollments")["items"][1]
    assert revoked["state"] == "revoked" and revoked["revoked_at"] is not None
    assert api.call("DELETE", f"/enrollments/{created['id']}").status_code == 204  # idempotent
    missing = error_of(api.call("DELETE", "/enrollments/enl_nope"), 404)
    assert "GET /v1/enrollments" in missing["message"]


def test_bad_enrollment_requests_are_refused_and_change_nothing(api: Api) -> None:
    for body, field in (
        ({"uses": 0}, "uses"),
        ({"uses": 1001}, "uses"),
        ({"expires_in": 0}, "expires_in"),
        ({"expires_in": 31 * 86400}, "expires_in"),
        ({"label": "x" * 101}, "label"),
    ):
        error = error_of(api.post("/enrollments", json=body), 422)
        assert error["field"] == field, (body, error)
    too_long = error_of(api.post("/enrollments", json={"expires_in": 31 * 86400}), 422)
    assert "at most 2,592,000 (got 2,678,400)" in too_long["message"], too_long  # no 2.6e+06
    assert error_of(api.post("/enrollments", json={"use": 2}), 422)["code"] == "unknown_field"
    assert api.ok("GET", "/enrollments")["items"] == []
    bot = api.agent("bot")
    assert error_of(bot.post("/enrollments", json={}), 403)["code"] == "forbidden"
    assert error_of(bot.get("/enrollments"), 403)["code"] == "forbidden"


def test_an_agent_registers_itself_as_post_agents_would(api: Api, raw: httpx.Client) -> None:
    token = api.ok("POST", "/enrollments", 201, json={"uses": 2})["token"]
    answer = register(raw, api, token, "self-made", description="Registers itself")
    assert answer.status_code == 201, answer.text
    created = answer.json()
    by_operator = api.ok("POST", "/agents", 201, json={"name": "by-operator"})
    assert set(created) == set(by_operator)
    assert created["username"] == "self-made" and created["description"] == "Registers itself"
    assert created["api_key"].startswith("agt_") and created["webhook"] is None
    agent = Caller(api.client, created["api_key"], "self-made")
    assert agent.ok("GET", "/me")["username"] == "self-made"
    # It is an agent of the token's workspace, with one default key.
    assert "self-made" in [a["username"] for a in api.ok("GET", "/agents")["items"]]
    assert [k["label"] for k in agent.ok("GET", "/me/keys")["items"]] == ["default"]
    (row,) = api.ok("GET", "/enrollments")["items"]
    assert row["uses_left"] == 1 and row["last_used_at"] is not None

    # A webhook is set up as POST /v1/agents does it.
    hooked = register(raw, api, token, "hooked", webhook_url="http://127.0.0.1:9/hook")
    assert hooked.status_code == 201, hooked.text
    assert hooked.json()["webhook"]["signing_secret"]
    # Now the token is spent.
    spent = error_of(register(raw, api, token, "third"), 401)
    assert (
        spent["code"] == "enrollment_invalid" and "ask the workspace's operator" in spent["message"]
    )
    assert api.ok("GET", "/enrollments")["items"][0]["state"] == "spent"


def test_a_taken_name_is_409_and_spends_no_use(api: Api, raw: httpx.Client) -> None:
    api.agent("taken")
    token = api.ok("POST", "/enrollments", 201)["token"]
    error = error_of(register(raw, api, token, "taken"), 409)
    assert error["code"] == "username_taken" and error["field"] == "name"
    assert error_of(register(raw, api, token, "operator"), 409)["code"] == "username_taken"
    assert error_of(register(raw, api, token, "Bad Name"), 422)["field"] == "name"
    assert api.ok("GET", "/enrollments")["items"][0]["uses_left"] == 1
    assert register(raw, api, token, "free").status_code == 201


@pytest.mark.parametrize(
    "settings_overrides",
    [{"enrollment_expires_in_max": 3600, "enrollment_expires_in_default": 600}],
)
def test_revoked_expired_and_unknown_tokens_are_401(api: Api, raw: httpx.Client) -> None:
    revoked = api.ok("POST", "/enrollments", 201)
    api.ok("DELETE", f"/enrollments/{revoked['id']}", 204)
    expiring = api.ok("POST", "/enrollments", 201, json={"expires_in": 0.5})
    assert error_of(api.post("/enrollments", json={"expires_in": 3601}), 422)
    time.sleep(0.6)
    for token in (revoked["token"], expiring["token"], "enr_" + "x" * 43, "agt_nope", ""):
        error = error_of(register(raw, api, token, "late"), 401)
        assert error["code"] == "enrollment_invalid", token
        assert "inbots enroll" in error["message"]
    states = {e["id"]: e["state"] for e in api.ok("GET", "/enrollments")["items"]}
    assert states == {revoked["id"]: "revoked", expiring["id"]: "expired"}
    assert api.ok("GET", "/agents")["items"] == []
    missing = raw.post(f"{api.base_url}/v1/register", json={"name": "x"})
    assert error_of(missing, 422)["field"] == "enrollment_token"


def test_racing_registrations_spend_a_one_use_token_once(api: Api, server: ServerThread) -> None:
    token = api.ok("POST", "/enrollments", 201)["token"]
    racers = 6
    barrier = threading.Barrier(racers)
    statuses: list[int] = []

    def race(i: int) -> None:
        with httpx.Client(timeout=30) as client:
            barrier.wait()
            answer = register(client, api, token, f"racer-{i}")
            statuses.append(answer.status_code)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [201] + [401] * (racers - 1), statuses
    assert len(api.ok("GET", "/agents")["items"]) == 1
    assert api.ok("GET", "/enrollments")["items"][0]["uses_left"] == 0


def test_the_token_is_stored_only_as_a_hash(api: Api, database: Database) -> None:
    created = api.ok("POST", "/enrollments", 201, json={"label": "x"})
    with database.engine.connect() as conn:
        (row,) = conn.execute(select(Enrollment)).all()
    assert created["token"] not in " ".join(str(v) for v in row)
    assert row.token_hash == hash_token(created["token"])


# --- the CLI and the MCP bridge -------------------------------------------------------------


def inbots(api: Api, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INBOTS_")}
    env |= {"INBOTS_URL": api.base_url, "INBOTS_OPERATOR_TOKEN": api.token, "COLUMNS": "200"}
    return subprocess.run(
        [inbots_executable(), *args], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("backend", ["sqlite"])
def test_inbots_enroll_creates_lists_and_revokes(api: Api, raw: httpx.Client) -> None:
    import json

    made = inbots(
        api, "enroll", "--uses", "2", "--expires-in", "2h", "--label", "farm", "-o", "json"
    )
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    assert created["uses"] == 2 and created["label"] == "farm"
    human = inbots(api, "enroll", "create")
    assert human.returncode == 0 and "enr_" in human.stdout and "shown once" in human.stdout

    listed = inbots(api, "enroll", "list", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    items = json.loads(listed.stdout)["items"]
    assert [e["label"] for e in items] == [None, "farm"] and created["token"] not in listed.stdout
    table = inbots(api, "enroll", "list", "-o", "table")
    assert "farm" in table.stdout and "2/2" in table.stdout

    revoked = inbots(api, "enroll", "revoke", created["id"])
    assert revoked.returncode == 0 and created["id"] in revoked.stdout
    assert error_of(register(raw, api, created["token"], "late"), 401)
    bad = inbots(api, "enroll", "--expires-in", "soon")
    assert bad.returncode == 2 and "--expires-in" in bad.stderr
    assert inbots(api, "enroll", "revoke").returncode == 2


async def _whoami(params: StdioServerParameters) -> str:
    async with Client(params) as client:
        me = await Tools(client).ok("whoami")
        return str(me["username"])


def _bridge(url: str, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=inbots_executable(),
        args=["mcp", *args],
        env={"INBOTS_URL": url, "PYTHONUNBUFFERED": "1", "PATH": os.environ.get("PATH", "")},
        cwd=os.getcwd(),
    )


def test_inbots_mcp_enroll_registers_then_serves_and_keeps_the_key(
    api: Api, tmp_path: Path
) -> None:
    token = api.ok("POST", "/enrollments", 201, json={"uses": 2})["token"]
    key_file = tmp_path / "keys" / "harness.key"
    args = ("--enroll", token, "--name", "harness", "--key-file", str(key_file))
    assert run(lambda: _whoami(_bridge(api.base_url, *args))) == "harness"
    key = key_file.read_text().strip()
    assert key.startswith("agt_") and key_file.stat().st_mode & 0o777 == 0o600
    assert Caller(api.client, key, "harness").ok("GET", "/me")["username"] == "harness"
    # The same command line again: the key file is used, nothing is registered.
    assert run(lambda: _whoami(_bridge(api.base_url, *args))) == "harness"
    assert api.ok("GET", "/enrollments")["items"][0]["uses_left"] == 1
    assert [a["username"] for a in api.ok("GET", "/agents")["items"]] == ["harness"]
    # The bridge is a session of the agent.
    sessions = api.ok("GET", "/agents/harness/sessions")["items"]
    assert [s["label"] for s in sessions] == ["stdio"]
    assert sessions[0]["client"].startswith("inbots-mcp/")


def test_inbots_mcp_enroll_refusals_are_one_line(api: Api, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INBOTS_")}
    env["INBOTS_URL"] = api.base_url

    def bridge(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [inbots_executable(), "mcp", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    spent = bridge("--enroll", "enr_" + "y" * 43, "--name", "nobody")
    assert spent.returncode == 1 and "ask the workspace's operator" in spent.stderr
    assert "Traceback" not in spent.stderr
    no_name = bridge("--enroll", "enr_" + "y" * 43)
    assert no_name.returncode == 2 and "--name" in no_name.stderr
    junk = tmp_path / "junk.key"
    junk.write_text("not a key\n")
    token = api.ok("POST", "/enrollments", 201)["token"]
    refused = bridge("--enroll", token, "--name", "nobody", "--key-file", str(junk))
    assert refused.returncode == 1 and "holds no agent key" in refused.stderr
    assert api.ok("GET", "/enrollments")["items"][0]["uses_left"] == 1  # nothing registered
    assert api.ok("GET", "/agents")["items"] == []


def test_help_shows_the_server_defaults_and_every_event_type(tmp_path: Path) -> None:
    """Help text in square brackets is Rich markup and vanishes: the enroll options' server
    defaults are in parentheses, and ``events list --type`` names every event type."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INBOTS_")}
    env |= {"COLUMNS": "300", "NO_COLOR": "1"}

    def help_of(*command: str) -> str:
        done = subprocess.run(
            [inbots_executable(), *command, "--help"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return " ".join(done.stdout.split())

    enroll = help_of("enroll")
    assert "(server default: 1)" in enroll and "(server default: 24h)" in enroll, enroll
    events = help_of("events", "list")
    for kind in ("message.acknowledged", "message.rejected", "thread.closed"):
        assert kind in events, (kind, events)
