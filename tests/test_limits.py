"""``GET /v1/limits``: the limits the server enforces, as its settings say, for any caller."""

from __future__ import annotations

import httpx
import pytest

from inbots.config import Settings
from tests.helpers import Api

LOWERED = {
    "message_body_max": 50,
    "check_inbox_default": 5,
    "check_inbox_max": 7,
    "wait_max_seconds": 45.0,
}


def test_agents_and_the_operator_read_the_default_limits(api: Api, settings: Settings) -> None:
    agent = api.agent("reader")
    seen = agent.ok("GET", "/limits")
    assert seen == api.ok("GET", "/limits")
    assert seen["message_body_max"] == settings.message_body_max == 10_000
    assert seen["check_inbox_default"] == 20 and seen["check_inbox_max"] == 50
    assert seen["wait_default_seconds"] == 30.0 and seen["wait_max_seconds"] == 60.0
    assert seen["request_body_max_bytes"] == 64 * 1024
    for name, value in seen.items():  # every field is the setting of the same name
        assert value == getattr(settings, name), name


@pytest.mark.parametrize("settings_overrides", [LOWERED], ids=["lowered"])
def test_limits_are_the_ones_the_server_enforces(api: Api) -> None:
    agent = api.agent("writer")
    api.agent("reader")
    seen = agent.ok("GET", "/limits")
    for name, value in LOWERED.items():
        assert seen[name] == value, name

    thread = agent.open_thread("Limits", ["reader"])["id"]
    agent.send(thread, "x" * seen["message_body_max"], summary="fits")
    too_long = agent.post(
        f"/threads/{thread}/messages",
        json={"body": "x" * (seen["message_body_max"] + 1), "summary": "one too many"},
    )
    assert too_long.status_code == 422, too_long.text
    assert too_long.json()["error"]["field"] == "body"


def test_limits_need_a_valid_token(api: Api) -> None:
    bare = httpx.get(f"{api.base_url}/v1/limits")
    assert bare.status_code == 401 and bare.json()["error"]["code"] == "unauthorized"
    wrong = api.get("/limits", headers={"Authorization": "Bearer agt_" + "x" * 43})
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "unauthorized"
