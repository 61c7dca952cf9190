"""Messages over HTTP: posting, content limits, listings' cut summaries, idempotency keys and
thread history.

Rules from product.md ("Message", "Participant", "Limits") and http-api.md (the message rows).
Every test runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import pytest

from tests.helpers import Api, Caller, assert_error

MESSAGE_FIELDS = {"id", "thread_id", "sender", "kind", "summary", "body", "reply_to", "created_at"}
KINDS = ["task", "question", "update", "decision", "handoff", "ack"]
ELLIPSIS = "…"


def post(caller: Caller, thread_id: str, key: str | None = None, **fields: Any) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key is not None else {}
    return caller.post(f"/threads/{thread_id}/messages", json=fields, headers=headers)


def stored_messages(api: Api, thread_id: str) -> list[dict[str, Any]]:
    """Every message of the thread with its receipts, as the operator sees them."""
    messages: list[dict[str, Any]] = api.ok("GET", f"/threads/{thread_id}")["messages"]
    return messages


def stored_deliveries(api: Api, thread_id: str) -> list[dict[str, Any]]:
    page = api.ok("GET", "/deliveries", params={"thread": thread_id, "limit": 200})
    assert page["next_cursor"] is None
    items: list[dict[str, Any]] = page["items"]
    return items


def history(caller: Caller, thread_id: str, **params: Any) -> dict[str, Any]:
    return caller.ok("GET", f"/threads/{thread_id}/messages", params=params)  # type: ignore[no-any-return]


def pair(api: Api) -> tuple[Caller, Caller, str]:
    """alice and bob in one open thread."""
    alice = api.agent("alice")
    bob = api.agent("bob")
    return alice, bob, alice.open_thread("A task", ["bob"])["id"]


# --- posting -------------------------------------------------------------------------------


def test_post_answers_201_with_message_deliveries_and_duplicate_false(api: Api) -> None:
    alice, _, thread_id = pair(api)
    response = post(
        alice, thread_id, body="Please review PR 12", summary="Review PR 12", kind="task"
    )
    assert response.status_code == 201, response.text
    answer = response.json()
    assert set(answer) >= {"message", "deliveries", "duplicate"}
    assert answer["duplicate"] is False
    message = answer["message"]
    assert set(message) >= MESSAGE_FIELDS
    assert message["id"]
    assert message["thread_id"] == thread_id
    assert message["sender"] == "alice"
    assert message["kind"] == "task"
    assert message["summary"] == "Review PR 12"
    assert message["body"] == "Please review PR 12"
    assert message["reply_to"] is None
    assert message["created_at"].endswith("Z")
    assert len(answer["deliveries"]) == 1
    delivery = answer["deliveries"][0]
    assert set(delivery) >= {"id", "recipient", "state"}
    assert delivery["recipient"] == "bob"
    assert delivery["state"] == "accepted"
    receipt = api.delivery(delivery["id"])
    assert receipt["message_id"] == message["id"]
    assert receipt["accepted_at"] is not None


def test_one_delivery_per_other_participant(api: Api) -> None:
    alice = api.agent("alice")
    for name in ("bob", "carol", "dave"):
        api.agent(name)
    thread_id = alice.open_thread("t", ["bob", "carol", "dave"])["id"]
    answer = alice.send(thread_id, "to all")
    recipients = [d["recipient"] for d in answer["deliveries"]]
    assert sorted(recipients) == ["bob", "carol", "dave"]
    assert len({d["id"] for d in answer["deliveries"]}) == 3
    stored = stored_deliveries(api, thread_id)
    assert len(stored) == 3
    assert {d["recipient"] for d in stored} == {"bob", "carol", "dave"}
    assert {d["message_id"] for d in stored} == {answer["message"]["id"]}
    assert len(stored_messages(api, thread_id)) == 1
    assert alice.inbox()["items"] == []


def test_archived_participant_stops_receiving(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    carol = api.agent("carol")
    thread_id = alice.open_thread("t", ["bob", "carol"])["id"]
    before = alice.send(thread_id, "before")
    assert sorted(d["recipient"] for d in before["deliveries"]) == ["bob", "carol"]
    api.ok("POST", "/agents/bob/archive")
    after = alice.send(thread_id, "after")
    assert [d["recipient"] for d in after["deliveries"]] == ["carol"]
    assert [d["recipient"] for d in stored_messages(api, thread_id)[1]["deliveries"]] == ["carol"]
    # bob's earlier receipt stays readable.
    bob_receipt = next(d for d in before["deliveries"] if d["recipient"] == "bob")
    assert api.delivery(bob_receipt["id"])["recipient"] == "bob"
    assert len(carol.inbox()["items"]) == 2


def test_send_with_nobody_else_left_in_thread_is_rejected_and_stores_nothing(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    thread_id = alice.open_thread("alone", ["bob"])["id"]
    api.ok("POST", "/agents/bob/archive")
    assert_error(post(alice, thread_id, body="hello?"), 409, "no_recipients")
    assert stored_messages(api, thread_id) == []
    assert stored_deliveries(api, thread_id) == []
    assert history(alice, thread_id)["items"] == []


def test_send_when_every_other_participant_is_archived_is_rejected(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    api.agent("carol")
    thread_id = alice.open_thread("t", ["bob", "carol"])["id"]
    api.ok("POST", "/agents/bob/archive")
    api.ok("POST", "/agents/carol/archive")
    assert_error(post(alice, thread_id, body="anyone?"), 409, "no_recipients")
    assert stored_messages(api, thread_id) == []
    assert stored_deliveries(api, thread_id) == []


def test_operator_post_joins_thread_as_participant_operator(api: Api) -> None:
    alice, bob, thread_id = pair(api)
    assert "operator" not in api.ok("GET", f"/threads/{thread_id}")["participants"]
    long_body = "Operator note. " * 30  # over 200 characters, no summary needed
    sent = api.send(thread_id, long_body)
    assert sent["message"]["sender"] == "operator"
    assert sent["message"]["summary"] is None
    assert sorted(d["recipient"] for d in sent["deliveries"]) == ["alice", "bob"]
    thread = alice.ok("GET", f"/threads/{thread_id}")
    assert "operator" in thread["participants"]
    # From now on the operator receives the thread's mail in its own inbox.
    reply = bob.send(thread_id, "noted")
    assert sorted(d["recipient"] for d in reply["deliveries"]) == ["alice", "operator"]
    operator_inbox = api.ok("GET", "/operator/inbox")
    assert [i["message_id"] for i in operator_inbox["items"]] == [reply["message"]["id"]]
    assert operator_inbox["items"][0]["sender"] == "bob"


# --- body, summary, kind, reply_to ---------------------------------------------------------


def test_body_of_10000_code_points_is_accepted(api: Api) -> None:
    alice, bob, thread_id = pair(api)
    body = "é" * 10_000  # 20,000 bytes of UTF-8: the limit counts code points
    sent = alice.send(thread_id, body, summary="a long one")
    assert sent["message"]["body"] == body
    assert bob.ok("GET", f"/messages/{sent['message']['id']}")["message"]["body"] == body


def test_body_over_10000_code_points_is_rejected_naming_body(api: Api) -> None:
    alice, _, thread_id = pair(api)
    response = post(alice, thread_id, body="é" * 10_001, summary="too long")
    assert_error(response, 422, "validation_error", "body")
    operator = post(api, thread_id, body="é" * 10_001)
    assert_error(operator, 422, "validation_error", "body")
    assert stored_messages(api, thread_id) == []


def test_empty_body_is_rejected_naming_body(api: Api) -> None:
    alice, _, thread_id = pair(api)
    assert_error(post(alice, thread_id, body=""), 422, "validation_error", "body")
    assert stored_messages(api, thread_id) == []


@pytest.mark.parametrize("fields", [{}, {"body": None}], ids=["missing", "null"])
def test_missing_or_null_body_is_rejected_naming_body(api: Api, fields: dict[str, Any]) -> None:
    # The JSON field is called "body", like the request body itself: the error must still name
    # the field and not claim the request body is missing or not an object.
    alice, _, thread_id = pair(api)
    error = assert_error(post(alice, thread_id, **fields), 422, "validation_error", "body")
    assert "request body" not in error["message"].lower()
    assert stored_messages(api, thread_id) == []


def test_agent_body_over_200_characters_requires_summary(api: Api) -> None:
    alice, _, thread_id = pair(api)
    at_limit = alice.send(thread_id, "b" * 200)
    assert at_limit["message"]["summary"] is None
    error = assert_error(post(alice, thread_id, body="b" * 201), 422, "summary_required", "summary")
    assert "summary" in error["message"].lower()
    assert len(stored_messages(api, thread_id)) == 1
    with_summary = alice.send(thread_id, "b" * 201, summary="Read the long one")
    assert with_summary["message"]["summary"] == "Read the long one"


def test_operator_never_needs_a_summary(api: Api) -> None:
    _, _, thread_id = pair(api)
    sent = api.send(thread_id, "o" * 10_000)
    assert sent["message"]["summary"] is None
    assert len(sent["message"]["body"]) == 10_000


def test_summary_over_200_characters_is_rejected(api: Api) -> None:
    alice, _, thread_id = pair(api)
    assert alice.send(thread_id, "x", summary="s" * 200)["message"]["summary"] == "s" * 200
    response = post(alice, thread_id, body="x", summary="s" * 201)
    assert_error(response, 422, "validation_error", "summary")
    operator = post(api, thread_id, body="x", summary="s" * 201)
    assert_error(operator, 422, "validation_error", "summary")
    assert len(stored_messages(api, thread_id)) == 1


@pytest.mark.parametrize("summary", ["two\nlines", "two\r\nlines"], ids=["lf", "crlf"])
def test_summary_with_line_break_is_rejected(api: Api, summary: str) -> None:
    alice, _, thread_id = pair(api)
    response = post(alice, thread_id, body="x", summary=summary)
    assert_error(response, 422, "validation_error", "summary")
    assert stored_messages(api, thread_id) == []


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_is_accepted(api: Api, kind: str) -> None:
    alice, bob, thread_id = pair(api)
    sent = alice.send(thread_id, "x", kind=kind)
    assert sent["message"]["kind"] == kind
    assert bob.inbox()["items"][0]["kind"] == kind


def test_kind_defaults_to_update(api: Api) -> None:
    alice, _, thread_id = pair(api)
    assert alice.send(thread_id, "x")["message"]["kind"] == "update"


@pytest.mark.parametrize("kind", ["urgent", "TASK", ""], ids=["unknown", "uppercase", "empty"])
def test_unknown_kind_is_rejected_naming_kind(api: Api, kind: str) -> None:
    alice, _, thread_id = pair(api)
    assert_error(post(alice, thread_id, body="x", kind=kind), 422, "validation_error", "kind")
    assert stored_messages(api, thread_id) == []


def test_reply_to_a_message_in_the_same_thread_is_accepted(api: Api) -> None:
    alice, bob, thread_id = pair(api)
    question = alice.send(thread_id, "Which branch?", kind="question")
    answer = bob.send(thread_id, "main", reply_to=question["message"]["id"])
    assert answer["message"]["reply_to"] == question["message"]["id"]
    read = alice.ok("GET", f"/messages/{answer['message']['id']}")
    assert read["message"]["reply_to"] == question["message"]["id"]


@pytest.mark.parametrize("where", ["other_thread", "made_up"])
def test_reply_to_outside_the_thread_is_rejected_naming_reply_to(api: Api, where: str) -> None:
    alice, _, thread_id = pair(api)
    other_thread = alice.open_thread("other", ["bob"])["id"]
    elsewhere = alice.send(other_thread, "over there")["message"]["id"]
    reply_to = elsewhere if where == "other_thread" else "msg_00000000000000000000000000"
    response = post(alice, thread_id, body="re", reply_to=reply_to)
    assert_error(response, 422, "validation_error", "reply_to")
    assert stored_messages(api, thread_id) == []


# --- what listings show --------------------------------------------------------------------


def test_inbox_cuts_long_summary_to_120_characters_with_ellipsis(api: Api) -> None:
    alice, bob, thread_id = pair(api)
    summary = "".join(chr(ord("a") + i % 26) for i in range(180))
    sent = alice.send(thread_id, "the body", summary=summary)
    item = bob.inbox()["items"][0]
    assert item["summary"] == summary[:119] + ELLIPSIS
    assert len(item["summary"]) == 120
    # Not an error, and the message itself keeps the whole summary.
    assert sent["message"]["summary"] == summary
    assert bob.ok("GET", f"/messages/{sent['message']['id']}")["message"]["summary"] == summary


def test_inbox_shows_summary_of_120_characters_uncut(api: Api) -> None:
    alice, bob, thread_id = pair(api)
    summary = "é" * 120
    alice.send(thread_id, "the body", summary=summary)
    assert bob.inbox()["items"][0]["summary"] == summary


def test_inbox_shows_first_line_of_body_when_no_summary(api: Api) -> None:
    alice, bob, thread_id = pair(api)
    alice.send(thread_id, "Deploy finished\nall green\nsee CI run 42")
    item = bob.inbox()["items"][0]
    assert item["summary"] == "Deploy finished"


def test_inbox_cuts_long_first_line_of_body_the_same_way(api: Api) -> None:
    alice, bob, thread_id = pair(api)
    first_line = "".join(chr(ord("A") + i % 26) for i in range(150))
    alice.send(thread_id, first_line + "\nsecond line")
    item = bob.inbox()["items"][0]
    assert item["summary"] == first_line[:119] + ELLIPSIS
    assert len(item["summary"]) == 120


def test_operator_inbox_cuts_summary_the_same_way(api: Api) -> None:
    alice, _, thread_id = pair(api)
    api.send(thread_id, "joining")
    alice.send(thread_id, "body", summary="z" * 150)
    item = api.ok("GET", "/operator/inbox")["items"][0]
    assert item["summary"] == "z" * 119 + ELLIPSIS


# --- idempotency keys ----------------------------------------------------------------------


def test_repeat_with_same_key_and_content_returns_original_as_duplicate(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    api.agent("carol")
    thread_id = alice.open_thread("t", ["bob", "carol"])["id"]
    fields = {"body": "deploy v2", "summary": "Deploy", "kind": "task"}
    first = post(alice, thread_id, "deploy-v2-1", **fields)
    assert first.status_code == 201, first.text
    assert first.json()["duplicate"] is False
    assert len(stored_deliveries(api, thread_id)) == 2

    again = post(alice, thread_id, "deploy-v2-1", **fields)
    assert again.status_code == 200, again.text
    original, repeat = first.json(), again.json()
    assert repeat["duplicate"] is True
    assert repeat["message"] == original["message"]
    assert {d["id"] for d in repeat["deliveries"]} == {d["id"] for d in original["deliveries"]}
    assert len(stored_deliveries(api, thread_id)) == 2
    assert len(stored_messages(api, thread_id)) == 1


def test_same_key_with_different_content_is_refused(api: Api) -> None:
    alice, _, thread_id = pair(api)
    first = alice.send(thread_id, "one", headers={"Idempotency-Key": "k-1"})
    for fields in (
        {"body": "two"},
        {"body": "one", "kind": "task"},
        {"body": "one", "summary": "s"},
    ):
        response = post(alice, thread_id, "k-1", **fields)
        assert_error(response, 409, "idempotency_key_reused")
    other_thread = alice.open_thread("other", ["bob"])["id"]
    assert_error(post(alice, other_thread, "k-1", body="one"), 409, "idempotency_key_reused")
    assert [m["id"] for m in stored_messages(api, thread_id)] == [first["message"]["id"]]
    assert stored_messages(api, other_thread) == []
    assert len(stored_deliveries(api, thread_id)) == 1


def test_idempotency_key_is_scoped_to_the_sender(api: Api) -> None:
    alice, bob, thread_id = pair(api)
    mine = post(alice, thread_id, "shared-key", body="same words")
    theirs = post(bob, thread_id, "shared-key", body="same words")
    assert mine.status_code == 201, mine.text
    assert theirs.status_code == 201, theirs.text
    assert theirs.json()["duplicate"] is False
    assert theirs.json()["message"]["id"] != mine.json()["message"]["id"]
    assert theirs.json()["deliveries"][0]["recipient"] == "alice"
    assert len(stored_messages(api, thread_id)) == 2


def test_rejected_send_does_not_use_its_key_up(api: Api) -> None:
    alice, _, thread_id = pair(api)
    assert_error(post(alice, thread_id, "retry-me", body="b" * 201), 422, "summary_required")
    assert_error(post(alice, thread_id, "retry-me", body="x", kind="nope"), 422, "validation_error")
    fixed = post(alice, thread_id, "retry-me", body="b" * 201, summary="now with a summary")
    assert fixed.status_code == 201, fixed.text
    assert fixed.json()["duplicate"] is False
    assert len(stored_messages(api, thread_id)) == 1


def test_send_rejected_for_no_recipients_does_not_use_its_key_up(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    api.agent("carl")
    thread_id = alice.open_thread("alone", ["carl"])["id"]
    api.ok("POST", "/agents/carl/archive")
    assert_error(post(alice, thread_id, "first-try", body="hi"), 409, "no_recipients")
    alice.ok("POST", f"/threads/{thread_id}/participants", json={"username": "bob"})
    retried = post(alice, thread_id, "first-try", body="hi")
    assert retried.status_code == 201, retried.text
    assert retried.json()["duplicate"] is False
    assert [d["recipient"] for d in retried.json()["deliveries"]] == ["bob"]


def test_idempotency_key_of_128_visible_characters_is_accepted(api: Api) -> None:
    alice, _, thread_id = pair(api)
    key = "!" + "k" * 126 + "~"
    assert post(alice, thread_id, key, body="x").status_code == 201
    repeat = post(alice, thread_id, key, body="x")
    assert repeat.status_code == 200 and repeat.json()["duplicate"] is True


@pytest.mark.parametrize("key", ["k" * 129, "has space", ""], ids=["129", "space", "empty"])
def test_bad_idempotency_key_is_rejected(api: Api, key: str) -> None:
    alice, _, thread_id = pair(api)
    response = post(alice, thread_id, key, body="x")
    assert_error(response, 422, "validation_error", "idempotency_key")
    assert stored_messages(api, thread_id) == []


def test_racing_sends_with_same_key_store_exactly_one_message(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    api.agent("carol")
    thread_id = alice.open_thread("race", ["bob", "carol"])["id"]
    racers = 16
    start = threading.Barrier(racers)
    url = f"{api.base_url}/v1/threads/{thread_id}/messages"
    headers = {"Authorization": f"Bearer {alice.token}", "Idempotency-Key": "race-1"}

    def send_once(_: int) -> httpx.Response:
        start.wait(timeout=10)
        return httpx.post(
            url, json={"body": "only once", "kind": "task"}, headers=headers, timeout=60
        )

    with ThreadPoolExecutor(max_workers=racers) as pool:
        responses = list(pool.map(send_once, range(racers)))

    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * 15 + [201], [r.text for r in responses if r.status_code >= 300]
    answers = [r.json() for r in responses]
    assert len({a["message"]["id"] for a in answers}) == 1
    assert sorted(a["duplicate"] for a in answers) == [False] + [True] * 15
    assert len(stored_messages(api, thread_id)) == 1
    stored = stored_deliveries(api, thread_id)
    assert sorted(d["recipient"] for d in stored) == ["bob", "carol"]
    delivery_ids = {d["id"] for d in stored}
    for answer in answers:
        assert {d["id"] for d in answer["deliveries"]} == delivery_ids


# --- history -------------------------------------------------------------------------------


def test_history_is_oldest_first_with_full_bodies(api: Api) -> None:
    alice, bob, thread_id = pair(api)
    long_body = "line one\n" + "x" * 300
    first = alice.send(thread_id, long_body, summary="long")
    second = bob.send(thread_id, "reply", reply_to=first["message"]["id"])
    third = api.send(thread_id, "operator chimes in")
    page = history(bob, thread_id)
    assert [m["id"] for m in page["items"]] == [
        first["message"]["id"],
        second["message"]["id"],
        third["message"]["id"],
    ]
    assert page["items"][0]["body"] == long_body
    assert page["items"][0]["summary"] == "long"
    assert page["items"][1]["reply_to"] == first["message"]["id"]
    assert [m["sender"] for m in page["items"]] == ["alice", "bob", "operator"]
    assert set(page["items"][0]) >= MESSAGE_FIELDS
    assert page["next_cursor"] is None


def test_history_stamps_the_callers_deliveries_fetched(api: Api) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    api.agent("carol")
    thread_id = alice.open_thread("t", ["bob", "carol"])["id"]
    sent = alice.send(thread_id, "read me")
    receipts = {d["recipient"]: d["id"] for d in sent["deliveries"]}
    assert api.delivery(receipts["bob"])["fetched_at"] is None

    history(bob, thread_id)
    bob_receipt = api.delivery(receipts["bob"])
    assert bob_receipt["fetched_at"] is not None
    assert bob_receipt["delivered_at"] is not None
    assert bob_receipt["state"] == "fetched"
    # Only the caller's own deliveries: carol's copy is untouched, and so is the sender's view.
    carol_receipt = api.delivery(receipts["carol"])
    assert carol_receipt["fetched_at"] is None
    assert carol_receipt["state"] == "accepted"
    history(alice, thread_id)
    assert api.delivery(receipts["carol"])["fetched_at"] is None


def test_history_invalid_or_oversized_limit_falls_back_to_50(api: Api) -> None:
    alice, bob, thread_id = pair(api)
    ids = [alice.send(thread_id, f"m{i}")["message"]["id"] for i in range(55)]
    for limit in ("0", "abc", "999", "-3"):
        page = history(bob, thread_id, limit=limit)
        assert [m["id"] for m in page["items"]] == ids[:50], limit
        assert page["next_cursor"] is not None, limit
    assert [m["id"] for m in history(bob, thread_id)["items"]] == ids[:50]
    assert len(history(bob, thread_id, limit=10)["items"]) == 10
    everything = history(bob, thread_id, limit=200)
    assert [m["id"] for m in everything["items"]] == ids
    assert everything["next_cursor"] is None


def test_history_cursor_walks_every_message_exactly_once(api: Api) -> None:
    alice, bob, thread_id = pair(api)
    ids = [alice.send(thread_id, f"m{i}")["message"]["id"] for i in range(7)]
    seen: list[str] = []
    sizes: list[int] = []
    cursor: str | None = None
    for _ in range(10):
        params: dict[str, Any] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        page = history(bob, thread_id, **params)
        seen += [m["id"] for m in page["items"]]
        sizes.append(len(page["items"]))
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ids
    assert sizes == [3, 3, 1]


def test_history_since_a_message_id(api: Api) -> None:
    alice, bob, thread_id = pair(api)
    ids = [alice.send(thread_id, f"m{i}")["message"]["id"] for i in range(5)]
    page = history(bob, thread_id, since=ids[1])
    assert [m["id"] for m in page["items"]] == ids[2:]
    assert history(bob, thread_id, since=ids[-1])["items"] == []


def test_history_since_an_id_of_no_message_of_the_thread_is_refused(api: Api) -> None:
    """A mistyped id, or one of another thread, would read as "nothing new": it is a 422 naming
    since (the same answer either way: it tells nothing of other threads)."""
    alice, bob, thread_id = pair(api)
    alice.send(thread_id, "here")
    elsewhere = alice.open_thread("Elsewhere", ["bob"])["id"]
    other = alice.send(elsewhere, "there")["message"]["id"]
    for since in ("msg_nope", other):
        response = bob.get(f"/threads/{thread_id}/messages", params={"since": since})
        error = assert_error(response, 422, "validation_error", "since")
        assert thread_id in error["message"], error
    assert bob.inbox()["items"][0]["state"] == "delivered"  # nothing was fetched by a refusal


def test_history_since_an_rfc3339_time(api: Api) -> None:
    alice, bob, thread_id = pair(api)
    sent = [alice.send(thread_id, f"m{i}")["message"] for i in range(4)]
    ids = [m["id"] for m in sent]
    stamp = sent[1]["created_at"]
    assert stamp.endswith("Z")
    assert [m["id"] for m in history(bob, thread_id, since=stamp)["items"]] == ids[2:]
    # The same instant written with another offset means the same thing.
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    shifted = moment.astimezone(timezone(timedelta(hours=2))).isoformat()
    assert [m["id"] for m in history(bob, thread_id, since=shifted)["items"]] == ids[2:]
    early = (moment - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    assert [m["id"] for m in history(bob, thread_id, since=early)["items"]] == ids


@pytest.mark.parametrize(
    "since",
    ["yesterday", "2026-13-45T00:00:00Z", "2026-01-01T00:00:00"],
    ids=["word", "bad", "naive"],
)
def test_history_bad_since_is_rejected_naming_since(api: Api, since: str) -> None:
    alice, bob, thread_id = pair(api)
    alice.send(thread_id, "x")
    response = bob.get(f"/threads/{thread_id}/messages", params={"since": since})
    assert_error(response, 422, "validation_error", "since")


def test_history_for_non_participant_is_not_found(api: Api) -> None:
    alice, _, thread_id = pair(api)
    carol = api.agent("carol")
    sent = alice.send(thread_id, "private")
    response = carol.get(f"/threads/{thread_id}/messages")
    assert_error(response, 404, "not_found")
    assert "private" not in response.text
    assert_error(carol.get(f"/messages/{sent['message']['id']}"), 404, "not_found")
    assert api.delivery(sent["deliveries"][0]["id"])["fetched_at"] is None
