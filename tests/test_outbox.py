"""Senders see what became of their mail: GET /v1/outbox, receipts on a sender's own message and
thread history, and the long-poll's receipts (GET /v1/inbox/wait?events=receipts)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.conftest import ServerThread
from tests.helpers import Api, Caller, error_message

RECEIPT_KEYS = {
    "delivery_id",
    "recipient",
    "state",
    "delivered_at",
    "fetched_at",
    "working_at",
    "working_note",
    "acknowledged_at",
    "outcome",
    "note",
}
EVENT_KEYS = RECEIPT_KEYS | {"event_id", "message_id", "thread_id"}


def team(api: Api) -> tuple[Caller, Caller, Caller, dict[str, Any]]:
    lead, worker, helper = api.agent("lead"), api.agent("worker"), api.agent("helper")
    thread = lead.open_thread("Split the work", ["worker", "helper"])
    return lead, worker, helper, thread


def delivery_to(sent: dict[str, Any], recipient: str) -> str:
    (delivery_id,) = [d["id"] for d in sent["deliveries"] if d["recipient"] == recipient]
    return str(delivery_id)


def by_recipient(receipts: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["recipient"]: r for r in receipts}


def test_outbox_lists_sent_mail_newest_first_with_every_receipt(api: Api) -> None:
    lead, worker, helper, thread = team(api)
    first = lead.send(thread["id"], "Port the parser", summary="Port it", kind="task")
    second = lead.send(thread["id"], "Write the docs", kind="task")
    worker.ok("GET", f"/messages/{first['message']['id']}")
    worker.ok(
        "POST",
        "/acks",
        json={"ids": [first["message"]["id"]], "outcome": "declined", "note": "Not my area"},
    )
    helper.inbox()

    page = lead.ok("GET", "/outbox")
    assert set(page) == {"items", "next_cursor"} and page["next_cursor"] is None
    assert [i["message"]["id"] for i in page["items"]] == [
        second["message"]["id"],
        first["message"]["id"],
    ]
    item = page["items"][1]
    assert set(item) == {"message", "receipts"} and "receipts" not in item["message"]
    assert item["message"]["body"] == "Port the parser" and item["message"]["sender"] == "lead"
    for receipt in item["receipts"]:
        assert set(receipt) == RECEIPT_KEYS
    receipts = by_recipient(item["receipts"])
    declined = receipts["worker"]
    assert declined["delivery_id"] == delivery_to(first, "worker")
    assert (declined["state"], declined["outcome"], declined["note"]) == (
        "acknowledged",
        "declined",
        "Not my area",
    )
    assert declined["delivered_at"] and declined["fetched_at"] and declined["acknowledged_at"]
    assert declined["working_at"] is None
    assert receipts["helper"]["state"] == "delivered" and receipts["helper"]["outcome"] is None

    assert worker.ok("GET", "/outbox") == {"items": [], "next_cursor": None}


def test_outbox_state_matches_messages_with_any_receipt_in_that_state(api: Api) -> None:
    lead, worker, _, thread = team(api)
    done = lead.send(thread["id"], "one")["message"]["id"]
    open_ = lead.send(thread["id"], "two")["message"]["id"]
    worker.ok("POST", "/acks", json={"ids": [done], "outcome": "done"})

    def ids(**params: str) -> list[str]:
        return [i["message"]["id"] for i in lead.ok("GET", "/outbox", params=params)["items"]]

    assert ids(state="acknowledged") == [done]
    # helper has not been shown either message: both have an "accepted" receipt.
    assert ids(state="accepted") == [open_, done]
    assert ids(state="failed") == []
    assert ids(state="") == [open_, done]  # empty means no filter
    message = error_message(
        lead.get("/outbox", params={"state": "lost"}), 422, "validation_error", "state"
    )
    assert "acknowledged" in message and "any of its receipts" in message


def test_outbox_pages_by_cursor_and_filters_by_thread(api: Api) -> None:
    lead, _, _, thread = team(api)
    other = lead.open_thread("Another task", ["worker"])
    sent = [lead.send(thread["id"], f"m{n}")["message"]["id"] for n in range(5)]
    elsewhere = lead.send(other["id"], "elsewhere")["message"]["id"]

    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        page = lead.ok("GET", "/outbox", params=params)
        seen += [i["message"]["id"] for i in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [elsewhere, *reversed(sent)]
    only = lead.ok("GET", "/outbox", params={"thread": other["id"]})
    assert [i["message"]["id"] for i in only["items"]] == [elsewhere]
    bad = lead.get("/outbox", params={"cursor": "!!"})
    error_message(bad, 422, "validation_error", "cursor")
    # Not a thread id at all is refused as search refuses it; an unknown one just matches none.
    wrong = lead.get("/outbox", params={"thread": "garbage"})
    assert "th_…" in error_message(wrong, 422, "validation_error", "thread")
    assert lead.ok("GET", "/outbox", params={"thread": "th_unknown"})["items"] == []


def test_outbox_leaves_out_closed_threads_for_agents_not_for_the_operator(api: Api) -> None:
    lead, _, _, thread = team(api)
    lead.send(thread["id"], "before the close")
    api.ok("POST", f"/threads/{thread['id']}/close")
    assert lead.ok("GET", "/outbox")["items"] == []

    api.ok("POST", f"/threads/{thread['id']}/messages", 409, json={"body": "x"})
    other = api.open_thread("Operator's task", ["worker"])
    posted = api.send(other["id"], "from the operator")
    (item,) = api.ok("GET", "/outbox")["items"]
    assert item["message"]["id"] == posted["message"]["id"]
    assert [r["recipient"] for r in item["receipts"]] == ["worker"]


def test_the_sender_reading_its_message_gets_every_receipt(api: Api) -> None:
    lead, worker, helper, thread = team(api)
    sent = lead.send(thread["id"], "Port the parser")
    message_id = sent["message"]["id"]
    worker.ok("POST", "/acks", json={"ids": [message_id], "outcome": "done", "note": "Merged"})

    read = lead.ok("GET", f"/messages/{message_id}")
    assert set(read) == {"message", "delivery", "receipts"} and read["delivery"] is None
    receipts = by_recipient(read["receipts"])
    assert set(receipts) == {"worker", "helper"}
    assert (receipts["worker"]["outcome"], receipts["worker"]["note"]) == ("done", "Merged")
    assert read["message"] == sent["message"]  # the message looks the same to everybody

    # A recipient sees its own delivery, never the others' receipts.
    theirs = helper.ok("GET", f"/messages/{message_id}")
    assert set(theirs) == {"message", "delivery"} and theirs["message"] == sent["message"]
    assert theirs["delivery"]["id"] == delivery_to(sent, "helper")
    assert "receipts" not in sent["message"]


def test_thread_history_shows_the_sender_its_own_messages_receipts(api: Api) -> None:
    lead, worker, _, thread = team(api)
    asked = lead.send(thread["id"], "Which branch?", kind="question")["message"]["id"]
    answer = worker.send(thread["id"], "main", reply_to=asked)["message"]["id"]
    worker.ok("POST", "/acks", json={"ids": [asked], "outcome": "done"})

    history = lead.ok("GET", f"/threads/{thread['id']}/messages")["items"]
    mine, theirs = history
    assert (mine["id"], theirs["id"]) == (asked, answer)
    assert by_recipient(mine["receipts"])["worker"]["outcome"] == "done"
    assert "receipts" not in theirs
    worker_view = worker.ok("GET", f"/threads/{thread['id']}/messages")["items"]
    assert "receipts" not in worker_view[0] and worker_view[1]["receipts"] is not None


def test_a_decline_wakes_the_senders_long_poll_at_once(api: Api, server: ServerThread) -> None:
    lead, worker, _, thread = team(api)
    sent = lead.send(thread["id"], "Port the parser", kind="task")
    message_id = sent["message"]["id"]

    def wait() -> tuple[httpx.Response, float]:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            response = client.get(
                "/v1/inbox/wait",
                params={"timeout": "20", "events": "receipts"},
                headers=lead.headers,
            )
        return response, time.monotonic()

    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(wait)
        deadline = time.monotonic() + 10
        while server.app.state.dispatch.wakeups.listening() < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.2)
        assert not waiting.done()
        worker.ok(
            "POST", "/acks", json={"ids": [message_id], "outcome": "declined", "note": "No time"}
        )
        acked_at = time.monotonic()
        response, answered_at = waiting.result(timeout=30)
    assert response.status_code == 200, response.text
    # Woken by the decline, not by the wait's timeout (a loaded machine may take a few seconds).
    assert answered_at - acked_at < 5.0
    body = response.json()
    assert body["items"] == []
    (receipt,) = body["receipts"]
    assert set(receipt) == EVENT_KEYS
    assert receipt["message_id"] == message_id and receipt["thread_id"] == thread["id"]
    assert receipt["delivery_id"] == delivery_to(sent, "worker")
    assert (receipt["recipient"], receipt["state"], receipt["outcome"], receipt["note"]) == (
        "worker",
        "acknowledged",
        "declined",
        "No time",
    )
    assert receipt["acknowledged_at"].endswith("Z")

    # Shown once: the next wait has nothing new to say.
    started = time.monotonic()
    again = lead.ok("GET", "/inbox/wait", params={"timeout": "1", "events": "receipts"})
    assert time.monotonic() - started >= 0.9 and again["receipts"] == []


def test_receipts_already_there_answer_at_once_and_only_when_asked(api: Api) -> None:
    lead, worker, helper, thread = team(api)
    message_id = lead.send(thread["id"], "hello")["message"]["id"]
    worker.ok("POST", "/acks", json={"ids": [message_id], "outcome": "done"})
    helper.ok("POST", "/acks", json={"ids": [message_id]})

    started = time.monotonic()
    plain = lead.ok("GET", "/inbox/wait", params={"timeout": "1"})
    assert time.monotonic() - started >= 0.9  # mail only: receipts do not end it
    assert plain["receipts"] == []

    started = time.monotonic()
    body = lead.ok("GET", "/inbox/wait", params={"timeout": "10", "events": "receipts"})
    assert time.monotonic() - started < 2.0
    assert sorted((r["recipient"], r["outcome"]) for r in body["receipts"]) == [
        ("helper", None),
        ("worker", "done"),
    ]
    # An acknowledgement repeated is not a new receipt.
    worker.ok("POST", "/acks", json={"ids": [message_id], "outcome": "declined"})
    quiet = lead.ok("GET", "/inbox/wait", params={"timeout": "1", "events": "receipts"})
    assert quiet["receipts"] == []


def test_a_wait_with_receipts_answers_new_mail_and_receipts_together(api: Api) -> None:
    lead, worker, _, thread = team(api)
    message_id = lead.send(thread["id"], "question")["message"]["id"]
    worker.ok("POST", "/acks", json={"ids": [message_id], "outcome": "done"})
    reply = worker.send(thread["id"], "answer")["message"]["id"]

    body = lead.ok("GET", "/inbox/wait", params={"timeout": "5", "events": "receipts"})
    assert [i["message_id"] for i in body["items"]] == [reply]
    assert [r["message_id"] for r in body["receipts"]] == [message_id]


def test_receipts_of_a_closed_thread_are_not_shown(api: Api) -> None:
    lead, worker, _, thread = team(api)
    message_id = lead.send(thread["id"], "hello")["message"]["id"]
    worker.ok("POST", "/acks", json={"ids": [message_id], "outcome": "done"})
    api.ok("POST", f"/threads/{thread['id']}/close")
    body = lead.ok("GET", "/inbox/wait", params={"timeout": "1", "events": "receipts"})
    assert body["receipts"] == []


def test_wait_events_other_than_receipts_are_refused(api: Api) -> None:
    lead, _, _, _ = team(api)
    response = lead.get("/inbox/wait", params={"timeout": "1", "events": "everything"})
    message = error_message(response, 422, "validation_error", "events")
    assert "receipts" in message
