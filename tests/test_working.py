"""The working heartbeat: ``POST /v1/deliveries/{id}/working`` and the ``mark_working`` tool (over
``/mcp`` and over stdio), the ``working`` state, what the sender sees, and the stall rule.

The stall rule runs the renotify sweep as the beat does, with short stall times in the settings and
``now`` a few minutes ahead (the test server's own embedded sweep runs on the real clock, where
nothing is old yet)."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import httpx
import pytest

from inbots.config import Settings
from inbots.db.engine import Database
from inbots.deliveries.renotify import sweep
from inbots.deliveries.state import STATES, state_of
from inbots.kit.clock import read_rfc3339
from tests.conftest import ServerThread
from tests.helpers import Api, Caller
from tests.mcp_client import Connect, over_bridge, over_http, run

SHORT_STALLS = {"stall_seconds": 60.0, "working_stall_seconds": 600.0}


def setup(
    api: Api, recipients: tuple[str, ...] = ("bob",)
) -> tuple[Caller, dict[str, Caller], dict[str, Any]]:
    """``alice`` sends one task to ``recipients``; returns her, them and the send's answer."""
    alice = api.agent("alice")
    agents = {name: api.agent(name) for name in recipients}
    thread = alice.open_thread("A long task", list(recipients))
    return alice, agents, alice.send(thread["id"], "Port the parser", kind="task")


def working(who: Caller, delivery_id: str, **body: Any) -> httpx.Response:
    return who.post(f"/deliveries/{delivery_id}/working", json=body or None)


def receipt_of(sender: Caller, message_id: str, name: str) -> dict[str, Any]:
    message = sender.ok("GET", f"/messages/{message_id}")
    (found,) = [r for r in message["receipts"] if r["recipient"] == name]
    return found  # type: ignore[no-any-return]


def test_working_sits_between_fetched_and_acknowledged_in_the_state_order() -> None:
    assert STATES.index("working") == STATES.index("acknowledged") + 1
    assert STATES.index("fetched") == STATES.index("working") + 1

    class Row:
        accepted_at = notified_at = delivered_at = failed_at = stalled_at = None
        fetched_at = working_at = acknowledged_at = None

    row = Row()
    row.fetched_at = read_rfc3339("2026-11-30T10:00:00Z")
    assert state_of(row) == "fetched"
    row.working_at = read_rfc3339("2026-11-30T10:01:00Z")
    assert state_of(row) == "working"
    row.stalled_at = read_rfc3339("2026-11-30T12:00:00Z")
    assert state_of(row) == "working"  # working ranks above stalled, as fetched does
    row.acknowledged_at = read_rfc3339("2026-11-30T10:02:00Z")
    assert state_of(row) == "acknowledged"


def test_a_heartbeat_stamps_working_again_and_the_sender_sees_it(api: Api) -> None:
    alice, agents, sent = setup(api, ("carol",))
    carol = agents["carol"]
    message_id, delivery_id = sent["message"]["id"], sent["deliveries"][0]["id"]
    carol.ok("GET", f"/messages/{delivery_id}")  # fetched

    first = carol.ok("POST", f"/deliveries/{delivery_id}/working")  # no body at all
    assert first["id"] == delivery_id and first["state"] == "working"
    assert first["working_at"] and first["working_note"] is None
    assert api.delivery(delivery_id)["state"] == "working"

    time.sleep(0.01)
    again = working(carol, delivery_id, note="halfway")
    assert again.status_code == 200, again.text
    second = again.json()
    assert second["working_at"] > first["working_at"]  # a heartbeat, not a one-off stamp
    assert second["working_note"] == "halfway"
    # One without a note keeps the last note.
    assert working(carol, delivery_id).json()["working_note"] == "halfway"

    receipt = receipt_of(alice, message_id, "carol")
    assert receipt["state"] == "working"
    assert receipt["working_at"] and receipt["working_at"] >= second["working_at"]
    assert receipt["working_note"] == "halfway" and receipt["note"] is None
    outbox = alice.ok("GET", "/outbox", params={"state": "working"})
    assert [i["message"]["id"] for i in outbox["items"]] == [message_id]
    (listed,) = outbox["items"][0]["receipts"]
    assert listed["working_at"] == receipt["working_at"]

    # The operator's views count it by state.
    assert [
        d["id"] for d in api.ok("GET", "/deliveries", params={"state": "working"})["items"]
    ] == [delivery_id]
    assert api.ok("GET", "/stats")["deliveries"]["working"] == 1

    # Done: acknowledged, and no more heartbeats.
    carol.ok("POST", "/acks", json={"ids": [delivery_id], "outcome": "done", "note": "sent"})
    assert receipt_of(alice, message_id, "carol")["state"] == "acknowledged"
    refused = working(carol, delivery_id)
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "already_acknowledged"
    assert "send a message in its thread" in error["message"]


