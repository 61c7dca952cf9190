"""Threads over HTTP: opening, listing, reading, participants and the close-request cycle.

Rules from product.md ("Thread", "Participant", "Reading rules") and http-api.md (thread rows of
both endpoint tables). Every test runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import Api, Caller, assert_error

THREAD_FIELDS = {"id", "title", "goal", "status", "opened_by", "participants", "created_at"}


def thread_ids(caller: Caller, **params: Any) -> list[str]:
    return [t["id"] for t in caller.ok("GET", "/threads", params=params)["items"]]


def thread_deliveries(api: Api, thread_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = api.ok("GET", "/deliveries", params={"thread": thread_id})[
        "items"
    ]
    return items


def archive(api: Api, username: str) -> None:
    api.ok("POST", f"/agents/{username}/archive")


# --- opening -------------------------------------------------------------------------------


def test_agent_opens_thread_as_opener_and_participant(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    response = alice.post(
        "/threads",
        json={"title": "Review the migration", "goal": "Ship it", "participants": ["bob", "bob"]},
    )
    assert response.status_code == 201, response.text
    thread = response.json()
    assert set(thread) >= THREAD_FIELDS
    assert thread["id"]
    assert thread["title"] == "Review the migration"
    assert thread["goal"] == "Ship it"
    assert thread["status"] == "open"
    assert thread["opened_by"] == "alice"
    assert sorted(thread["participants"]) == ["alice", "bob"]
    assert thread["created_at"].endswith("Z")
    # The opener can read it back, and so can the other participant.
    assert alice.ok("GET", f"/threads/{thread['id']}")["participants"] == thread["participants"]
    assert thread_ids(alice) == [thread["id"]]


def test_operator_opens_thread_and_is_participant(api: Api) -> None:
    bob = api.agent("bob")
    thread = api.open_thread("Operator task", ["bob"])
    assert thread["opened_by"] == "operator"
    assert thread["status"] == "open"
    assert sorted(thread["participants"]) == ["bob", "operator"]
    assert set(thread) >= THREAD_FIELDS
    # bob posts and the operator, as a participant, receives it.
    sent = bob.send(thread["id"], "done")
    assert [d["recipient"] for d in sent["deliveries"]] == ["operator"]
    operator_inbox = api.ok("GET", "/operator/inbox")
    assert [i["message_id"] for i in operator_inbox["items"]] == [sent["message"]["id"]]


def test_title_and_goal_at_their_limits_are_accepted(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("t" * 200, ["bob"], goal="g" * 2000)
    assert thread["title"] == "t" * 200
    assert thread["goal"] == "g" * 2000
    one = alice.open_thread("x", ["bob"])
    assert one["title"] == "x"
    assert one["goal"] is None


@pytest.mark.parametrize(
    "title", ["", "   ", "t" * 201, None], ids=["empty", "blank", "201", "null"]
)
def test_bad_title_is_rejected_naming_title(api: Api, title: object) -> None:
    alice = api.agent("alice")
    response = alice.post("/threads", json={"title": title, "participants": []})
    assert_error(response, 422, "validation_error", "title")
    assert thread_ids(alice) == []


def test_missing_title_is_rejected_naming_title(api: Api) -> None:
    alice = api.agent("alice")
    response = alice.post("/threads", json={"participants": []})
    assert_error(response, 422, "validation_error", "title")


def test_goal_over_2000_characters_is_rejected_naming_goal(api: Api) -> None:
    alice = api.agent("alice")
    response = alice.post("/threads", json={"title": "ok", "goal": "g" * 2001, "participants": []})
    assert_error(response, 422, "validation_error", "goal")
    assert thread_ids(alice) == []


def test_unknown_participant_is_rejected_naming_participants(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    response = alice.post("/threads", json={"title": "t", "participants": ["bob", "nobody-here"]})
    error = assert_error(response, 422, "validation_error", "participants")
    assert "nobody-here" in error["message"]
    assert thread_ids(alice) == []
    assert thread_ids(api) == []


def test_archived_participant_is_rejected_naming_participants(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    archive(api, "bob")
    response = alice.post("/threads", json={"title": "t", "participants": ["bob"]})
    error = assert_error(response, 422, "validation_error", "participants")
    assert "bob" in error["message"]
    assert thread_ids(api) == []


def test_operator_opening_with_unknown_participant_is_rejected(api: Api) -> None:
    response = api.post("/threads", json={"title": "t", "participants": ["ghost"]})
    assert_error(response, 422, "validation_error", "participants")
    assert thread_ids(api) == []


# --- listing -------------------------------------------------------------------------------


def test_thread_lists_page_with_a_cursor_to_the_last_thread(api: Api) -> None:
    """Past one page the answer says so (``next_cursor``) and the cursor visits every thread
    once, most recent activity first, for the operator and for an agent alike."""
    alice = api.agent("alice")
    api.agent("bob")
    opened = [alice.open_thread(f"task {i}", ["bob"])["id"] for i in range(7)]
    alice.send(opened[2], "activity moves it to the top")
    expected = [opened[2], *reversed([t for t in opened if t != opened[2]])]

    for caller in (api, alice):
        seen, pages, cursor = [], [], None
        while True:
            params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
            page = caller.ok("GET", "/threads", params=params)
            pages.append(len(page["items"]))
            seen += [t["id"] for t in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert pages == [3, 3, 1] and seen == expected, (caller.name, pages, seen)
    assert api.ok("GET", "/threads")["next_cursor"] is None  # 7 fit the default page


def test_thread_list_with_a_bad_cursor_is_rejected(api: Api) -> None:
    for cursor in ("nonsense", "dGhfMTIz", "bm90LWEtdGltZXx0aF8x"):
        answer = api.get("/threads", params={"cursor": cursor})
        assert answer.status_code == 422, (cursor, answer.text)
        assert answer.json()["error"]["field"] == "cursor"


def test_agent_lists_only_its_unclosed_threads_most_recent_activity_first(api: Api) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    carol = api.agent("carol")
    first = alice.open_thread("first", ["bob"])
    second = alice.open_thread("second", ["bob"])
    pending = alice.open_thread("pending", ["bob"])
    to_close = alice.open_thread("to close", ["bob"])
    not_mine = bob.open_thread("not alice's", ["carol"])
    operators = api.open_thread("operator's", ["carol"])

    alice.ok("POST", f"/threads/{pending['id']}/close-request", 202)
    api.ok("POST", f"/threads/{to_close['id']}/close")
    # Activity in the oldest thread moves it to the top.
    bob.send(first["id"], "news")

    assert thread_ids(alice) == [first["id"], pending["id"], second["id"]]
    listed = alice.ok("GET", "/threads")["items"]
    assert {t["status"] for t in listed} == {"open", "close_requested"}
    assert set(listed[0]) >= THREAD_FIELDS
    assert not_mine["id"] not in thread_ids(alice)
    assert thread_ids(bob)[0] == first["id"]
    assert thread_ids(carol) == [operators["id"], not_mine["id"]]
    assert to_close["id"] not in thread_ids(bob)


def test_agent_thread_list_excludes_threads_it_is_not_in(api: Api) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    api.agent("carol")
    mine = bob.open_thread("bob and carol", ["carol"])
    assert thread_ids(alice) == []
    assert thread_ids(bob) == [mine["id"]]


def test_operator_lists_every_thread_and_filters_by_status(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    open_one = alice.open_thread("open", ["bob"])
    requested = alice.open_thread("requested", ["bob"])
    closed = alice.open_thread("closed", ["bob"])
    own = api.open_thread("operator's own", ["bob"])
    alice.ok("POST", f"/threads/{requested['id']}/close-request", 202)
    api.ok("POST", f"/threads/{closed['id']}/close")

    everything = api.ok("GET", "/threads")["items"]
    assert {t["id"] for t in everything} == {
        open_one["id"],
        requested["id"],
        closed["id"],
        own["id"],
    }
    assert sorted(thread_ids(api, status="open")) == sorted([open_one["id"], own["id"]])
    assert thread_ids(api, status="close_requested") == [requested["id"]]
    closed_items = api.ok("GET", "/threads", params={"status": "closed"})["items"]
    assert [t["id"] for t in closed_items] == [closed["id"]]
    assert closed_items[0]["status"] == "closed"


def test_invalid_status_filter_is_rejected(api: Api) -> None:
    response = api.get("/threads", params={"status": "archived"})
    assert_error(response, 422, "validation_error", "status")


# --- reading one ---------------------------------------------------------------------------


def test_participant_gets_thread_with_participants(api: Api) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("t", ["bob"], goal="the goal")
    got = bob.ok("GET", f"/threads/{thread['id']}")
    assert got["id"] == thread["id"]
    assert got["title"] == "t" and got["goal"] == "the goal"
    assert got["opened_by"] == "alice"
    assert sorted(got["participants"]) == ["alice", "bob"]
    assert got["status"] == "open"


def test_non_participant_gets_not_found_like_a_made_up_id(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    carol = api.agent("carol")
    thread = alice.open_thread("t", ["bob"])
    foreign = carol.get(f"/threads/{thread['id']}")
    made_up = carol.get("/threads/th_doesnotexist")
    foreign_error = assert_error(foreign, 404, "not_found")
    made_up_error = assert_error(made_up, 404, "not_found")
    # The same answer as for an id that never existed: nothing reveals the thread is real.
    assert foreign_error["message"].replace(thread["id"], "ID") == made_up_error["message"].replace(
        "th_doesnotexist", "ID"
    )


def test_closed_thread_is_not_found_for_agents_but_operator_sees_messages_and_receipts(
    api: Api,
) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    api.agent("carol")
    thread = alice.open_thread("t", ["bob", "carol"])
    first = alice.send(thread["id"], "first", kind="task")
    second = bob.send(thread["id"], "second")
    acked = next(d["id"] for d in first["deliveries"] if d["recipient"] == "bob")
    bob.ok("POST", "/acks", json={"ids": [acked]})
    api.ok("POST", f"/threads/{thread['id']}/close")

    for agent in (alice, bob):
        assert_error(agent.get(f"/threads/{thread['id']}"), 404, "not_found")

    detail = api.ok("GET", f"/threads/{thread['id']}")
    assert detail["status"] == "closed"
    assert sorted(detail["participants"]) == ["alice", "bob", "carol"]
    messages = detail["messages"]
    assert [m["id"] for m in messages] == [first["message"]["id"], second["message"]["id"]]
    assert messages[0]["body"] == "first" and messages[0]["sender"] == "alice"
    receipts = {d["recipient"]: d for d in messages[0]["deliveries"]}
    assert set(receipts) == {"bob", "carol"}
    assert receipts["bob"]["state"] == "acknowledged"
    assert receipts["bob"]["acknowledged_at"] is not None
    assert receipts["carol"]["state"] == "accepted"
    assert receipts["carol"]["acknowledged_at"] is None
    assert {d["recipient"] for d in messages[1]["deliveries"]} == {"alice", "carol"}


# --- participants --------------------------------------------------------------------------


def test_any_participant_can_add_a_participant(api: Api) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    api.agent("carol")
    thread = alice.open_thread("t", ["bob"])
    added = bob.ok("POST", f"/threads/{thread['id']}/participants", json={"username": "carol"})
    assert added["id"] == thread["id"]
    assert sorted(added["participants"]) == ["alice", "bob", "carol"]
    assert sorted(alice.ok("GET", f"/threads/{thread['id']}")["participants"]) == [
        "alice",
        "bob",
        "carol",
    ]


def test_adding_a_participant_is_idempotent(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    api.agent("carol")
    thread = alice.open_thread("t", ["bob"])
    path = f"/threads/{thread['id']}/participants"
    once = alice.ok("POST", path, json={"username": "carol"})
    twice = alice.ok("POST", path, json={"username": "carol"})
    again_bob = alice.ok("POST", path, json={"username": "bob"})
    for answer in (once, twice, again_bob):
        assert sorted(answer["participants"]) == ["alice", "bob", "carol"]
    # One delivery to carol per message, not two.
    sent = alice.send(thread["id"], "hi")
    assert sorted(d["recipient"] for d in sent["deliveries"]) == ["bob", "carol"]


def test_added_participant_reads_whole_history_and_receives_new_messages(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    carol = api.agent("carol")
    thread = alice.open_thread("t", ["bob"])
    before = [alice.send(thread["id"], f"before {i}")["message"]["id"] for i in range(3)]
    assert_error(carol.get(f"/threads/{thread['id']}/messages"), 404, "not_found")

    alice.ok("POST", f"/threads/{thread['id']}/participants", json={"username": "carol"})
    history = carol.ok("GET", f"/threads/{thread['id']}/messages")
    assert [m["id"] for m in history["items"]] == before
    assert [m["body"] for m in history["items"]] == ["before 0", "before 1", "before 2"]
    assert carol.ok("GET", f"/messages/{before[0]}")["message"]["body"] == "before 0"

    after = alice.send(thread["id"], "after")
    assert "carol" in [d["recipient"] for d in after["deliveries"]]
    assert [i["message_id"] for i in carol.inbox()["items"]] == [after["message"]["id"]]


@pytest.mark.parametrize("username", ["ghost-agent", "dave"], ids=["unknown", "archived"])
def test_adding_unknown_or_archived_username_is_rejected(api: Api, username: str) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    api.agent("dave")
    archive(api, "dave")
    thread = alice.open_thread("t", ["bob"])
    response = alice.post(f"/threads/{thread['id']}/participants", json={"username": username})
    assert_error(response, 422, "validation_error", "username")
    assert sorted(alice.ok("GET", f"/threads/{thread['id']}")["participants"]) == [
        "alice",
        "bob",
    ]


def test_non_participant_cannot_add_participant(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    carol = api.agent("carol")
    thread = alice.open_thread("t", ["bob"])
    response = carol.post(f"/threads/{thread['id']}/participants", json={"username": "carol"})
    assert_error(response, 404, "not_found")
    assert "carol" not in api.ok("GET", f"/threads/{thread['id']}")["participants"]


def test_adding_participant_while_close_requested_is_rejected(api: Api) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    api.agent("carol")
    thread = alice.open_thread("t", ["bob"])
    alice.ok("POST", f"/threads/{thread['id']}/close-request", 202)
    response = bob.post(f"/threads/{thread['id']}/participants", json={"username": "carol"})
    assert_error(response, 409, "thread_not_open")
    assert "carol" not in api.ok("GET", f"/threads/{thread['id']}")["participants"]


# --- close request, close, dismiss ---------------------------------------------------------


def test_opener_requests_close(api: Api) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("t", ["bob"])
    response = alice.post(f"/threads/{thread['id']}/close-request")
    assert response.status_code == 202, response.text
    answer = response.json()
    assert answer["id"] == thread["id"]
    assert answer["status"] == "close_requested"
    assert bob.ok("GET", f"/threads/{thread['id']}")["status"] == "close_requested"
    assert api.ok("GET", f"/threads/{thread['id']}")["status"] == "close_requested"


def test_other_participant_cannot_request_close(api: Api) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("t", ["bob"])
    response = bob.post(f"/threads/{thread['id']}/close-request")
    assert_error(response, 403, "forbidden")
    assert api.ok("GET", f"/threads/{thread['id']}")["status"] == "open"


def test_participant_cannot_request_close_of_operator_opened_thread(api: Api) -> None:
    bob = api.agent("bob")
    thread = api.open_thread("t", ["bob"])
    assert_error(bob.post(f"/threads/{thread['id']}/close-request"), 403, "forbidden")
    assert api.ok("GET", f"/threads/{thread['id']}")["status"] == "open"


def test_non_participant_close_request_is_not_found(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    carol = api.agent("carol")
    thread = alice.open_thread("t", ["bob"])
    assert_error(carol.post(f"/threads/{thread['id']}/close-request"), 404, "not_found")
    assert api.ok("GET", f"/threads/{thread['id']}")["status"] == "open"


def test_while_close_pending_sending_is_rejected_but_reading_and_acknowledging_work(
    api: Api,
) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("t", ["bob"])
    sent = alice.send(thread["id"], "please look", kind="task")
    delivery_id = sent["deliveries"][0]["id"]
    alice.ok("POST", f"/threads/{thread['id']}/close-request", 202)

    for sender in (alice, bob, api):
        response = sender.post(f"/threads/{thread['id']}/messages", json={"body": "more"})
        assert_error(response, 409, "thread_not_open")
    assert len(api.ok("GET", f"/threads/{thread['id']}")["messages"]) == 1

    # Reading still works: thread, inbox, history, the message itself.
    assert bob.ok("GET", f"/threads/{thread['id']}")["status"] == "close_requested"
    assert [i["delivery_id"] for i in bob.inbox()["items"]] == [delivery_id]
    history = bob.ok("GET", f"/threads/{thread['id']}/messages")
    assert [m["body"] for m in history["items"]] == ["please look"]
    assert bob.ok("GET", f"/messages/{delivery_id}")["message"]["body"] == "please look"
    # Acknowledging still works.
    acked = bob.ok("POST", "/acks", json={"ids": [delivery_id], "outcome": "done"})
    assert acked == {"acknowledged": [delivery_id], "already": [], "not_found": []}
    assert api.delivery(delivery_id)["state"] == "acknowledged"
    assert bob.inbox()["items"] == []


def test_operator_confirms_close_request(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("t", ["bob"])
    alice.ok("POST", f"/threads/{thread['id']}/close-request", 202)
    closed = api.ok("POST", f"/threads/{thread['id']}/close")
    assert closed["id"] == thread["id"]
    assert closed["status"] == "closed"
    assert api.ok("GET", f"/threads/{thread['id']}")["status"] == "closed"


def test_operator_closes_open_thread_outright(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("t", ["bob"])
    closed = api.ok("POST", f"/threads/{thread['id']}/close")
    assert closed["status"] == "closed"
    assert thread_ids(alice) == []


def test_a_send_to_a_closed_or_closing_thread_says_which_it_is(api: Api) -> None:
    """409 ``thread_not_open`` either way; the message tells a pending close request (reading
    and acknowledging still work) from a closed thread (open a new one)."""
    alice = api.agent("alice")
    api.agent("bob")
    closing = alice.open_thread("closing", ["bob"])["id"]
    alice.ok("POST", f"/threads/{closing}/close-request", 202)
    pending = assert_error(
        alice.post(f"/threads/{closing}/messages", json={"body": "x"}), 409, "thread_not_open"
    )["message"]
    assert "close request pending" in pending and "acknowledge" in pending, pending
    closed = alice.open_thread("closed", ["bob"])["id"]
    api.ok("POST", f"/threads/{closed}/close")
    message = assert_error(
        api.post(f"/threads/{closed}/messages", json={"body": "x"}), 409, "thread_not_open"
    )["message"]
    assert "is closed" in message and "new thread" in message, message
    assert "acknowledge" not in message, message


def test_closed_thread_disappears_for_agents(api: Api) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("t", ["bob"])
    kept = alice.open_thread("kept", ["bob"])
    sent = alice.send(thread["id"], "in the closed thread")
    other = alice.send(kept["id"], "in the open thread")
    message_id = sent["message"]["id"]
    delivery_id = sent["deliveries"][0]["id"]
    assert bob.inbox()["waiting"] == 2
    api.ok("POST", f"/threads/{thread['id']}/close")

    for agent in (alice, bob):
        assert thread_ids(agent) == [kept["id"]]
        assert_error(agent.get(f"/threads/{thread['id']}"), 404, "not_found")
        assert_error(agent.get(f"/threads/{thread['id']}/messages"), 404, "not_found")
        assert_error(agent.get(f"/messages/{message_id}"), 404, "not_found")
    assert_error(bob.get(f"/messages/{delivery_id}"), 404, "not_found")
    assert_error(
        bob.post(f"/threads/{thread['id']}/participants", json={"username": "bob"}),
        404,
        "not_found",
    )
    assert_error(
        alice.post(f"/threads/{thread['id']}/messages", json={"body": "x"}), 404, "not_found"
    )
    assert_error(alice.post(f"/threads/{thread['id']}/close-request"), 404, "not_found")
    inbox = bob.inbox()
    assert [i["delivery_id"] for i in inbox["items"]] == [other["deliveries"][0]["id"]]
    assert inbox["waiting"] == 1 and inbox["more"] is False
    # The operator still sees everything.
    assert api.ok("GET", f"/threads/{thread['id']}/messages")["items"][0]["id"] == message_id
    assert api.ok("GET", f"/messages/{message_id}")["message"]["body"] == "in the closed thread"


def test_unacknowledged_deliveries_stay_unacknowledged_after_close(api: Api) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("t", ["bob"])
    open_one = alice.send(thread["id"], "never acted on")["deliveries"][0]["id"]
    done_one = alice.send(thread["id"], "acted on")["deliveries"][0]["id"]
    bob.ok("POST", "/acks", json={"ids": [done_one], "outcome": "done"})
    api.ok("POST", f"/threads/{thread['id']}/close")

    # Acknowledging after the close changes nothing: the thread no longer exists for bob.
    late = bob.ok("POST", "/acks", json={"ids": [open_one]})
    assert late == {"acknowledged": [], "already": [], "not_found": [open_one]}
    receipt = api.delivery(open_one)
    assert receipt["acknowledged_at"] is None
    assert receipt["state"] != "acknowledged"
    listed = {d["id"]: d for d in thread_deliveries(api, thread["id"])}
    assert listed[open_one]["acknowledged_at"] is None
    assert listed[done_one]["acknowledged_at"] is not None
    assert api.delivery(done_one)["outcome"] == "done"


def test_operator_dismisses_close_request_and_thread_is_open_again(api: Api) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("t", ["bob"])
    alice.ok("POST", f"/threads/{thread['id']}/close-request", 202)
    dismissed = api.ok("POST", f"/threads/{thread['id']}/close/dismiss")
    assert dismissed["id"] == thread["id"]
    assert dismissed["status"] == "open"
    assert bob.ok("GET", f"/threads/{thread['id']}")["status"] == "open"
    # Sending works again, and the opener may ask again.
    assert bob.send(thread["id"], "back at it")["duplicate"] is False
    assert alice.ok("POST", f"/threads/{thread['id']}/close-request", 202)["status"] == (
        "close_requested"
    )


def test_dismiss_without_pending_request_is_conflict(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("t", ["bob"])
    response = api.post(f"/threads/{thread['id']}/close/dismiss")
    assert_error(response, 409, "conflict")
    assert api.ok("GET", f"/threads/{thread['id']}")["status"] == "open"

    api.ok("POST", f"/threads/{thread['id']}/close")
    assert_error(api.post(f"/threads/{thread['id']}/close/dismiss"), 409, "conflict")
    assert api.ok("GET", f"/threads/{thread['id']}")["status"] == "closed"


def test_agents_cannot_close_or_dismiss(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("t", ["bob"])
    assert_error(alice.post(f"/threads/{thread['id']}/close"), 403, "forbidden")
    alice.ok("POST", f"/threads/{thread['id']}/close-request", 202)
    assert_error(alice.post(f"/threads/{thread['id']}/close/dismiss"), 403, "forbidden")
    assert_error(alice.post(f"/threads/{thread['id']}/close"), 403, "forbidden")
    assert api.ok("GET", f"/threads/{thread['id']}")["status"] == "close_requested"


def test_operator_cannot_request_close(api: Api) -> None:
    api.agent("bob")
    thread = api.open_thread("t", ["bob"])
    assert_error(api.post(f"/threads/{thread['id']}/close-request"), 403, "forbidden")
    assert api.ok("GET", f"/threads/{thread['id']}")["status"] == "open"
