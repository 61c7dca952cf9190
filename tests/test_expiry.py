"""Expiry (agents-and-governance.md §3): ``ttl_seconds`` on a message; the sweep stamps
``expired_at`` on each delivery still unacknowledged when it passes (state ``expired``): it
leaves the inbox, is never notified again, stops counting toward the caps, and reading it is
``410 expired``. In the embedded default (the in-process timer) and the Celery shape (beat)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from inbots.config import Settings
from inbots.db.engine import Database
from inbots.deliveries.renotify import expire
from tests.helpers import Api
from tests.mcp_client import over_bridge, over_http, run, text_of
from tests.receivers import always, receiver

# Short-lived mail for tests: the minimum lowered, the sweep every 0.2 s (no rate limit).
SHORT = {"ttl_min_seconds": 1, "renotify_interval_seconds": 0.2}


def eventually(probe: Callable[[], bool], timeout: float, what: str) -> float:
    """Wait until ``probe()``; returns when (monotonic)."""
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return time.monotonic()


def parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def test_ttl_out_of_range_is_refused_with_the_bounds_and_stores_nothing(api: Api) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("TTL", ["bob"])["id"]
    for bad in (299, 604_801, 0, -5):
        answer = alice.post(f"/threads/{thread}/messages", json={"body": "x", "ttl_seconds": bad})
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["field"] == "ttl_seconds"
        assert "300" in error["message"] and "604800" in error["message"], error["message"]
    direct = alice.post("/messages", json={"to": ["bob"], "body": "x", "ttl_seconds": 10})
    assert direct.status_code == 422 and "300" in direct.json()["error"]["message"]
    assert bob.inbox()["waiting"] == 0
    limits = api.ok("GET", "/limits")
    assert (limits["ttl_min_seconds"], limits["ttl_max_seconds"]) == (300, 604_800)


def test_a_message_shows_its_ttl_and_expiry(api: Api) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("TTL", ["bob"])["id"]
    sent = alice.send(thread, "soon stale", ttl_seconds=600)["message"]
    assert sent["ttl_seconds"] == 600
    assert parse(sent["expires_at"]) - parse(sent["created_at"]) == timedelta(seconds=600)
    plain = alice.send(thread, "forever")["message"]
    assert plain["ttl_seconds"] is None and plain["expires_at"] is None
    read = bob.ok("GET", f"/messages/{sent['id']}")
    assert read["message"]["ttl_seconds"] == 600
    direct = alice.ok(
        "POST", "/messages", 201, json={"to": ["bob"], "body": "d", "ttl_seconds": 300}
    )
    assert direct["message"]["ttl_seconds"] == 300


def expiry_scenario(api: Api, timeout: float) -> None:
    """A 2 s message expires on time (within ``timeout``) for the recipient who had not
    acknowledged it; the acknowledged one and the long-lived one beside it do not. Each short
    message is looked at right after its send, so that a slow machine (a request can take a
    good part of a second under a loaded parallel run) does not see it expire first; the
    acknowledged one lives 5 s, so that its send and acknowledgement fit in its life on such a
    machine, and is looked at once that has passed."""
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("Expiring", ["bob"])["id"]
    acked = alice.send(thread, "acknowledged in time", ttl_seconds=5)
    done = bob.ok("POST", "/acks", json={"ids": [acked["message"]["id"]], "outcome": "done"})
    assert len(done["acknowledged"]) == 1 and "expired" not in done, done
    keep = alice.send(thread, "kept", ttl_seconds=3_600)
    short = alice.send(thread, "stale in two seconds", ttl_seconds=2)
    delivery = short["deliveries"][0]["id"]
    assert api.delivery(delivery)["state"] == "accepted"  # never listed: nothing outranks expired
    expires_at = parse(short["message"]["expires_at"])

    eventually(lambda: api.delivery(delivery)["state"] == "expired", timeout, "the expiry")
    seen = api.delivery(delivery)
    late = parse(seen["expired_at"]) - expires_at
    assert timedelta(0) <= late < timedelta(seconds=timeout), late
    inbox = bob.inbox()
    assert [i["message_id"] for i in inbox["items"]] == [keep["message"]["id"]]
    assert inbox["waiting"] == 1
    gone = bob.get(f"/messages/{short['message']['id']}")
    assert gone.status_code == 410, gone.text
    assert gone.json()["error"]["code"] == "expired"
    assert seen["expired_at"] in gone.json()["error"]["message"], gone.text  # RFC 3339, Z
    assert bob.get(f"/messages/{delivery}").status_code == 410
    # The acknowledged one is not expired, its life over; the sender still reads its own message.
    remaining = parse(acked["message"]["expires_at"]) - datetime.now(UTC)
    time.sleep(max(0.0, remaining.total_seconds()) + 1.0)  # past its expiry, and a sweep more
    assert api.delivery(acked["deliveries"][0]["id"])["expired_at"] is None
    assert api.delivery(acked["deliveries"][0]["id"])["state"] == "acknowledged"
    assert alice.ok("GET", f"/messages/{short['message']['id']}")["message"]["id"]
    assert api.delivery(keep["deliveries"][0]["id"])["expired_at"] is None


@pytest.mark.parametrize("settings_overrides", [SHORT])
def test_a_shown_delivery_expires_too_and_keeps_its_state(api: Api) -> None:
    """The state order puts expired after failed: mail already listed stays ``delivered`` with
    ``expired_at`` set, and leaves the inbox all the same."""
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("Shown", ["bob"])["id"]
    sent = alice.send(thread, "listed, then stale", ttl_seconds=3)
    delivery = sent["deliveries"][0]["id"]
    listed = bob.inbox()  # listing stamps delivered
    assert [i["delivery_id"] for i in listed["items"]] == [delivery], listed
    assert api.delivery(delivery)["state"] == "delivered"
    eventually(lambda: api.delivery(delivery)["expired_at"] is not None, 10.0, "the expiry")
    assert api.delivery(delivery)["state"] == "delivered"
    assert bob.inbox()["waiting"] == 0
    assert api.ok("GET", "/agents/bob")["unread"] == 0  # the directory agrees with the inbox
    assert bob.get(f"/messages/{sent['message']['id']}").status_code == 410


@pytest.mark.parametrize("settings_overrides", [SHORT])
def test_expired_mail_is_no_longer_the_recipients_anywhere(api: Api) -> None:
    """Once expired, the mail is out of the recipient's reach everywhere a read of it is 410:
    its thread's history and search leave it out (nothing is stamped fetched), and received,
    working and acknowledging it are refused (``410 expired``, or ``expired`` in a batch's
    answer) without a stamp, so it stays ``expired`` and its sender gets no receipt. The
    sender still sees it, and so does the operator."""
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("Going stale", ["bob"])["id"]
    short = alice.send(thread, "zanzibar grows stale", ttl_seconds=1)
    kept = alice.send(thread, "zanzibar kept")
    message, delivery = short["message"]["id"], short["deliveries"][0]["id"]
    eventually(lambda: api.delivery(delivery)["state"] == "expired", 8.0, "the expiry")

    history = bob.ok("GET", f"/threads/{thread}/messages")["items"]
    assert [m["id"] for m in history] == [kept["message"]["id"]]
    since = bob.ok("GET", f"/threads/{thread}/messages", params={"since": "2000-01-01T00:00:00Z"})
    assert [m["id"] for m in since["items"]] == [kept["message"]["id"]]
    hits = bob.ok("GET", "/search", params={"q": "zanzibar"})["items"]
    assert [h["message_id"] for h in hits] == [kept["message"]["id"]]

    for path in (f"/deliveries/{delivery}/received", f"/deliveries/{delivery}/working"):
        refused = bob.post(path, json={} if path.endswith("working") else None)
        assert refused.status_code == 410, (path, refused.text)
        assert refused.json()["error"]["code"] == "expired"
        assert "no longer yours" in refused.json()["error"]["message"]

    for connect in (over_http, over_bridge):  # /mcp, and inbots mcp's bridge over HTTP

        async def mark_working(connect: Any = connect) -> tuple[dict[str, Any], str]:
            async with connect(api.base_url, bob.token) as tools:
                result = await tools.call("mark_working", ids=[delivery, message])
                assert not result.is_error, text_of(result)
                assert isinstance(result.structured_content, dict)
                return result.structured_content, text_of(result)

        batch, said = run(mark_working)  # the batch heartbeat (MCP): answered per id
        assert batch["expired"] == [delivery, message] and batch["working"] == [], connect
        assert "Expired unacknowledged, no longer yours" in said
    acks = bob.ok("POST", "/acks", json={"ids": [message, kept["message"]["id"]]})
    assert acks["expired"] == [message] and acks["acknowledged"] == [kept["message"]["id"]]

    seen = api.delivery(delivery)
    assert seen["state"] == "expired"
    assert all(seen[stamp] is None for stamp in ("fetched_at", "working_at", "acknowledged_at"))
    receipts = alice.ok("GET", "/inbox/wait", params={"timeout": "1", "events": "receipts"})
    assert [r["message_id"] for r in receipts["receipts"]] == [kept["message"]["id"]]
    # The sender and the operator still read the whole thread.
    assert len(alice.ok("GET", f"/threads/{thread}/messages")["items"]) == 2
    assert len(api.ok("GET", f"/threads/{thread}/messages")["items"]) == 2
    assert api.delivery(delivery)["state"] == "expired"  # the operator's read stamps nothing


@pytest.mark.parametrize("settings_overrides", [SHORT])
def test_a_message_expires_on_time_in_the_embedded_default(api: Api) -> None:
    expiry_scenario(api, timeout=3.0)


@pytest.mark.parametrize("settings_overrides", [{**SHORT, "cap_per_pair": 1}])
def test_an_expired_delivery_stops_counting_toward_the_caps(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("Caps", ["bob"])["id"]
    # 3 s: long enough that the refusal below comes before the expiry on a loaded machine.
    first = alice.send(thread, "fills the pair cap", ttl_seconds=3)
    answer = alice.post(f"/threads/{thread}/messages", json={"body": "refused"})
    assert answer.status_code == 429
    delivery = first["deliveries"][0]["id"]
    eventually(lambda: api.delivery(delivery)["state"] == "expired", 8.0, "the expiry")
    alice.send(thread, "fits again")


NO_SWEEP_SLOW_RETRY = {
    **SHORT,
    "renotify_interval_seconds": 3_600,
    "retry_schedule": "1.5,1.5,1.5",
    "retry_jitter": 0.1,
    "publish_lost_seconds": 120,
}


@pytest.mark.parametrize("settings_overrides", [NO_SWEEP_SLOW_RETRY])
def test_an_expired_delivery_is_never_notified_again(
    api: Api, settings: Settings, database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """A webhook that fails gets its first try; the retry falls after the expiry and is not
    made, nor is an operator's redelivery of the expired delivery. The server's one sweep at
    start-up may fall after the expiry on a loaded machine: what it expired counts too."""
    caplog.set_level("INFO", logger="inbots.deliveries.renotify")
    with receiver(always(500)) as hook:
        api.ok("POST", "/agents", 201, json={"name": "hooked", "webhook_url": hook.url})
        alice = api.agent("alice")
        thread = alice.open_thread("Hooks", ["hooked"])["id"]
        sent = alice.send(thread, "quick", ttl_seconds=1)
        hook.wait_for(1, 10)  # the first try goes out at once
        delivery = sent["deliveries"][0]["id"]
        time.sleep(2.5)  # past the retry's time (1.35 to 1.65 s)
        assert len(hook.requests) == 1
        swept = sum(
            getattr(record, "expired", 0)
            for record in caplog.records
            if record.getMessage() == "renotify sweep"
        )
        assert expire(database, settings) + swept == 1  # the sweep's function, called now
        assert api.delivery(delivery)["state"] == "expired"
        api.ok("POST", f"/deliveries/{delivery}/redeliver", 202)
        time.sleep(1.0)
        assert len(hook.requests) == 1
