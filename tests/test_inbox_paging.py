"""The inbox of Inbots 1.1 over HTTP: paging by cursor without acknowledging, bodies in the
listing, acknowledged mail, urgent first, ``since``; and reading and acknowledging in one call
(``POST /v1/messages/{id}/read``; ``GET /v1/messages/{id}?ack=`` kept). From
agents-and-governance.md §1."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.helpers import Api, Caller, error_message


def mailbox(api: Api, count: int, **fields: Any) -> tuple[Caller, Caller, list[dict[str, Any]]]:
    """A sender that has sent ``count`` messages to a reader: the answers, oldest first."""
    sender, reader = api.agent("sender"), api.agent("reader")
    thread = sender.open_thread("A pile of work", ["reader"])["id"]
    sent = [sender.send(thread, f"message {n + 1}", **fields) for n in range(count)]
    return sender, reader, sent


def ids(page: dict[str, Any], key: str = "message_id") -> list[str]:
    return [item[key] for item in page["items"]]


def pages(reader: Caller, **params: Any) -> list[dict[str, Any]]:
    """Every page of the inbox, following next_cursor."""
    found = [reader.inbox(**params)]
    while found[-1]["next_cursor"]:
        found.append(reader.inbox(**params, cursor=found[-1]["next_cursor"]))
        assert len(found) < 100, "the cursor never ends"
    return found


# --- paging without acknowledging -------------------------------------------------------------


def test_message_51_is_seen_without_acknowledging_anything(api: Api) -> None:
    _, reader, sent = mailbox(api, 60)
    first = reader.inbox()
    assert first["returned"] == 50 and first["waiting"] == 60 and first["more"] is True
    assert ids(first) == [s["message"]["id"] for s in sent[:50]]
    assert first["next_cursor"]

    second = reader.inbox(cursor=first["next_cursor"])

    assert ids(second)[0] == sent[50]["message"]["id"]  # message 51
    assert ids(second) == [s["message"]["id"] for s in sent[50:]]
    assert second["next_cursor"] is None and second["more"] is False
    assert second["waiting"] == 60  # nothing was acknowledged
    receipts = [api.delivery(s["deliveries"][0]["id"]) for s in sent]
    assert {r["state"] for r in receipts} == {"delivered"}


def test_a_polling_agent_processes_100_messages_in_2_calls_a_page_of_20(api: Api) -> None:
    _, reader, sent = mailbox(api, 100)
    calls_per_page: list[int] = []
    processed: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"include": "body", "limit": 20}
        if cursor:
            params["cursor"] = cursor
        page = reader.inbox(**params)  # call 1: the page, with bodies
        calls = 1
        if not page["items"]:
            break
        assert page["returned"] == len(page["items"]) <= 20
        for item in page["items"]:
            assert item["body"] == f"message {len(processed) + 1}"  # the work, done
            processed.append(item["message_id"])
        acked = reader.ok(  # call 2: done with the page
            "POST", "/acks", json={"ids": ids(page, "delivery_id"), "outcome": "done"}
        )
        calls += 1
        assert acked["acknowledged"] == ids(page, "delivery_id")
        calls_per_page.append(calls)
        cursor = page["next_cursor"]
        if cursor is None:
            break

    assert processed == [s["message"]["id"] for s in sent]
    assert len(calls_per_page) == 5 and max(calls_per_page) <= 3
    assert reader.inbox()["waiting"] == 0
    receipt = api.delivery(sent[99]["deliveries"][0]["id"])
    assert receipt["state"] == "acknowledged" and receipt["fetched_at"] is not None


def test_paging_walks_every_item_once_in_order(api: Api) -> None:
    _, reader, sent = mailbox(api, 7)
    walked = pages(reader, limit=3)
    assert [p["returned"] for p in walked] == [3, 3, 1]
    assert [p["more"] for p in walked] == [True, True, False]
    assert [i for p in walked for i in ids(p)] == [s["message"]["id"] for s in sent]
    assert {p["waiting"] for p in walked} == {7}


def test_an_exact_page_ends_with_a_null_cursor(api: Api) -> None:
    _, reader, _ = mailbox(api, 4)
    walked = pages(reader, limit=2)
    assert [p["returned"] for p in walked] == [2, 2]
    assert walked[-1]["next_cursor"] is None


def test_every_inbox_answer_carries_next_cursor(api: Api) -> None:
    reader = api.agent("reader")
    assert reader.inbox() == {
        "items": [],
        "returned": 0,
        "waiting": 0,
        "more": False,
        "next_cursor": None,
    }


def test_mail_acknowledged_while_paging_does_not_shift_the_next_page(api: Api) -> None:
    _, reader, sent = mailbox(api, 6)
    first = reader.inbox(limit=2)
    reader.ok("POST", "/acks", json={"ids": ids(first)})
    second = reader.inbox(limit=2, cursor=first["next_cursor"])
    assert ids(second) == [s["message"]["id"] for s in sent[2:4]]


@pytest.mark.parametrize("cursor", ["nonsense", "bm9uc2Vuc2U", "MTpkbHY", "MjpkbHZfMQ", "%%%"])
def test_a_cursor_the_server_never_gave_is_refused(api: Api, cursor: str) -> None:
    _, reader, _ = mailbox(api, 1)
    message = error_message(
        reader.get("/inbox", params={"cursor": cursor}), 422, "validation_error", "cursor"
    )
    assert "next_cursor" in message


# --- bodies ----------------------------------------------------------------------------------


def test_bodies_come_with_the_page_and_stamp_fetched(api: Api) -> None:
    _, reader, sent = mailbox(api, 2)
    page = reader.inbox(include="body")
    assert [i["body"] for i in page["items"]] == ["message 1", "message 2"]
    assert {i["state"] for i in page["items"]} == {"fetched"}
    receipt = api.delivery(sent[0]["deliveries"][0]["id"])
    assert receipt["state"] == "fetched" and receipt["delivered_at"] and receipt["fetched_at"]


def test_without_include_items_carry_no_body_and_stamp_only_delivered(api: Api) -> None:
    _, reader, sent = mailbox(api, 1)
    (item,) = reader.inbox()["items"]
    assert "body" not in item
    assert api.delivery(sent[0]["deliveries"][0]["id"])["fetched_at"] is None


def test_a_page_with_bodies_holds_at_most_20(api: Api) -> None:
    _, reader, sent = mailbox(api, 25)
    for params in ({}, {"limit": 50}, {"limit": 200}, {"limit": "lots"}):
        page = reader.inbox(include="body", **params)
        assert page["returned"] == 20 and page["more"] is True, params
        assert page["next_cursor"], params
    assert reader.inbox(include="body", limit=5)["returned"] == 5
    rest = reader.inbox(include="body", cursor=reader.inbox(include="body")["next_cursor"])
    assert ids(rest) == [s["message"]["id"] for s in sent[20:]]
    assert api.ok("GET", "/limits")["inbox_bodies_max"] == 20


@pytest.mark.parametrize("settings_overrides", [{"inbox_bodies_max": 3}])
def test_the_body_page_size_is_a_setting(api: Api) -> None:
    _, reader, _ = mailbox(api, 5)
    assert reader.inbox(include="body")["returned"] == 3
    assert reader.inbox()["returned"] == 5


def test_include_takes_only_body(api: Api) -> None:
    _, reader, _ = mailbox(api, 1)
    error_message(
        reader.get("/inbox", params={"include": "bodies"}), 422, "validation_error", "include"
    )


# --- acknowledged mail -----------------------------------------------------------------------


def test_status_lists_acknowledged_mail_again(api: Api) -> None:
    _, reader, sent = mailbox(api, 3)
    done = sent[1]["deliveries"][0]["id"]
    reader.ok("POST", "/acks", json={"ids": [done], "outcome": "done", "note": "shipped"})

    unacked = reader.inbox()
    assert ids(unacked, "delivery_id") == [
        sent[0]["deliveries"][0]["id"],
        sent[2]["deliveries"][0]["id"],
    ]
    assert reader.inbox(status="unacked") == unacked
    acked = reader.inbox(status="acked")
    assert ids(acked, "delivery_id") == [done]
    assert acked["items"][0]["state"] == "acknowledged"
    assert acked["waiting"] == 2  # waiting is always the unacknowledged mail
    every = reader.inbox(status="all")
    assert ids(every) == [s["message"]["id"] for s in sent]
    with_body = reader.inbox(status="acked", include="body")
    assert with_body["items"][0]["body"] == "message 2"


def test_all_mail_pages_in_one_order_across_acknowledged_and_not(api: Api) -> None:
    sender, reader = api.agent("sender"), api.agent("reader")
    thread = sender.open_thread("Both", ["reader"])["id"]
    order = ["normal", "urgent", "normal", "urgent", "normal", "normal"]
    sent = [sender.send(thread, f"m{n}", priority=p) for n, p in enumerate(order)]
    done = [sent[n]["deliveries"][0]["id"] for n in (1, 2, 5)]
    reader.ok("POST", "/acks", json={"ids": done})

    walked = pages(reader, status="all", limit=2)
    listed = [item for p in walked for item in p["items"]]
    assert [i["message_id"] for i in listed] == [
        sent[n]["message"]["id"] for n in (1, 3, 0, 2, 4, 5)
    ]
    assert [i["state"] == "acknowledged" for i in listed] == [True, False, False, True, False, True]
    assert [p["returned"] for p in walked] == [2, 2, 2] and walked[-1]["next_cursor"] is None
    acked = pages(reader, status="acked", limit=1)
    assert [i["message_id"] for p in acked for i in p["items"]] == [
        sent[n]["message"]["id"] for n in (1, 2, 5)
    ]


def test_a_bad_status_is_refused(api: Api) -> None:
    reader = api.agent("reader")
    error_message(
        reader.get("/inbox", params={"status": "read"}), 422, "validation_error", "status"
    )


# --- priority --------------------------------------------------------------------------------


def test_urgent_mail_comes_first_then_oldest_first_and_the_cursor_follows(api: Api) -> None:
    sender, reader = api.agent("sender"), api.agent("reader")
    thread = sender.open_thread("Mixed", ["reader"])["id"]
    order = ["normal", "urgent", "normal", "urgent", "normal"]
    sent = [sender.send(thread, f"m{n}", priority=p)["message"] for n, p in enumerate(order)]
    assert [m["priority"] for m in sent] == order

    walked = pages(reader, limit=2)
    listed = [item for p in walked for item in p["items"]]
    assert [i["message_id"] for i in listed] == [sent[n]["id"] for n in (1, 3, 0, 2, 4)]
    assert [i["priority"] for i in listed] == ["urgent", "urgent", "normal", "normal", "normal"]

    urgent = reader.inbox(priority="urgent")
    assert ids(urgent) == [sent[1]["id"], sent[3]["id"]]
    assert urgent["waiting"] == 5 and urgent["more"] is False
    assert ids(reader.inbox(priority="normal")) == [sent[n]["id"] for n in (0, 2, 4)]
    error_message(
        reader.get("/inbox", params={"priority": "high"}), 422, "validation_error", "priority"
    )


def test_the_long_poll_answers_in_the_inboxs_shape_urgent_first(api: Api) -> None:
    sender, reader = api.agent("sender"), api.agent("reader")
    thread = sender.open_thread("Wake", ["reader"])["id"]
    normal = sender.send(thread, "later")["message"]["id"]
    urgent = sender.send(thread, "now", priority="urgent")["message"]["id"]
    woke = reader.ok("GET", "/inbox/wait", params={"timeout": "5"})
    assert ids(woke) == [urgent, normal]
    assert woke["next_cursor"] is None and "body" not in woke["items"][0]
    assert woke["items"][0]["priority"] == "urgent" and woke["items"][0]["thread_ref"] is None


# --- since -----------------------------------------------------------------------------------


def test_since_a_delivery_id_or_a_time(api: Api) -> None:
    _, reader, sent = mailbox(api, 4)
    second = sent[1]["deliveries"][0]["id"]
    after = reader.inbox(since=second)
    assert ids(after) == [s["message"]["id"] for s in sent[2:]]

    at = datetime.fromisoformat(sent[1]["message"]["created_at"].replace("Z", "+00:00"))
    by_time = reader.inbox(since=sent[1]["message"]["created_at"])
    assert ids(by_time) == [s["message"]["id"] for s in sent[2:]]
    earlier = (at - timedelta(hours=1)).isoformat()
    assert len(reader.inbox(since=earlier)["items"]) == 4
    later = (at + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    assert reader.inbox(since=later)["items"] == []


@pytest.mark.parametrize("since", ["yesterday", "2026-11-29T18:10:00", "msg_01", "th_01"])
def test_a_bad_since_is_refused(api: Api, since: str) -> None:
    reader = api.agent("reader")
    message = error_message(
        reader.get("/inbox", params={"since": since}), 422, "validation_error", "since"
    )
    if since == "2026-11-29T18:10:00":  # a time, but no moment without its zone: said so
        assert "time zone" in message, message
    else:
        assert "dlv_" in message and "RFC 3339" in message


# --- read and acknowledge at once ------------------------------------------------------------


# ``POST /v1/messages/{id}/read {ack?, note?}`` is the way; the GET's ``?ack=`` stays for older
# clients. Both run the same service function, so each scenario runs through both.
FORMS = ["post", "get"]


def read_acking(caller: Caller, ident: str, form: str, **fields: str) -> httpx.Response:
    if form == "post":
        return caller.post(f"/messages/{ident}/read", json=fields)
    return caller.get(f"/messages/{ident}", params=fields)


def read_acked(caller: Caller, ident: str, form: str, **fields: str) -> dict[str, Any]:
    response = read_acking(caller, ident, form, **fields)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("outcome", ["done", "declined"])
def test_reading_with_ack_reads_and_acknowledges_in_one_call(
    api: Api, outcome: str, form: str
) -> None:
    _, reader, sent = mailbox(api, 2)
    delivery_id = sent[0]["deliveries"][0]["id"]
    read = read_acked(reader, delivery_id, form, ack=outcome)
    assert read["message"]["body"] == "message 1"
    assert read["delivery"]["state"] == "acknowledged" and read["delivery"]["outcome"] == outcome
    receipt = api.delivery(delivery_id)
    assert receipt["fetched_at"] and receipt["acknowledged_at"] and receipt["outcome"] == outcome
    assert reader.inbox()["waiting"] == 1

    by_message = sent[1]["message"]["id"]
    noted = read_acked(reader, by_message, form, ack="declined", note="no")
    assert (noted["delivery"]["outcome"], noted["delivery"]["note"]) == ("declined", "no")
    assert reader.inbox()["waiting"] == 0
    again = read_acked(reader, by_message, form, ack="done")
    assert again["delivery"]["outcome"] == "declined"  # acknowledging again changes nothing


@pytest.mark.parametrize("form", FORMS)
def test_a_bad_ack_is_refused_and_changes_nothing(api: Api, form: str) -> None:
    _, reader, sent = mailbox(api, 1)
    delivery_id = sent[0]["deliveries"][0]["id"]
    # A bad ack; and a note without ack (the note is the acknowledgement's): refused, not dropped.
    for fields, field in (({"ack": "yes"}, "ack"), ({"note": "seen"}, "note")):
        response = read_acking(reader, delivery_id, form, **fields)
        error_message(response, 422, "validation_error", field)
        assert api.delivery(delivery_id)["fetched_at"] is None, fields


@pytest.mark.parametrize("form", FORMS)
def test_the_sender_reading_with_ack_acknowledges_nothing(api: Api, form: str) -> None:
    sender, reader, sent = mailbox(api, 1)
    read = read_acked(sender, sent[0]["message"]["id"], form, ack="done")
    assert read["delivery"] is None
    assert reader.inbox()["waiting"] == 1
    outsider = api.agent("outsider")
    response = read_acking(outsider, sent[0]["message"]["id"], form, ack="done")
    error_message(response, 404, "not_found", None)


def test_post_read_without_a_body_only_reads_and_refuses_what_it_does_not_know(api: Api) -> None:
    _, reader, sent = mailbox(api, 1)
    delivery_id = sent[0]["deliveries"][0]["id"]
    for wrong in ({"ack": "done", "outcome": "done"}, ["done"]):
        response = reader.post(f"/messages/{delivery_id}/read", json=wrong)
        assert response.status_code == 422, response.text
        assert api.delivery(delivery_id)["fetched_at"] is None, wrong
    read = reader.ok("POST", f"/messages/{delivery_id}/read")
    assert read["message"]["body"] == "message 1"
    assert read["delivery"]["state"] == "fetched"
    assert reader.inbox()["waiting"] == 1
