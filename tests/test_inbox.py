"""The agent inbox, the operator inbox, and reading one message (GET /v1/messages/{id})."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.helpers import Api, Caller, assert_error

INBOX_ITEM_KEYS = {
    "delivery_id",
    "message_id",
    "thread_id",
    "thread_title",
    "thread_ref",
    "sender",
    "kind",
    "priority",
    "summary",
    "sent_at",
    "state",
}
MESSAGE_KEYS = {
    "id",
    "thread_id",
    "sender",
    "kind",
    "priority",
    "summary",
    "body",
    "reply_to",
    "created_at",
    "ttl_seconds",
    "expires_at",
}
EMPTY = {"items": [], "returned": 0, "waiting": 0, "more": False, "next_cursor": None}
RFC3339_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def pair(api: Api) -> tuple[Caller, Caller, dict[str, Any]]:
    """A sender and a recipient sharing one open thread."""
    sender = api.agent("sender")
    reader = api.agent("reader")
    thread = sender.open_thread("Ship the release", ["reader"])
    return sender, reader, thread


def delivery_to(sent: dict[str, Any], recipient: str) -> str:
    (delivery_id,) = [d["id"] for d in sent["deliveries"] if d["recipient"] == recipient]
    return str(delivery_id)


# --- GET /v1/inbox ---


def test_inbox_item_has_exactly_the_spec_shape_and_no_body(api: Api) -> None:
    sender, reader, thread = pair(api)
    sent = sender.send(thread["id"], "Tag v1.2 and push it", kind="task", summary="Tag v1.2")

    inbox = reader.inbox()

    assert inbox["returned"] == 1 and inbox["waiting"] == 1 and inbox["more"] is False
    (item,) = inbox["items"]
    assert set(item) == INBOX_ITEM_KEYS
    assert "body" not in item
    assert item == {
        "delivery_id": delivery_to(sent, "reader"),
        "message_id": sent["message"]["id"],
        "thread_id": thread["id"],
        "thread_title": "Ship the release",
        "thread_ref": None,
        "sender": "sender",
        "kind": "task",
        "priority": "normal",
        "summary": "Tag v1.2",
        "sent_at": sent["message"]["created_at"],
        "state": "delivered",
    }
    assert RFC3339_Z.match(item["sent_at"])


def test_inbox_lists_oldest_first(api: Api) -> None:
    sender, reader, thread = pair(api)
    other = sender.open_thread("Second task", ["reader"])
    first = sender.send(thread["id"], "first")
    second = sender.send(other["id"], "second")
    third = sender.send(thread["id"], "third")

    items = reader.inbox()["items"]

    assert [i["message_id"] for i in items] == [
        first["message"]["id"],
        second["message"]["id"],
        third["message"]["id"],
    ]
    assert [i["summary"] for i in items] == ["first", "second", "third"]
    assert [i["thread_title"] for i in items] == [
        "Ship the release",
        "Second task",
        "Ship the release",
    ]


def test_inbox_shows_only_the_callers_own_deliveries(api: Api) -> None:
    sender, reader, thread = pair(api)
    bystander = api.agent("bystander")
    sender.open_thread("Not for reader", ["bystander"])
    sender.send(thread["id"], "for reader")

    assert [i["summary"] for i in reader.inbox()["items"]] == ["for reader"]
    assert bystander.inbox() == EMPTY
    # The sender does not get a copy of its own message.
    assert sender.inbox() == EMPTY


def test_inbox_summary_is_cut_to_120_characters_with_an_ellipsis(api: Api) -> None:
    sender, reader, thread = pair(api)
    sender.send(thread["id"], "short body", summary="s" * 200)
    sender.send(thread["id"], "b" * 150)  # no summary: the first line of the body, cut
    sender.send(thread["id"], "\nFirst real line\nsecond line")

    summaries = [i["summary"] for i in reader.inbox()["items"]]

    assert summaries[0] == "s" * 119 + "…" and len(summaries[0]) == 120
    assert summaries[1] == "b" * 119 + "…"
    assert summaries[2] == "First real line"


def test_inbox_summary_is_the_first_nonblank_line_however_far_down_it_starts(api: Api) -> None:
    # The operator is never asked for a summary, so its body's first line is what agents see.
    reader = api.agent("reader")
    thread = api.open_thread("Operator's note", ["reader"])
    api.send(thread["id"], "\n" * 500 + "Deploy is frozen until Monday\nmore detail")
    api.send(thread["id"], " \n" * 300 + "Second note")

    summaries = [i["summary"] for i in reader.inbox()["items"]]

    assert summaries == ["Deploy is frozen until Monday", "Second note"]


def test_inbox_summary_skips_blank_lines_of_any_whitespace_however_long(api: Api) -> None:
    # Lines holding only non-breaking spaces or form feeds are blank too (str.strip() agrees);
    # the summary must not depend on how many of them come before the first real line.
    reader = api.agent("reader")
    thread = api.open_thread("Operator's note", ["reader"])
    api.send(thread["id"], "\u00a0\n" * 3 + "Short prefix")
    api.send(thread["id"], "\u00a0\n" * 300 + "Long prefix")
    api.send(thread["id"], "\f" * 500 + "Form feeds")

    summaries = [i["summary"] for i in reader.inbox()["items"]]

    assert summaries == ["Short prefix", "Long prefix", "Form feeds"]


def test_inbox_stamps_delivered_but_never_fetched(api: Api) -> None:
    sender, reader, thread = pair(api)
    sent = sender.send(thread["id"], "look at this")
    delivery_id = delivery_to(sent, "reader")
    before = api.delivery(delivery_id)
    assert before["state"] == "accepted" and before["delivered_at"] is None

    reader.inbox()
    after = api.delivery(delivery_id)

    assert after["state"] == "delivered"
    assert after["delivered_at"] is not None and RFC3339_Z.match(after["delivered_at"])
    assert after["fetched_at"] is None
    assert after["acknowledged_at"] is None


def test_inbox_listing_again_does_not_overwrite_delivered_at(api: Api) -> None:
    sender, reader, thread = pair(api)
    delivery_id = delivery_to(sender.send(thread["id"], "look"), "reader")
    reader.inbox()
    first = api.delivery(delivery_id)["delivered_at"]

    again = reader.inbox()

    assert again["items"][0]["state"] == "delivered"
    assert api.delivery(delivery_id)["delivered_at"] == first
    assert api.delivery(delivery_id)["fetched_at"] is None


def test_inbox_item_state_reflects_a_fetched_delivery(api: Api) -> None:
    sender, reader, thread = pair(api)
    sent = sender.send(thread["id"], "read me")
    reader.ok("GET", f"/messages/{sent['message']['id']}")

    (item,) = reader.inbox()["items"]

    assert item["state"] == "fetched"


def test_inbox_with_60_waiting_returns_50_by_default_and_says_more(api: Api) -> None:
    sender, reader, thread = pair(api)
    ids = [sender.send(thread["id"], f"message {n}")["message"]["id"] for n in range(60)]

    inbox = reader.inbox()

    assert inbox["returned"] == 50 and len(inbox["items"]) == 50
    assert inbox["waiting"] == 60
    assert inbox["more"] is True
    assert [i["message_id"] for i in inbox["items"]] == ids[:50]

    limited = reader.inbox(limit=10)
    assert limited["returned"] == 10 and limited["waiting"] == 60 and limited["more"] is True
    assert [i["message_id"] for i in limited["items"]] == ids[:10]

    biggest = reader.inbox(limit=200)
    assert biggest["returned"] == 60 and biggest["waiting"] == 60 and biggest["more"] is False


@pytest.mark.parametrize("settings_overrides", [{"list_default": 3}])
def test_inbox_invalid_limit_falls_back_to_default(api: Api) -> None:
    # A small default (a setting) keeps this fast; the 50 default itself is checked above.
    sender, reader, thread = pair(api)
    for n in range(5):
        sender.send(thread["id"], f"message {n}")

    for limit in ["0", "abc", "1000", "-5", "201", "2.5", ""]:
        inbox = reader.ok("GET", "/inbox", params={"limit": limit})
        assert (inbox["returned"], len(inbox["items"])) == (3, 3), limit
        assert inbox["waiting"] == 5 and inbox["more"] is True, limit
    assert reader.inbox(limit=4)["returned"] == 4
    assert reader.inbox(limit=200)["returned"] == 5


def test_inbox_drops_acknowledged_deliveries(api: Api) -> None:
    sender, reader, thread = pair(api)
    done = sender.send(thread["id"], "done soon")
    kept = sender.send(thread["id"], "still open")
    reader.ok("POST", "/acks", json={"ids": [done["message"]["id"]]})

    inbox = reader.inbox()

    assert [i["message_id"] for i in inbox["items"]] == [kept["message"]["id"]]
    assert inbox["waiting"] == 1 and inbox["returned"] == 1 and inbox["more"] is False


def test_inbox_keeps_close_requested_threads(api: Api) -> None:
    sender, reader, thread = pair(api)
    sent = sender.send(thread["id"], "before close")
    requested = sender.ok("POST", f"/threads/{thread['id']}/close-request", 202)
    assert requested["status"] == "close_requested"

    inbox = reader.inbox()

    assert [i["message_id"] for i in inbox["items"]] == [sent["message"]["id"]]
    assert inbox["waiting"] == 1


def test_inbox_drops_closed_thread_deliveries_which_stay_unacknowledged(api: Api) -> None:
    sender, reader, thread = pair(api)
    other = sender.open_thread("Still open", ["reader"])
    gone = sender.send(thread["id"], "in the thread that closes")
    kept = sender.send(other["id"], "in the open thread")
    closed = api.ok("POST", f"/threads/{thread['id']}/close")
    assert closed["status"] == "closed"

    inbox = reader.inbox()

    assert [i["message_id"] for i in inbox["items"]] == [kept["message"]["id"]]
    assert inbox["waiting"] == 1 and inbox["returned"] == 1 and inbox["more"] is False
    receipt = api.delivery(delivery_to(gone, "reader"))
    assert receipt["acknowledged_at"] is None and receipt["state"] == "accepted"


def test_agent_calling_operator_inbox_is_forbidden(api: Api) -> None:
    reader = api.agent("reader")
    assert_error(reader.get("/operator/inbox"), 403, "forbidden")


def test_operator_token_on_the_inbox_lists_the_operators_own_mail(api: Api) -> None:
    worker = api.agent("worker")
    thread = api.open_thread("Operator's task", ["worker"])
    api.send(thread["id"], "go")
    replies = [worker.send(thread["id"], f"reply {n}") for n in range(3)]

    assert api.ok("GET", "/inbox") == api.ok("GET", "/operator/inbox")
    first = api.ok("GET", "/inbox", params={"limit": "2", "include": "body"})
    assert [i["body"] for i in first["items"]] == ["reply 0", "reply 1"]
    rest = api.ok("GET", "/operator/inbox", params={"cursor": first["next_cursor"]})
    assert [i["message_id"] for i in rest["items"]] == [replies[2]["message"]["id"]]
    assert rest["next_cursor"] is None
    api.ok("POST", "/acks", json={"ids": [replies[0]["message"]["id"]], "outcome": "done"})
    acked = api.ok("GET", "/inbox", params={"status": "acked"})
    assert [i["message_id"] for i in acked["items"]] == [replies[0]["message"]["id"]]
    # The worker's inbox holds only the operator's message, never the operator's mail.
    assert [i["sender"] for i in worker.inbox()["items"]] == ["operator"]


def test_inbox_without_token_is_unauthorized(api: Api) -> None:
    response = api.client.get("/v1/inbox")
    assert_error(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"


def test_operator_inbox_shows_replies_addressed_to_the_operator(api: Api) -> None:
    worker = api.agent("worker")
    thread = api.open_thread("Operator's task", ["worker"])
    asked = api.send(thread["id"], "Please rebuild the index")
    assert [d["recipient"] for d in asked["deliveries"]] == ["worker"]
    assert api.ok("GET", "/operator/inbox") == EMPTY

    reply = worker.send(thread["id"], "Rebuilt", kind="update", reply_to=asked["message"]["id"])
    (operator_delivery,) = [d for d in reply["deliveries"] if d["recipient"] == "operator"]

    inbox = api.ok("GET", "/operator/inbox")
    assert inbox["returned"] == 1 and inbox["waiting"] == 1 and inbox["more"] is False
    (item,) = inbox["items"]
    assert set(item) == INBOX_ITEM_KEYS
    assert item["delivery_id"] == operator_delivery["id"]
    assert item["message_id"] == reply["message"]["id"]
    assert item["sender"] == "worker"
    assert item["thread_title"] == "Operator's task"
    assert item["summary"] == "Rebuilt"
    assert item["state"] == "delivered"
    assert api.delivery(operator_delivery["id"])["fetched_at"] is None
    # The worker's own inbox has the operator's message, not its own reply.
    (worker_item,) = worker.inbox()["items"]
    assert worker_item["message_id"] == asked["message"]["id"]
    assert worker_item["sender"] == "operator"


def test_operator_inbox_invalid_limit_falls_back_and_acked_drop_out(api: Api) -> None:
    worker = api.agent("worker")
    thread = api.open_thread("Operator's task", ["worker"])
    api.send(thread["id"], "go")
    replies = [worker.send(thread["id"], f"reply {n}") for n in range(3)]

    assert api.ok("GET", "/operator/inbox", params={"limit": "1"})["returned"] == 1
    assert api.ok("GET", "/operator/inbox", params={"limit": "zero"})["returned"] == 3
    api.ok("POST", "/acks", json={"ids": [replies[0]["message"]["id"]]})

    inbox = api.ok("GET", "/operator/inbox")
    assert [i["message_id"] for i in inbox["items"]] == [r["message"]["id"] for r in replies[1:]]
    assert inbox["waiting"] == 2


# --- GET /v1/messages/{message_or_delivery_id} ---


def test_read_by_message_id_returns_full_body_and_stamps_fetched(api: Api) -> None:
    sender, reader, thread = pair(api)
    body = "Line one\n" + "x" * 5000
    sent = sender.send(thread["id"], body, summary="Long one", kind="question")
    delivery_id = delivery_to(sent, "reader")

    read = reader.ok("GET", f"/messages/{sent['message']['id']}")

    assert set(read) == {"message", "delivery"}
    assert set(read["message"]) == MESSAGE_KEYS
    assert read["message"] == sent["message"]
    assert read["message"]["body"] == body
    delivery = read["delivery"]
    assert delivery["id"] == delivery_id
    assert delivery["recipient"] == "reader"
    assert delivery["state"] == "fetched"
    assert delivery["fetched_at"] is not None and RFC3339_Z.match(delivery["fetched_at"])
    assert delivery["delivered_at"] is not None
    assert delivery["acknowledged_at"] is None
    receipt = api.delivery(delivery_id)
    assert receipt["state"] == "fetched" and receipt["fetched_at"] == delivery["fetched_at"]


def test_read_by_own_delivery_id_returns_message_and_stamps_fetched(api: Api) -> None:
    sender, reader, thread = pair(api)
    sent = sender.send(thread["id"], "by delivery id")
    delivery_id = delivery_to(sent, "reader")

    read = reader.ok("GET", f"/messages/{delivery_id}")

    assert read["message"]["id"] == sent["message"]["id"]
    assert read["message"]["body"] == "by delivery id"
    assert read["delivery"]["id"] == delivery_id
    assert read["delivery"]["state"] == "fetched"
    assert api.delivery(delivery_id)["state"] == "fetched"


def test_reading_again_does_not_overwrite_fetched_at(api: Api) -> None:
    sender, reader, thread = pair(api)
    sent = sender.send(thread["id"], "twice")
    first = reader.ok("GET", f"/messages/{sent['message']['id']}")["delivery"]

    second = reader.ok("GET", f"/messages/{delivery_to(sent, 'reader')}")["delivery"]

    assert second["fetched_at"] == first["fetched_at"]
    assert second["delivered_at"] == first["delivered_at"]


def test_read_another_agents_delivery_id_is_not_found(api: Api) -> None:
    sender = api.agent("sender")
    reader = api.agent("reader")
    api.agent("other")
    thread = sender.open_thread("Shared", ["reader", "other"])
    sent = sender.send(thread["id"], "for both")
    others_delivery = delivery_to(sent, "other")

    response = reader.get(f"/messages/{others_delivery}")

    assert_error(response, 404, "not_found")
    assert api.delivery(others_delivery)["fetched_at"] is None
    assert api.delivery(delivery_to(sent, "reader"))["fetched_at"] is None


def test_read_made_up_id_is_not_found(api: Api) -> None:
    reader = api.agent("reader")
    for made_up in ("msg_00000000000000000000000000", "dlv_zzzzzzzzzz", "th_x", "nothing"):
        assert_error(reader.get(f"/messages/{made_up}"), 404, "not_found")


def test_sender_reading_its_own_message_gets_null_delivery(api: Api) -> None:
    sender, _reader, thread = pair(api)
    sent = sender.send(thread["id"], "mine")

    read = sender.ok("GET", f"/messages/{sent['message']['id']}")

    assert read["message"] == sent["message"] and read["delivery"] is None
    assert [(r["recipient"], r["state"]) for r in read["receipts"]] == [("reader", "accepted")]
    assert api.delivery(delivery_to(sent, "reader"))["fetched_at"] is None


def test_read_message_of_a_thread_the_caller_is_not_in_is_not_found(api: Api) -> None:
    sender, _reader, thread = pair(api)
    outsider = api.agent("outsider")
    sent = sender.send(thread["id"], "private")

    assert_error(outsider.get(f"/messages/{sent['message']['id']}"), 404, "not_found")
    assert_error(outsider.get(f"/messages/{delivery_to(sent, 'reader')}"), 404, "not_found")


def test_read_message_in_a_closed_thread_is_not_found_for_agents(api: Api) -> None:
    sender, reader, thread = pair(api)
    sent = sender.send(thread["id"], "about to close")
    api.ok("POST", f"/threads/{thread['id']}/close")
    delivery_id = delivery_to(sent, "reader")

    assert_error(reader.get(f"/messages/{sent['message']['id']}"), 404, "not_found")
    assert_error(reader.get(f"/messages/{delivery_id}"), 404, "not_found")
    assert api.delivery(delivery_id)["fetched_at"] is None
    # The operator still sees everything.
    assert (
        api.ok("GET", f"/messages/{sent['message']['id']}")["message"]["body"] == "about to close"
    )


def test_read_message_from_another_workspace_is_not_found(api: Api, other_api: Api) -> None:
    sender, _reader, thread = pair(api)
    sent = sender.send(thread["id"], "workspace one")
    stranger = other_api.agent("reader")

    assert_error(stranger.get(f"/messages/{sent['message']['id']}"), 404, "not_found")
    assert_error(other_api.get(f"/messages/{sent['message']['id']}"), 404, "not_found")
