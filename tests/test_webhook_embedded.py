"""The delivery engine in the embedded default: the local dispatcher runs the same notify
function the Celery task wraps, against real receivers on loopback."""

from __future__ import annotations

import time
from typing import Any

import pytest
import standardwebhooks

from tests.helpers import Api, attempt_waits
from tests.receivers import FAST, always, fail_then_ok, receiver


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return dict(FAST)


def wait_state(api: Api, delivery_id: str, state: str, timeout: float = 10) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        receipt = api.delivery(delivery_id)
        if receipt["state"] == state or time.monotonic() > deadline:
            return receipt
        time.sleep(0.05)


def test_healthy_receiver_is_notified_with_a_verifiable_signature(api: Api) -> None:
    with receiver(always(204)) as hook:
        created = api.ok("POST", "/agents", 201, json={"name": "pusher", "webhook_url": hook.url})
        secret = created["webhook"]["signing_secret"]
        sender = api.agent("sender")
        thread = sender.open_thread("Push me", ["pusher"])
        sent = sender.send(thread["id"], "Wake up", summary="Wake up please", kind="question")
        delivery_id = sent["deliveries"][0]["id"]
        (request,) = hook.wait_for(1)
        receipt = wait_state(api, delivery_id, "notified")
    assert receipt["state"] == "notified" and receipt["notified_at"]
    payload = standardwebhooks.Webhook(secret).verify(request.body, request.headers)
    assert payload["delivery_id"] == delivery_id
    assert payload["summary"] == "Wake up please"
    assert "body" not in payload
    assert request.headers["webhook-id"] == delivery_id
    detail = api.delivery(delivery_id)
    assert [(a["number"], a["reason"], a["status_code"]) for a in detail["attempts"]] == [
        (1, "ok", 204)
    ]


def test_receiver_failing_twice_is_retried_then_notified(api: Api) -> None:
    with receiver(fail_then_ok(2)) as hook:
        api.ok("POST", "/agents", 201, json={"name": "flaky", "webhook_url": hook.url})
        sender = api.agent("sender")
        thread = sender.open_thread("Retry me", ["flaky"])
        delivery_id = sender.send(thread["id"], "hello")["deliveries"][0]["id"]
        requests = hook.wait_for(3)
        receipt = wait_state(api, delivery_id, "notified")
    assert receipt["state"] == "notified"
    detail = api.delivery(delivery_id)
    assert [a["reason"] for a in detail["attempts"]] == ["http_500", "http_500", "ok"]
    waits = attempt_waits(detail)
    assert 0.15 <= waits[0] <= 1.0 and 0.3 <= waits[1] <= 1.5, waits
    assert len({r.headers["webhook-id"] for r in requests}) == 1
