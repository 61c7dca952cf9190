"""Receipts: POST /v1/deliveries/{id}/received (agents) and GET /v1/deliveries[/{id}] (operator)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from sqlalchemy import update

from inbots.db.engine import Database
from inbots.db.uow import unit_of_work
from inbots.kit.clock import utcnow
from inbots.models.deliveries import Delivery
from tests.helpers import Api, Caller, assert_error

DELIVERY_KEYS = {
    "id",
    "message_id",
    "thread_id",
    "recipient",
    "state",
    "accepted_at",
    "notified_at",
    "delivered_at",
    "fetched_at",
    "acknowledged_at",
    "failed_at",
    "failure_reason",
    "stalled_at",
    "publish_count",
    "next_attempt_at",
    "outcome",
    "note",
}
STAMP_KEYS = (
    "accepted_at",
    "notified_at",
    "delivered_at",
    "fetched_at",
    "acknowledged_at",
    "failed_at",
    "stalled_at",
    "next_attempt_at",
)
RFC3339_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def assert_times(delivery: dict[str, Any]) -> None:
    for key in STAMP_KEYS:
        value = delivery[key]
        assert value is None or RFC3339_Z.match(value), (key, value)


def delivery_to(sent: dict[str, Any], recipient: str) -> str:
    (delivery_id,) = [d["id"] for d in sent["deliveries"] if d["recipient"] == recipient]
    return str(delivery_id)


def pair(api: Api) -> tuple[Caller, Caller, dict[str, Any]]:
    sender = api.agent("sender")
    reader = api.agent("reader")
    thread = sender.open_thread("Migrate the database", ["reader"])
    return sender, reader, thread


def listing(api: Api, **params: Any) -> dict[str, Any]:
    return api.ok("GET", "/deliveries", params=params)


def set_stamps(database: Database, delivery_id: str, **values: Any) -> None:
    with unit_of_work(database) as uow:
        uow.session.execute(update(Delivery).where(Delivery.id == delivery_id).values(**values))


# --- POST /v1/deliveries/{id}/received ---


def test_received_stamps_delivered_and_returns_the_delivery(api: Api) -> None:
    sender, reader, thread = pair(api)
    sent = sender.send(thread["id"], "webhook woke you")
    delivery_id = delivery_to(sent, "reader")

    receipt = reader.ok("POST", f"/deliveries/{delivery_id}/received")

    assert set(receipt) >= DELIVERY_KEYS
    assert receipt["id"] == delivery_id
    assert receipt["message_id"] == sent["message"]["id"]
    assert receipt["thread_id"] == thread["id"]
    assert receipt["recipient"] == "reader"
    assert receipt["state"] == "delivered"
    assert receipt["delivered_at"] is not None
    assert receipt["fetched_at"] is None and receipt["acknowledged_at"] is None
    assert_times(receipt)
    stored = api.delivery(delivery_id)
    assert stored["state"] == "delivered" and stored["delivered_at"] == receipt["delivered_at"]


def test_received_again_does_not_overwrite_delivered_at(api: Api) -> None:
    sender, reader, thread = pair(api)
    delivery_id = delivery_to(sender.send(thread["id"], "twice"), "reader")
    first = reader.ok("POST", f"/deliveries/{delivery_id}/received")

    second = reader.ok("POST", f"/deliveries/{delivery_id}/received")

    assert second["delivered_at"] == first["delivered_at"]


def test_received_after_fetch_keeps_the_fetched_state(api: Api) -> None:
    sender, reader, thread = pair(api)
    sent = sender.send(thread["id"], "already read")
    reader.ok("GET", f"/messages/{sent['message']['id']}")

    receipt = reader.ok("POST", f"/deliveries/{delivery_to(sent, 'reader')}/received")

    assert receipt["state"] == "fetched"


def test_received_for_someone_elses_delivery_is_not_found(api: Api) -> None:
    sender, reader, thread = pair(api)
    api.agent("other")
    api.ok("POST", f"/threads/{thread['id']}/participants", json={"username": "other"})
    sent = sender.send(thread["id"], "for two")
    theirs = delivery_to(sent, "other")

    assert_error(reader.post(f"/deliveries/{theirs}/received"), 404, "not_found")
    # The sender has no delivery of its own message either.
    assert_error(sender.post(f"/deliveries/{theirs}/received"), 404, "not_found")
    assert api.delivery(theirs)["delivered_at"] is None


def test_received_for_a_made_up_id_is_not_found(api: Api) -> None:
    reader = api.agent("reader")
    assert_error(
        reader.post("/deliveries/dlv_00000000000000000000000000/received"), 404, "not_found"
    )
    assert_error(reader.post("/deliveries/whatever/received"), 404, "not_found")


def test_received_in_a_closed_thread_is_not_found(api: Api) -> None:
    sender, reader, thread = pair(api)
    delivery_id = delivery_to(sender.send(thread["id"], "closing"), "reader")
    api.ok("POST", f"/threads/{thread['id']}/close")

    assert_error(reader.post(f"/deliveries/{delivery_id}/received"), 404, "not_found")
    assert api.delivery(delivery_id)["delivered_at"] is None


def test_received_for_another_workspaces_delivery_is_not_found(api: Api, other_api: Api) -> None:
    sender, _reader, thread = pair(api)
    delivery_id = delivery_to(sender.send(thread["id"], "mine"), "reader")
    stranger = other_api.agent("reader")

    assert_error(stranger.post(f"/deliveries/{delivery_id}/received"), 404, "not_found")
    assert api.delivery(delivery_id)["delivered_at"] is None


# --- GET /v1/deliveries/{id} ---


def test_get_delivery_has_every_spec_field_and_an_empty_attempt_log(api: Api) -> None:
    sender, _, thread = pair(api)
    sent = sender.send(thread["id"], "polling agent, no webhook")
    delivery_id = delivery_to(sent, "reader")

    receipt = api.delivery(delivery_id)

    assert set(receipt) >= DELIVERY_KEYS | {"attempts"}
    assert receipt["attempts"] == []
    assert receipt["id"] == delivery_id
    assert receipt["message_id"] == sent["message"]["id"]
    assert receipt["thread_id"] == thread["id"]
    assert receipt["recipient"] == "reader"
    assert receipt["state"] == "accepted"
    assert RFC3339_Z.match(receipt["accepted_at"])
    for key in (
        "notified_at",
        "delivered_at",
        "fetched_at",
        "acknowledged_at",
        "failed_at",
        "failure_reason",
        "stalled_at",
        "next_attempt_at",
        "outcome",
        "note",
    ):
        assert receipt[key] is None, key
    assert receipt["publish_count"] == 0


def test_get_delivery_shows_every_stamp_in_rfc3339_z(api: Api, database: Database) -> None:
    sender, reader, thread = pair(api)
    sent = sender.send(thread["id"], "stamp me")
    delivery_id = delivery_to(sent, "reader")
    reader.ok("GET", f"/messages/{delivery_id}")
    reader.ok("POST", "/acks", json={"ids": [delivery_id], "outcome": "declined", "note": "no"})
    now = utcnow()
    set_stamps(
        database,
        delivery_id,
        notified_at=now,
        failed_at=now,
        failure_reason="gone",
        stalled_at=now,
        next_attempt_at=now,
    )

    receipt = api.delivery(delivery_id)

    for key in STAMP_KEYS:
        assert receipt[key] is not None and RFC3339_Z.match(receipt[key]), key
    assert receipt["state"] == "acknowledged"
    assert (receipt["outcome"], receipt["note"], receipt["failure_reason"]) == (
        "declined",
        "no",
        "gone",
    )


def test_get_delivery_of_another_workspace_is_not_found(api: Api, other_api: Api) -> None:
    sender, _, thread = pair(api)
    delivery_id = delivery_to(sender.send(thread["id"], "ours"), "reader")

    assert_error(other_api.get(f"/deliveries/{delivery_id}"), 404, "not_found")
    assert api.delivery(delivery_id)["id"] == delivery_id


def test_get_delivery_made_up_id_is_not_found(api: Api) -> None:
    assert_error(api.get("/deliveries/dlv_00000000000000000000000000"), 404, "not_found")


def test_agent_calling_operator_delivery_endpoints_is_forbidden(api: Api) -> None:
    sender, reader, thread = pair(api)
    delivery_id = delivery_to(sender.send(thread["id"], "mine"), "reader")

    assert_error(reader.get(f"/deliveries/{delivery_id}"), 403, "forbidden")
    assert_error(reader.get("/deliveries"), 403, "forbidden")
    assert_error(sender.get("/deliveries", params={"state": "accepted"}), 403, "forbidden")


def test_delivery_endpoints_without_token_are_unauthorized(api: Api) -> None:
    assert_error(api.client.get("/v1/deliveries"), 401, "unauthorized")
    assert_error(api.client.get("/v1/deliveries/dlv_x"), 401, "unauthorized")


# --- GET /v1/deliveries ---


def test_list_deliveries_filters_by_every_state(api: Api, database: Database) -> None:
    sender, reader, thread = pair(api)
    sent = {
        name: sender.send(thread["id"], name)
        for name in (
            "accepted",
            "notified",
            "delivered",
            "fetched",
            "acknowledged",
            "stalled",
            "failed",
            "moved-after-stall",
        )
    }
    ids = {name: delivery_to(s, "reader") for name, s in sent.items()}
    reader.ok("POST", f"/deliveries/{ids['delivered']}/received")
    reader.ok("GET", f"/messages/{ids['fetched']}")
    reader.ok("POST", "/acks", json={"ids": [ids["acknowledged"]]})
    now = utcnow()
    set_stamps(database, ids["notified"], notified_at=now)
    set_stamps(database, ids["stalled"], stalled_at=now)
    set_stamps(database, ids["failed"], failed_at=now, failure_reason="webhook attempts exhausted")
    set_stamps(database, ids["moved-after-stall"], stalled_at=now - timedelta(minutes=1))
    reader.ok("GET", f"/messages/{ids['moved-after-stall']}")  # it moved: no longer stalled

    expected = {
        "accepted": [ids["accepted"]],
        "notified": [ids["notified"]],
        "delivered": [ids["delivered"]],
        "fetched": [ids["moved-after-stall"], ids["fetched"]],
        "acknowledged": [ids["acknowledged"]],
        "stalled": [ids["stalled"]],
        "failed": [ids["failed"]],
    }
    for state, wanted in expected.items():
        page = listing(api, state=state)
        assert [d["id"] for d in page["items"]] == wanted, state
        assert all(d["state"] == state for d in page["items"]), state
        assert page["next_cursor"] is None
    assert (
        listing(api, state="failed")["items"][0]["failure_reason"] == "webhook attempts exhausted"
    )


def test_list_deliveries_invalid_state_is_rejected(api: Api) -> None:
    for state in ("bogus", "ACCEPTED", "read"):
        assert_error(
            api.get("/deliveries", params={"state": state}), 422, "validation_error", "state"
        )


def test_list_deliveries_filters_by_agent_id_or_username(api: Api) -> None:
    sender, reader, thread = pair(api)
    api.agent("other")
    api.ok("POST", f"/threads/{thread['id']}/participants", json={"username": "other"})
    first = sender.send(thread["id"], "one")
    second = sender.send(thread["id"], "two")
    reply = reader.send(thread["id"], "reply")
    reader_id = api.ok("GET", "/agents/reader")["id"]

    by_name = listing(api, agent="reader")
    by_id = listing(api, agent=reader_id)

    expected = [delivery_to(second, "reader"), delivery_to(first, "reader")]
    assert [d["id"] for d in by_name["items"]] == expected
    assert by_id == by_name
    assert all(d["recipient"] == "reader" for d in by_name["items"])
    assert [d["id"] for d in listing(api, agent="sender")["items"]] == [
        delivery_to(reply, "sender")
    ]
    assert listing(api, agent="nobody-here")["items"] == []


def test_list_deliveries_filters_by_thread(api: Api) -> None:
    sender, _reader, thread = pair(api)
    other_thread = sender.open_thread("Another task", ["reader"])
    here = sender.send(thread["id"], "here")
    there = sender.send(other_thread["id"], "there")

    assert [d["id"] for d in listing(api, thread=thread["id"])["items"]] == [
        delivery_to(here, "reader")
    ]
    assert [d["id"] for d in listing(api, thread=other_thread["id"])["items"]] == [
        delivery_to(there, "reader")
    ]
    assert listing(api, thread="th_unknown")["items"] == []


def test_list_deliveries_combines_filters(api: Api) -> None:
    sender, reader, thread = pair(api)
    other_thread = sender.open_thread("Another task", ["reader"])
    read_here = sender.send(thread["id"], "read me")
    sender.send(thread["id"], "leave me")
    read_there = sender.send(other_thread["id"], "read me too")
    for sent in (read_here, read_there):
        reader.ok("GET", f"/messages/{sent['message']['id']}")

    page = listing(api, state="fetched", agent="reader", thread=thread["id"])

    assert [d["id"] for d in page["items"]] == [delivery_to(read_here, "reader")]


def test_list_deliveries_shows_closed_threads_to_the_operator(api: Api) -> None:
    sender, _, thread = pair(api)
    sent = sender.send(thread["id"], "closing soon")
    api.ok("POST", f"/threads/{thread['id']}/close")

    page = listing(api, thread=thread["id"])

    assert [d["id"] for d in page["items"]] == [delivery_to(sent, "reader")]


def test_list_deliveries_item_shape_and_times(api: Api) -> None:
    sender, _, thread = pair(api)
    sent = sender.send(thread["id"], "shape")

    (item,) = listing(api)["items"]

    assert set(item) >= DELIVERY_KEYS
    assert item["id"] == delivery_to(sent, "reader") and item["state"] == "accepted"
    assert_times(item)


def test_list_deliveries_pagination_visits_every_row_once_newest_first(api: Api) -> None:
    sender, _reader, thread = pair(api)
    api.agent("other")
    api.ok("POST", f"/threads/{thread['id']}/participants", json={"username": "other"})
    created: list[str] = []
    for n in range(4):
        sent = sender.send(thread["id"], f"message {n}")
        created += [d["id"] for d in sent["deliveries"]]  # two per message, in creation order

    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        page = listing(api, **params)
        pages += 1
        assert len(page["items"]) <= 3
        seen += [d["id"] for d in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert pages < 10

    assert pages == 3
    assert seen == list(reversed(created))
    assert len(set(seen)) == len(seen) == 8
    accepted = [api.delivery(i)["accepted_at"] for i in seen]
    assert accepted == sorted(accepted, reverse=True)


def test_list_deliveries_pagination_with_a_state_filter(api: Api) -> None:
    sender, reader, thread = pair(api)
    sent = [sender.send(thread["id"], f"message {n}") for n in range(5)]
    fetched = [delivery_to(s, "reader") for s in sent[::2]]  # three of five
    for delivery_id in fetched:
        reader.ok("GET", f"/messages/{delivery_id}")

    first = listing(api, state="fetched", limit=2)
    second = listing(api, state="fetched", limit=2, cursor=first["next_cursor"])

    assert [d["id"] for d in first["items"]] == [fetched[2], fetched[1]]
    assert [d["id"] for d in second["items"]] == [fetched[0]]
    assert second["next_cursor"] is None


def test_list_deliveries_exact_page_has_no_next_cursor(api: Api) -> None:
    sender, _, thread = pair(api)
    for n in range(2):
        sender.send(thread["id"], f"message {n}")

    page = listing(api, limit=2)

    assert len(page["items"]) == 2 and page["next_cursor"] is None


def test_list_deliveries_invalid_limit_falls_back_to_default(api: Api) -> None:
    sender, _, thread = pair(api)
    for n in range(3):
        sender.send(thread["id"], f"message {n}")

    for limit in ("0", "abc", "1000", "-1"):
        page = listing(api, limit=limit)
        assert len(page["items"]) == 3 and page["next_cursor"] is None, limit


def test_list_deliveries_bad_cursor_is_rejected(api: Api) -> None:
    for cursor in ("not-a-cursor", "!!!", "abc", "%%%"):
        response = api.get("/deliveries", params={"cursor": cursor})
        assert_error(response, 422, "validation_error", "cursor")


def test_list_deliveries_never_shows_another_workspace(api: Api, other_api: Api) -> None:
    sender, _, thread = pair(api)
    ours = delivery_to(sender.send(thread["id"], "ours"), "reader")
    their_sender = other_api.agent("sender")
    other_api.agent("reader")
    their_thread = their_sender.open_thread("Theirs", ["reader"])
    theirs = delivery_to(their_sender.send(their_thread["id"], "theirs"), "reader")

    assert [d["id"] for d in listing(api)["items"]] == [ours]
    assert [d["id"] for d in other_api.ok("GET", "/deliveries")["items"]] == [theirs]
    # Filtering by the other workspace's thread or agent id finds nothing either.
    assert listing(api, thread=their_thread["id"])["items"] == []
    their_reader_id = other_api.ok("GET", "/agents/reader")["id"]
    assert listing(api, agent=their_reader_id)["items"] == []
