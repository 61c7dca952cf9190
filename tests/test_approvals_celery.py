"""The approval gate in the Celery shape (PostgreSQL, a real worker on a real Redis): a held
message is published by nobody; approving it publishes its notification, which the worker
delivers to the recipient's webhook on loopback."""

from __future__ import annotations

import time

import pytest
import standardwebhooks

from inbots.config import Settings
from tests.celery_harness import (  # noqa: F401  (fixtures)
    CeleryHarness,
    celery_fixture,
    redis_broker_fixture,
    settings_overrides_fixture,
    timings_fixture,
)
from tests.helpers import Api
from tests.receivers import always, receiver


@pytest.mark.parametrize("backend", ["postgres"])
def test_approval_publishes_and_the_worker_delivers_the_webhook(
    api: Api, celery: CeleryHarness, settings: Settings
) -> None:
    assert not settings.embedded
    process = celery.worker()
    with receiver(always(200)) as hook:
        lead = api.agent("lead")
        api.ok("PUT", "/policy", json={"approval": {"senders": ["lead"]}})
        worker = api.agent("worker")
        secret = worker.ok("PUT", "/me/webhook", json={"url": hook.url})["signing_secret"]
        thread = lead.open_thread("Through the worker", ["worker"])["id"]
        sent = lead.send(thread, "Rotate the keys", kind="task")
        assert sent["held"] is True
        delivery_id = sent["deliveries"][0]["id"]
        time.sleep(1.0)
        assert hook.requests == [], "nothing is published for held mail"
        api.ok("POST", f"/approvals/{sent['message']['id']}/approve")
        (request,) = celery.wait_for(hook, 1, timeout=20)
    payload = standardwebhooks.Webhook(secret).verify(request.body, request.headers)
    assert payload["type"] == "message.created" and payload["delivery_id"] == delivery_id
    deadline = time.monotonic() + 10
    while (detail := api.delivery(delivery_id))["state"] != "notified":
        assert time.monotonic() < deadline, detail
        time.sleep(0.05)
    assert [(a["trigger"], a["reason"]) for a in detail["attempts"]] == [("publish", "ok")]
    assert "delivery.notify" in process.log()  # the worker ran it, not the web process