def test_only_the_recipient_may_mark_working(api: Api, other_api: Api) -> None:
    alice, _, sent = setup(api)
    (delivery_id,) = [d["id"] for d in sent["deliveries"]]
    outsider = other_api.agent("mallory")
    for who in (alice, outsider, api.agent("carol")):
        refused = working(who, delivery_id, note="mine now")
        assert refused.status_code == 404, refused.text
        error = refused.json()["error"]
        assert error["code"] == "not_found" and "dlv_" in error["message"]
    assert working(api, delivery_id).status_code == 404  # the operator is not its recipient
    assert working(alice, "dlv_nothing").status_code == 404
    detail = api.delivery(delivery_id)
    assert detail["working_at"] is None and detail["working_note"] is None


def test_bad_input_is_refused_and_changes_nothing(api: Api, settings: Settings) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("t", ["bob"])
    (delivery_id,) = [d["id"] for d in alice.send(thread["id"], "x")["deliveries"]]
    too_long = working(bob, delivery_id, note="n" * (settings.note_max + 1))
    assert too_long.status_code == 422, too_long.text
    error = too_long.json()["error"]
    assert error["field"] == "note" and str(settings.note_max) in error["message"]
    unknown = working(bob, delivery_id, notes="typo")
    assert unknown.status_code == 422
    assert unknown.json()["error"]["code"] == "unknown_field"
    assert "note" in unknown.json()["error"]["message"]
    wrong_type = working(bob, delivery_id, note=12)
    assert wrong_type.status_code == 422
    not_json = bob.post(f"/deliveries/{delivery_id}/working", content=b"[1, 2]")
    assert not_json.status_code == 422
    assert api.delivery(delivery_id)["working_at"] is None
    fits = working(bob, delivery_id, note="n" * settings.note_max)
    assert fits.status_code == 200 and fits.json()["working_note"] == "n" * settings.note_max


@pytest.mark.parametrize("settings_overrides", [SHORT_STALLS])
def test_a_working_delivery_is_not_stalled_until_its_heartbeat_lapses(
    api: Api, database: Database, settings: Settings
) -> None:
    _, agents, sent = setup(api, ("bob", "carol", "dave"))
    ids = {d["recipient"]: d["id"] for d in sent["deliveries"]}
    bob, carol = agents["bob"], agents["carol"]
    marked = [
        who.ok("POST", f"/deliveries/{ids[name]}/working")["working_at"]
        for name, who in (("bob", bob), ("carol", carol))
    ]
    w1 = read_rfc3339(max(marked))
    assert w1 is not None
    time.sleep(1.1)
    carol.ok("POST", f"/deliveries/{ids['carol']}/working", json={"note": "still on it"})

    def report(at: float) -> int:
        return sweep(database, settings, lambda jobs: None, w1 + timedelta(seconds=at)).stalled

    # Past the stall time (60 s) but inside the working window (600 s): only dave, who never
    # said he was working, is stalled.
    report(120)
    assert api.delivery(ids["dave"])["stalled_at"] is not None
    assert api.delivery(ids["bob"])["stalled_at"] is None
    assert api.delivery(ids["carol"])["stalled_at"] is None
    # The working window has passed since bob's only heartbeat, but not since carol's second.
    report(600.5)
    bob_now = api.delivery(ids["bob"])
    assert bob_now["stalled_at"] is not None and bob_now["state"] == "working"
    assert api.delivery(ids["carol"])["stalled_at"] is None
    # Without another heartbeat carol's lapses too.
    report(700)
    assert api.delivery(ids["carol"])["stalled_at"] is not None


