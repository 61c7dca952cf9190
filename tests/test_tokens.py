"""Operator tokens over HTTP: minted (shown once), listed without the token, revoked at once;
the workspace's last live token cannot be revoked. On SQLite and PostgreSQL."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select, text

from inbots.config import load_settings
from inbots.db.engine import Database
from inbots.db.uow import unit_of_work
from inbots.kit.tokens import OPERATOR_TOKEN_PREFIX, hash_token, mint
from inbots.models.workspaces import OperatorToken, Workspace
from tests.helpers import Api, Caller
from tests.processes import inbots_executable


def as_operator(api: Api, token: str) -> Caller:
    return Caller(api.client, token, "operator")


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    error: dict[str, Any] = response.json()["error"]
    return error


def test_create_list_and_revoke_an_operator_token(api: Api) -> None:
    created = api.ok("POST", "/tokens", 201, json={"label": "ci"})
    assert set(created) == {"id", "label", "token", "created_at"}
    assert created["id"].startswith("otk_") and created["label"] == "ci"
    assert created["token"].startswith("ops_") and created["token"] != api.token
    second = as_operator(api, created["token"])
    assert second.ok("GET", "/agents") == {"items": []}  # it works at once

    listed = api.ok("GET", "/tokens")["items"]
    assert [t["label"] for t in listed] == ["minted with the workspace", "ci"]
    assert all(
        set(t) == {"id", "label", "created_at", "last_used_at", "revoked_at", "current"}
        for t in listed
    )
    assert [t["current"] for t in listed] == [True, False]
    assert created["token"] not in str(listed) and api.token not in str(listed)
    assert listed[1]["last_used_at"] is not None  # the call above used it

    assert api.call("DELETE", f"/tokens/{created['id']}").status_code == 204
    assert error_of(second.get("/agents"), 401)["code"] == "unauthorized"
    revoked = api.ok("GET", "/tokens")["items"][1]
    assert revoked["id"] == created["id"] and revoked["revoked_at"] is not None
    assert api.call("DELETE", f"/tokens/{created['id']}").status_code == 204  # idempotent


def test_a_token_can_revoke_itself_once_another_is_live(api: Api) -> None:
    """Rotation: mint a new token, then retire the old one with it (or with itself)."""
    fresh = api.ok("POST", "/tokens", 201)
    assert fresh["label"] is None
    old_id = next(t["id"] for t in api.ok("GET", "/tokens")["items"] if t["current"])
    assert api.call("DELETE", f"/tokens/{old_id}").status_code == 204
    assert error_of(api.get("/tokens"), 401)["code"] == "unauthorized"
    rotated = as_operator(api, fresh["token"])
    assert [t["current"] for t in rotated.ok("GET", "/tokens")["items"]] == [False, True]


def test_the_last_live_token_cannot_be_revoked(api: Api) -> None:
    other = api.ok("POST", "/tokens", 201)
    api.ok("DELETE", f"/tokens/{other['id']}", 204)
    mine = next(t["id"] for t in api.ok("GET", "/tokens")["items"] if t["current"])
    error = error_of(api.call("DELETE", f"/tokens/{mine}"), 409)
    assert error["code"] == "conflict" and "create another first" in error["message"]
    api.ok("GET", "/agents")  # still works


def test_tokens_are_for_the_operator_of_their_own_workspace(api: Api, other_api: Api) -> None:
    agent = api.agent("alpha")
    for method, path in (("POST", "/tokens"), ("GET", "/tokens"), ("DELETE", "/tokens/otk_x")):
        assert error_of(agent.call(method, path), 403)["code"] == "forbidden"
        assert error_of(httpx.request(method, api.base_url + "/v1" + path), 401)
    foreign = other_api.ok("GET", "/tokens")["items"][0]["id"]
    missing = error_of(api.call("DELETE", f"/tokens/{foreign}"), 404)
    assert "GET /v1/tokens" in missing["message"]
    assert foreign not in str(api.ok("GET", "/tokens"))
    other_api.ok("GET", "/agents")  # untouched


def test_a_label_is_checked(api: Api) -> None:
    error = error_of(api.post("/tokens", json={"label": "x" * 101}), 422)
    assert error["field"] == "label"
    error = error_of(api.post("/tokens", json={"label": 5}), 422)
    assert error["field"] == "label"


def test_tokens_are_stored_only_as_hashes(api: Api, database: Database) -> None:
    created = api.ok("POST", "/tokens", 201, json={"label": "stored"})
    with database.engine.connect() as conn:
        rows = conn.execute(text("SELECT * FROM operator_tokens")).all()
    dump = " ".join(str(value) for row in rows for value in row)
    assert created["token"] not in dump and created["token"][4:] not in dump
    assert api.token not in dump


def test_a_lost_operator_token_is_replaced_from_the_host(tmp_path: Path) -> None:
    """docs/operations.md, "A lost operator token": with every token of the first workspace
    lost, INBOTS_OPERATOR_TOKEN and `inbots db upgrade` seed a new one into that workspace."""
    url = f"sqlite:///{tmp_path / 'lost.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("INBOTS_")}
    env["INBOTS_DATABASE_URL"] = url

    def upgrade(**extra: str) -> str:
        run = subprocess.run(
            [inbots_executable(), "db", "upgrade"],
            env=env | extra,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        return run.stdout

    first = upgrade()
    assert "Operator token (shown once" in first  # printed once, then lost
    fresh = mint(OPERATOR_TOKEN_PREFIX)
    again = upgrade(INBOTS_OPERATOR_TOKEN=fresh)
    assert "Operator token" not in again  # nothing new minted: the given one was seeded
    db = Database(load_settings(database_url=url))
    try:
        with unit_of_work(db) as uow:
            rows = uow.session.scalars(select(OperatorToken)).all()
            workspaces = uow.session.scalars(select(Workspace.id)).all()
    finally:
        db.dispose()
    assert len(workspaces) == 1  # the same workspace, not a new one
    assert len(rows) == 2 and {r.workspace_id for r in rows} == set(workspaces)
    assert hash_token(fresh) in {r.token_hash for r in rows}
