"""Operator alerts in the Celery shape (PostgreSQL, a real Redis, worker and beat): the beat's
renotify sweep stamps a delivery stalled and its ``delivery.stalled`` alert reaches the alert
webhook signed; a worker's failed attempts raise ``agent.webhook_failing`` and
``delivery.failed``, published by the worker that raised them; with no worker at all, beat itself
tells of the backlog and of the workers being down."""

from __future__ import annotations

import time

import pytest

from tests.celery_harness import (  # noqa: F401  (fixtures)
    FAST,
    CeleryHarness,
    celery_fixture,
    hooked_agent,
    redis_broker_fixture,
    settings_overrides_fixture,
    timings_fixture,
    wait_state,
)
from tests.helpers import Api
from tests.receivers import always, receiver
from tests.test_alerts import alert_hook, alerts_of


@pytest.mark.parametrize("backend", ["postgres"])
@pytest.mark.parametrize(
    "timings",
    [{**FAST, "stall_seconds": 1.0, "renotify_interval_seconds": 0.5, "alert_webhook_failures": 3}],
)
def test_alerts_reach_the_alert_webhook_signed_in_the_celery_shape(
    api: Api, celery: CeleryHarness
) -> None:
    with receiver(always(204)) as ops, receiver(always(500)) as broken_hook:
        secret = alert_hook(api, ops)
        api.agent("idle")  # no webhook: its mail stalls
        hooked_agent(api, "broken", broken_hook.url)
        sender = api.agent("sender")
        stalled = sender.send(sender.open_thread("Stall", ["idle"])["id"], "wait")
        failing = sender.send(sender.open_thread("Fail", ["broken"])["id"], "fail")
        celery.worker()
        celery.beat(wait=False)
        idle_delivery = stalled["deliveries"][0]["id"]
        broken_delivery = failing["deliveries"][0]["id"]
        (alert,) = alerts_of(
            ops, secret, "delivery.stalled", 1, timeout=30, delivery_id=idle_delivery
        )
        (streak,) = alerts_of(ops, secret, "agent.webhook_failing", 1, timeout=30)
        (failed,) = alerts_of(ops, secret, "delivery.failed", 1, timeout=30)
        wait_state(api, broken_delivery, "failed", 10, celery)
    assert (alert["recipient"], alert["state"]) == ("idle", "stalled")
    assert alert["message_id"] == stalled["message"]["id"]
    assert (streak["agent"], streak["failures"]) == ("broken", 3)
    assert (failed["delivery_id"], failed["recipient"]) == (broken_delivery, "broken")
    assert failed["reason"].startswith("webhook attempts exhausted (4;")


WATCH = {
    **FAST,
    "renotify_interval_seconds": 0.5,
    "workers_down_seconds": 2.0,
    "backlog_alert_seconds": 1.0,
    "alert_interval_seconds": 60.0,
}


@pytest.mark.parametrize("backend", ["postgres"])
@pytest.mark.parametrize("timings", [WATCH], ids=["watch"])
def test_with_every_worker_down_beat_itself_tells_of_the_backlog_and_the_workers(
    api: Api, celery: CeleryHarness
) -> None:
    """No worker runs at all, only beat: mail waits in the broker and no sweep runs. Beat's own
    watch sees both and sends ``queue.backlog`` and ``workers.down`` to the alert webhook from its
    process, signed — once each within the alert interval, however many times it looks."""
    with receiver(always(204)) as ops, receiver(always(200)) as mailbox:
        secret = alert_hook(api, ops, ["queue.backlog", "workers.down"])
        hooked_agent(api, "reader", mailbox.url)
        sender = api.agent("sender")
        thread = sender.open_thread("Nobody home", ["reader"])["id"]
        for i in range(3):
            sender.send(thread, f"waiting {i}")
        celery.beat(wait=False)
        (backlog,) = alerts_of(ops, secret, "queue.backlog", 1, timeout=30)
        (down,) = alerts_of(ops, secret, "workers.down", 1, timeout=30)
        time.sleep(2)  # four more looks: nothing new within the interval
        with ops.lock:
            told = [r.headers["webhook-id"] for r in ops.requests]
        assert mailbox.requests == []
    assert sorted(told) == sorted([backlog["event_id"], down["event_id"]]), told
    assert backlog["depth"] == backlog["queues"]["notify"] == 3, backlog
    assert backlog["oldest_age_seconds"] > 1.0
    assert "INBOTS_BACKLOG_ALERT_SECONDS" in backlog["reason"]
    assert down["last_sweep_at"] is None and down["depth"] == 3, down
    assert "no renotify sweep has finished" in down["reason"]
    attempts = api.ok("GET", f"/events/{down['event_id']}")["attempts"]
    assert [a["reason"] for a in attempts] == ["ok"]