@pytest.fixture(params=["http", "bridge"])
def connect(request: pytest.FixtureRequest, server: ServerThread) -> Connect:
    """``/mcp``, or the ``inbots mcp`` bridge in process (see ``tests.mcp_client.over_bridge``)."""
    if request.param == "http":
        return lambda key: over_http(server.url, key)
    return lambda key: over_bridge(server.url, key)


def test_mark_working_through_the_tools_answers_per_id(api: Api, connect: Connect) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("Two tasks", ["bob"])
    first = alice.send(thread["id"], "First task", kind="task")
    second = alice.send(thread["id"], "Second task", kind="task")
    (d1,) = [d["id"] for d in first["deliveries"]]
    (d2,) = [d["id"] for d in second["deliveries"]]
    bob.ok("POST", "/acks", json={"ids": [d2], "outcome": "done"})

    async def scenario() -> None:
        async with connect(bob.token) as tools:
            listed = {t.name: t for t in (await tools.client.list_tools()).tools}
            ids_schema = listed["mark_working"].input_schema["properties"]["ids"]
            assert (ids_schema["minItems"], ids_schema["maxItems"]) == (1, 100)
            note_schema = listed["mark_working"].input_schema["properties"]["note"]
            assert "500" in str(note_schema)
            answer = await tools.ok(
                "mark_working", ids=[d1, d2, "dlv_unknown"], note="on the first one"
            )
            assert [d["id"] for d in answer["working"]] == [d1]
            assert answer["working"][0]["state"] == "working"
            assert answer["working"][0]["working_note"] == "on the first one"
            assert answer["already_acknowledged"] == [d2]
            assert answer["not_found"] == ["dlv_unknown"]
            # By message id too, as acknowledge takes them.
            by_message = await tools.ok("mark_working", ids=[first["message"]["id"]])
            assert [d["id"] for d in by_message["working"]] == [d1]
            code, _ = await tools.error("mark_working", ids=[])
            assert code == "validation_error"
            code, text = await tools.error("mark_working", ids=[d1], notes="typo")
            assert code == "unknown_field" and "note" in text
            code, _ = await tools.error("mark_working", ids=[d1], note="n" * 501)
            assert code == "validation_error"
        async with connect(alice.token) as tools:
            # The sender cannot mark its own message's delivery: not its delivery.
            answer = await tools.ok("mark_working", ids=[d1])
            assert answer["working"] == [] and answer["not_found"] == [d1]
            sent = await tools.ok("check_sent", state="working")
            (receipt,) = sent["items"][0]["receipts"]
            assert receipt["state"] == "working" and receipt["working_at"]
            assert receipt["working_note"] == "on the first one"
            assert "working" in (await tools.call("check_sent")).content[0].text  # type: ignore[union-attr]

    run(scenario)
    detail = api.delivery(d1)
    assert detail["state"] == "working" and detail["working_note"] == "on the first one"


def test_metrics_count_working_deliveries(api: Api, server: ServerThread) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("t", ["bob"])
    (delivery_id,) = [d["id"] for d in alice.send(thread["id"], "x")["deliveries"]]
    bob.ok("POST", f"/deliveries/{delivery_id}/working")
    scraped = api.client.get("/metrics", headers=api.headers)
    assert scraped.status_code == 200, scraped.text
    assert 'inbots_deliveries{state="working"}' in scraped.text
