"""Acknowledgements: POST /v1/acks."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from sqlalchemy import select

from inbots.db.engine import Database
from inbots.db.uow import unit_of_work
from inbots.models.deliveries import Delivery
from tests.helpers import Api, Caller, assert_error


def setup_mail(
    api: Api, count: int = 1
) -> tuple[Caller, Caller, dict[str, Any], list[dict[str, Any]]]:
    sender = api.agent("sender")
    reader = api.agent("reader")
    thread = sender.open_thread("Fix the flaky test", ["reader"])
    sent = [sender.send(thread["id"], f"message {n}") for n in range(count)]
    return sender, reader, thread, sent


def delivery_to(sent: dict[str, Any], recipient: str) -> str:
    (delivery_id,) = [d["id"] for d in sent["deliveries"] if d["recipient"] == recipient]
    return str(delivery_id)


def ack(caller: Caller, ids: list[str], **fields: Any) -> dict[str, Any]:
    return caller.ok("POST", "/acks", json={"ids": ids, **fields})


def test_ack_by_message_id(api: Api) -> None:
    _, reader, _, (sent,) = setup_mail(api)
    message_id = sent["message"]["id"]

    result = ack(reader, [message_id])

    assert result == {"acknowledged": [message_id], "already": [], "not_found": []}
    receipt = api.delivery(delivery_to(sent, "reader"))
    assert receipt["state"] == "acknowledged"
    assert receipt["acknowledged_at"] is not None and receipt["acknowledged_at"].endswith("Z")
    assert receipt["outcome"] is None and receipt["note"] is None


def test_ack_by_delivery_id(api: Api) -> None:
    _, reader, _, (sent,) = setup_mail(api)
    delivery_id = delivery_to(sent, "reader")

    result = ack(reader, [delivery_id])

    assert result == {"acknowledged": [delivery_id], "already": [], "not_found": []}
    assert api.delivery(delivery_id)["state"] == "acknowledged"


def test_ack_does_not_stamp_fetched_or_delivered(api: Api) -> None:
    _, reader, _, (sent,) = setup_mail(api)
    delivery_id = delivery_to(sent, "reader")

    ack(reader, [delivery_id])

    receipt = api.delivery(delivery_id)
    assert receipt["acknowledged_at"] is not None
    assert receipt["fetched_at"] is None and receipt["delivered_at"] is None


def test_ack_with_outcome_done_and_note_is_stored(api: Api) -> None:
    _, reader, _, (sent,) = setup_mail(api)
    delivery_id = delivery_to(sent, "reader")

    ack(reader, [delivery_id], outcome="done", note="Fixed in PR 31")

    receipt = api.delivery(delivery_id)
    assert receipt["state"] == "acknowledged"
    assert receipt["outcome"] == "done" and receipt["note"] == "Fixed in PR 31"


def test_ack_with_outcome_declined_and_note_is_stored(api: Api) -> None:
    _, reader, _, (sent,) = setup_mail(api)

    ack(reader, [sent["message"]["id"]], outcome="declined", note="Not my area; ask infra")

    receipt = api.delivery(delivery_to(sent, "reader"))
    assert receipt["outcome"] == "declined" and receipt["note"] == "Not my area; ask infra"


def test_ack_note_of_exactly_500_characters_is_accepted(api: Api) -> None:
    _, reader, _, (sent,) = setup_mail(api)
    note = "n" * 499 + "é"

    ack(reader, [sent["message"]["id"]], outcome="done", note=note)

    assert api.delivery(delivery_to(sent, "reader"))["note"] == note


def test_ack_repeat_answers_already_and_keeps_outcome_and_note(api: Api) -> None:
    _, reader, _, (sent,) = setup_mail(api)
    delivery_id = delivery_to(sent, "reader")
    ack(reader, [delivery_id], outcome="declined", note="first word")
    first = api.delivery(delivery_id)

    again = ack(reader, [delivery_id], outcome="done", note="second word")
    by_message = ack(reader, [sent["message"]["id"]], outcome="done", note="third word")

    assert again == {"acknowledged": [], "already": [delivery_id], "not_found": []}
    assert by_message == {"acknowledged": [], "already": [sent["message"]["id"]], "not_found": []}
    after = api.delivery(delivery_id)
    assert after["outcome"] == "declined" and after["note"] == "first word"
    assert after["acknowledged_at"] == first["acknowledged_at"]


def test_ack_repeat_without_outcome_does_not_clear_stored_outcome(api: Api) -> None:
    _, reader, _, (sent,) = setup_mail(api)
    delivery_id = delivery_to(sent, "reader")
    ack(reader, [delivery_id], outcome="done", note="kept")

    assert ack(reader, [delivery_id])["already"] == [delivery_id]

    after = api.delivery(delivery_id)
    assert after["outcome"] == "done" and after["note"] == "kept"


def test_ack_ids_not_yours_or_unknown_are_not_found_without_error(api: Api) -> None:
    sender = api.agent("sender")
    reader = api.agent("reader")
    api.agent("other")
    thread = sender.open_thread("Shared", ["reader", "other"])
    sent = sender.send(thread["id"], "for both")
    mine = delivery_to(sent, "reader")
    theirs = delivery_to(sent, "other")
    unknown = ["dlv_00000000000000000000000000", "msg_nothing", "garbage", ""]

    result = ack(reader, [theirs, mine, *unknown])

    assert result == {"acknowledged": [mine], "already": [], "not_found": [theirs, *unknown]}
    assert api.delivery(theirs)["acknowledged_at"] is None
    # The sender has no delivery of its own message: acknowledging it finds nothing.
    assert ack(sender, [sent["message"]["id"], mine]) == {
        "acknowledged": [],
        "already": [],
        "not_found": [sent["message"]["id"], mine],
    }


def test_ack_mixed_batch_reports_each_id_in_its_bucket(api: Api) -> None:
    _, reader, _, sent = setup_mail(api, 3)
    done_before = delivery_to(sent[0], "reader")
    ack(reader, [done_before])
    now_by_message = sent[1]["message"]["id"]
    now_by_delivery = delivery_to(sent[2], "reader")

    result = ack(reader, [done_before, now_by_message, "dlv_unknown", now_by_delivery])

    assert result == {
        "acknowledged": [now_by_message, now_by_delivery],
        "already": [done_before],
        "not_found": ["dlv_unknown"],
    }
    assert reader.inbox()["waiting"] == 0


def test_one_delivery_named_twice_in_a_batch_is_acknowledged_once(api: Api) -> None:
    """By its delivery id and by its message's id in one batch: the first name is listed as
    acknowledged, the second as already (a repeat id is read once)."""
    _, reader, _, sent = setup_mail(api, 1)
    delivery, message = delivery_to(sent[0], "reader"), sent[0]["message"]["id"]
    result = ack(reader, [delivery, delivery, message])
    assert result == {"acknowledged": [delivery], "already": [message], "not_found": []}


def test_ack_removes_the_delivery_from_the_inbox(api: Api) -> None:
    _, reader, _, sent = setup_mail(api, 2)
    assert reader.inbox()["waiting"] == 2

    ack(reader, [sent[0]["message"]["id"]])

    inbox = reader.inbox()
    assert inbox["waiting"] == 1
    assert [i["message_id"] for i in inbox["items"]] == [sent[1]["message"]["id"]]


def test_ack_in_a_closed_thread_is_not_found_and_stays_unacknowledged(api: Api) -> None:
    _, reader, thread, (sent,) = setup_mail(api)
    delivery_id = delivery_to(sent, "reader")
    api.ok("POST", f"/threads/{thread['id']}/close")

    result = ack(reader, [delivery_id, sent["message"]["id"]])

    assert result == {
        "acknowledged": [],
        "already": [],
        "not_found": [delivery_id, sent["message"]["id"]],
    }
    assert api.delivery(delivery_id)["acknowledged_at"] is None


def test_ack_in_a_close_requested_thread_still_works(api: Api) -> None:
    sender, reader, thread, (sent,) = setup_mail(api)
    sender.ok("POST", f"/threads/{thread['id']}/close-request", 202)

    result = ack(reader, [sent["message"]["id"]], outcome="done")

    assert result["acknowledged"] == [sent["message"]["id"]]


def test_operator_acknowledges_its_own_inbox_delivery(api: Api) -> None:
    worker = api.agent("worker")
    thread = api.open_thread("Operator asks", ["worker"])
    api.send(thread["id"], "status?")
    reply = worker.send(thread["id"], "all green")
    operator_delivery = delivery_to(reply, "operator")

    result = ack(api, [operator_delivery], outcome="done", note="thanks")

    assert result == {"acknowledged": [operator_delivery], "already": [], "not_found": []}
    assert api.ok("GET", "/operator/inbox")["waiting"] == 0
    receipt = api.delivery(operator_delivery)
    assert receipt["outcome"] == "done" and receipt["note"] == "thanks"


def test_ack_with_no_ids_is_rejected(api: Api) -> None:
    reader = api.agent("reader")
    assert_error(reader.post("/acks", json={"ids": []}), 422, "validation_error", "ids")


def test_ack_with_101_ids_is_rejected_and_changes_nothing(api: Api) -> None:
    _, reader, _, (sent,) = setup_mail(api)
    delivery_id = delivery_to(sent, "reader")
    ids = [delivery_id] + [f"dlv_made_up_{n}" for n in range(100)]

    assert_error(reader.post("/acks", json={"ids": ids}), 422, "validation_error", "ids")
    assert api.delivery(delivery_id)["acknowledged_at"] is None


def test_ack_with_100_ids_is_accepted(api: Api) -> None:
    _, reader, _, (sent,) = setup_mail(api)
    delivery_id = delivery_to(sent, "reader")
    made_up = [f"dlv_made_up_{n}" for n in range(99)]

    result = ack(reader, [delivery_id, *made_up])

    assert result == {"acknowledged": [delivery_id], "already": [], "not_found": made_up}


def test_ack_with_missing_or_mistyped_ids_is_rejected(api: Api) -> None:
    reader = api.agent("reader")
    for body in ({}, {"ids": "dlv_x"}, {"ids": [1, 2]}, {"ids": None}, {"ids": {"a": 1}}):
        assert_error(reader.post("/acks", json=body), 422, "validation_error", "ids")


def test_ack_with_bad_outcome_is_rejected_and_changes_nothing(api: Api) -> None:
    _, reader, _, (sent,) = setup_mail(api)
    delivery_id = delivery_to(sent, "reader")

    for outcome in ("maybe", "DONE", "", 3):
        response = reader.post("/acks", json={"ids": [delivery_id], "outcome": outcome})
        assert_error(response, 422, "validation_error", "outcome")
    assert api.delivery(delivery_id)["acknowledged_at"] is None


def test_ack_with_note_over_500_characters_is_rejected_and_changes_nothing(api: Api) -> None:
    _, reader, _, (sent,) = setup_mail(api)
    delivery_id = delivery_to(sent, "reader")

    response = reader.post("/acks", json={"ids": [delivery_id], "note": "n" * 501})

    assert_error(response, 422, "validation_error", "note")
    assert api.delivery(delivery_id)["acknowledged_at"] is None
    assert_error(
        reader.post("/acks", json={"ids": [delivery_id], "note": 5}),
        422,
        "validation_error",
        "note",
    )


def test_ack_malformed_json_is_rejected(api: Api) -> None:
    reader = api.agent("reader")
    response = reader.post(
        "/acks", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert_error(response, 422, "invalid_json")


def test_ack_without_token_is_unauthorized(api: Api) -> None:
    response = api.client.post("/v1/acks", json={"ids": ["dlv_x"]})
    assert_error(response, 401, "unauthorized")


def test_ten_racing_acks_of_one_delivery_acknowledge_it_exactly_once(
    api: Api, database: Database
) -> None:
    _, reader, _, (sent,) = setup_mail(api)
    delivery_id = delivery_to(sent, "reader")
    racers = 10
    barrier = threading.Barrier(racers)

    def race(n: int) -> dict[str, Any]:
        with httpx.Client(base_url=api.base_url, timeout=30) as client:
            barrier.wait()
            response = client.post(
                "/v1/acks",
                json={"ids": [delivery_id], "outcome": "done", "note": f"racer {n}"},
                headers=reader.headers,
            )
        assert response.status_code == 200, response.text
        return response.json()

    with ThreadPoolExecutor(racers) as pool:
        results = list(pool.map(race, range(racers)))

    winners = [n for n, r in enumerate(results) if r["acknowledged"] == [delivery_id]]
    assert len(winners) == 1, results
    for n, result in enumerate(results):
        if n != winners[0]:
            assert result == {"acknowledged": [], "already": [delivery_id], "not_found": []}
    with unit_of_work(database, readonly=True) as uow:
        rows = uow.session.execute(
            select(Delivery.acknowledged_at, Delivery.outcome, Delivery.note).where(
                Delivery.id == delivery_id
            )
        ).all()
    assert len(rows) == 1
    acknowledged_at, outcome, note = rows[0]
    assert acknowledged_at is not None
    # The stored note is the winner's: no later racer overwrote the stamp or its note.
    assert (outcome, note) == ("done", f"racer {winners[0]}")
    receipt = api.delivery(delivery_id)
    assert receipt["note"] == f"racer {winners[0]}"
    assert receipt["acknowledged_at"] == acknowledged_at.isoformat(timespec="microseconds").replace(
        "+00:00", "Z"
    )
