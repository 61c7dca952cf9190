"""Opening threads and sending in Inbots 1.1 over HTTP: priority, task references and finding
threads by them or by their words, direct send (``POST /v1/messages``), broadcast (``"*"``), and
threads that would have nobody else in them refused at once. From agents-and-governance.md §1."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import standardwebhooks

from tests.helpers import Api, Caller, error_message
from tests.receivers import FAST, always, receiver


def direct(caller: Caller, key: str | None = None, **fields: Any) -> Any:
    headers = {"Idempotency-Key": key} if key else {}
    return caller.post("/messages", json=fields, headers=headers)


def thread_ids(caller: Caller, **params: Any) -> list[str]:
    return [t["id"] for t in caller.ok("GET", "/threads", params=params)["items"]]


# --- priority --------------------------------------------------------------------------------


def test_priority_defaults_to_normal_and_shows_in_history_and_reads(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    thread = alice.open_thread("Pager", ["bob"])["id"]
    plain = alice.send(thread, "fyi")
    loud = alice.send(thread, "the site is down", priority="urgent")
    assert (plain["message"]["priority"], loud["message"]["priority"]) == ("normal", "urgent")
    history = bob.ok("GET", f"/threads/{thread}/messages")["items"]
    assert [m["priority"] for m in history] == ["normal", "urgent"]
    read = bob.ok("GET", f"/messages/{loud['message']['id']}")
    assert read["message"]["priority"] == "urgent"
    detail = api.ok("GET", f"/threads/{thread}")
    assert [m["priority"] for m in detail["messages"]] == ["normal", "urgent"]


def test_a_bad_priority_is_refused(api: Api) -> None:
    alice, _ = api.agent("alice"), api.agent("bob")
    thread = alice.open_thread("Pager", ["bob"])["id"]
    response = alice.post(f"/threads/{thread}/messages", json={"body": "x", "priority": "high"})
    assert "urgent" in error_message(response, 422, "validation_error", "priority")


def test_the_same_key_with_another_priority_is_a_different_message(api: Api) -> None:
    alice, _ = api.agent("alice"), api.agent("bob")
    thread = alice.open_thread("Keys", ["bob"])["id"]
    headers = {"Idempotency-Key": "k-1"}
    alice.send(thread, "same words", headers=headers)
    again = alice.post(f"/threads/{thread}/messages", json={"body": "same words"}, headers=headers)
    assert again.status_code == 200 and again.json()["duplicate"] is True
    louder = alice.post(
        f"/threads/{thread}/messages",
        json={"body": "same words", "priority": "urgent"},
        headers=headers,
    )
    error_message(louder, 409, "idempotency_key_reused", "idempotency_key")


@pytest.mark.parametrize("settings_overrides", [dict(FAST)])
def test_notifications_carry_priority_and_thread_ref(api: Api) -> None:
    with receiver(always(204)) as hook:
        created = api.ok("POST", "/agents", 201, json={"name": "pusher", "webhook_url": hook.url})
        secret = created["webhook"]["signing_secret"]
        sender = api.agent("sender")
        sent = direct(sender, to=["pusher"], body="Wake up", ref="OPS-7", priority="urgent")
        assert sent.status_code == 201, sent.text
        (request,) = hook.wait_for(1)
    payload = standardwebhooks.Webhook(secret).verify(request.body, request.headers)
    assert payload["priority"] == "urgent" and payload["thread_ref"] == "OPS-7"
    assert payload["thread_id"] == sent.json()["message"]["thread_id"]
    assert "body" not in payload


# --- task references and finding threads -----------------------------------------------------


def test_a_thread_carries_its_ref_and_is_found_by_it(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    ticket = alice.open_thread("Fix the login", ["bob"], ref="JIRA-1234")
    other = alice.open_thread("Something else", ["bob"], ref="JIRA-99")
    alice.open_thread("No ref", ["bob"])
    assert ticket["ref"] == "JIRA-1234"
    assert bob.ok("GET", f"/threads/{ticket['id']}")["ref"] == "JIRA-1234"
    assert thread_ids(bob, ref="JIRA-1234") == [ticket["id"]]
    assert thread_ids(alice, ref="JIRA-99") == [other["id"]]
    assert thread_ids(bob, ref="JIRA-12") == []
    assert thread_ids(api, ref="JIRA-1234") == [ticket["id"]]  # the operator too
    outsider = api.agent("outsider")
    assert thread_ids(outsider, ref="JIRA-1234") == []

    alice.send(ticket["id"], "please look")
    (item,) = bob.inbox()["items"]
    assert item["thread_ref"] == "JIRA-1234"


@pytest.mark.parametrize(
    "ref",
    ["", "   ", "r" * 129, "two\nlines", "tab\there", "next\u0085line", "zero\u200bwidth"],
    ids=repr,
)
def test_a_bad_ref_is_refused(api: Api, ref: str) -> None:
    alice, _ = api.agent("alice"), api.agent("bob")
    response = alice.post("/threads", json={"title": "t", "participants": ["bob"], "ref": ref})
    assert "ref must be 1 to 128 printable" in error_message(
        response, 422, "validation_error", "ref"
    )


def test_a_ref_of_128_printable_characters_is_kept(api: Api) -> None:
    alice, _ = api.agent("alice"), api.agent("bob")
    ref = "Ticket #12 – ünïcode ok " + "x" * 104
    assert len(ref) == 128
    assert alice.open_thread("t", ["bob"], ref=ref)["ref"] == ref


def test_query_matches_titles_and_goals_in_any_case_and_literally(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    schema = alice.open_thread("Review the Schema migration", ["bob"])
    goal = alice.open_thread("Cleanup", ["bob"], goal="Drop the old SCHEMA tables")
    percent = alice.open_thread("Raise coverage to 100% now", ["bob"])
    underscore = alice.open_thread("Rename user_id", ["bob"])
    alice.open_thread("Unrelated", ["bob"])

    assert set(thread_ids(bob, query="schema")) == {schema["id"], goal["id"]}
    assert thread_ids(bob, query="100%") == [percent["id"]]
    assert thread_ids(bob, query="%") == [percent["id"]]  # never a wildcard
    assert thread_ids(bob, query="user_id") == [underscore["id"]]
    assert thread_ids(bob, query="_") == [underscore["id"]]
    assert thread_ids(bob, query="r_n") == []
    assert thread_ids(bob, query="/") == []
    assert thread_ids(bob, query="'; drop table threads; --") == []
    assert len(thread_ids(bob, query="  ")) == 5  # blank: no filter


# --- a thread needs someone else -------------------------------------------------------------


def test_opening_a_thread_with_nobody_else_is_refused_at_once(api: Api) -> None:
    alice = api.agent("alice")
    for participants in ([], ["alice"]):
        response = alice.post("/threads", json={"title": "Alone", "participants": participants})
        message = error_message(response, 422, "validation_error", "participants")
        assert "GET /v1/directory" in message and '"*"' in message
        assert "list_agents" not in message  # a tool's name is MCP's way, not HTTP's
    response = api.post("/threads", json={"title": "Alone", "participants": []})
    error_message(response, 422, "validation_error", "participants")
    assert alice.ok("GET", "/threads")["items"] == []


def test_unknown_participants_are_named_with_the_call_that_lists_them(api: Api) -> None:
    alice = api.agent("alice")
    response = alice.post("/threads", json={"title": "t", "participants": ["ghost"]})
    message = error_message(response, 422, "validation_error", "participants")
    assert "ghost" in message and "GET /v1/directory" in message and "list_agents" not in message


# --- broadcast -------------------------------------------------------------------------------


def test_star_opens_a_thread_with_every_agent_that_is_not_archived(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    api.agent("carol")
    api.agent("gone")
    api.ok("POST", "/agents/gone/archive")
    thread = alice.open_thread("All hands", ["*"])
    assert sorted(thread["participants"]) == ["alice", "bob", "carol"]
    sent = alice.send(thread["id"], "standup in 5")
    assert sorted(d["recipient"] for d in sent["deliveries"]) == ["bob", "carol"]
    api.agent("later")  # "*" is resolved when the thread is opened
    assert "later" not in api.ok("GET", f"/threads/{thread['id']}")["participants"]


def test_star_with_the_operator_named_includes_the_operator(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("All hands and the boss", ["*", "operator"])
    assert sorted(thread["participants"]) == ["alice", "bob", "operator"]


def test_star_with_nobody_else_is_409_no_recipients(api: Api) -> None:
    lonely = api.agent("lonely")
    response = lonely.post("/threads", json={"title": "Anyone?", "participants": ["*"]})
    assert "operator" in error_message(response, 409, "no_recipients", None)
    response = direct(lonely, to=["*"], body="anyone?")
    error_message(response, 409, "no_recipients", None)
    assert lonely.ok("GET", "/threads")["items"] == []


def test_the_operator_broadcasts_to_every_agent(api: Api) -> None:
    api.agent("bob")
    api.agent("carol")
    sent = direct(api, to=["*"], body="Maintenance tonight", title="Maintenance")
    assert sent.status_code == 201, sent.text
    assert sorted(d["recipient"] for d in sent.json()["deliveries"]) == ["bob", "carol"]


def test_broadcast_stays_inside_its_workspace(api: Api, other_api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    stranger = other_api.agent("stranger")
    sent = direct(alice, to=["*"], body="hello everyone").json()
    assert [d["recipient"] for d in sent["deliveries"]] == ["bob"]
    assert stranger.inbox()["waiting"] == 0


# --- direct send -----------------------------------------------------------------------------


def test_direct_send_opens_a_thread_and_posts_its_first_message(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    api.agent("carol")
    response = direct(
        alice,
        to=["bob", "carol"],
        body="Please review PR 12",
        summary="Review PR 12",
        kind="task",
        ref="PR-12",
        priority="urgent",
    )
    assert response.status_code == 201, response.text
    sent = response.json()
    assert (
        set(sent) == {"message", "deliveries", "duplicate", "held"} and sent["duplicate"] is False
    )
    assert sent["held"] is False
    message = sent["message"]
    assert (message["kind"], message["priority"], message["summary"]) == (
        "task",
        "urgent",
        "Review PR 12",
    )
    assert [d["recipient"] for d in sent["deliveries"]] == ["bob", "carol"]
    thread = alice.ok("GET", f"/threads/{message['thread_id']}")
    assert thread["title"] == "Review PR 12" and thread["ref"] == "PR-12"
    assert thread["opened_by"] == "alice" and thread["status"] == "open"
    assert sorted(thread["participants"]) == ["alice", "bob", "carol"]
    (item,) = bob.inbox()["items"]
    assert (item["thread_id"], item["thread_ref"], item["priority"]) == (
        message["thread_id"],
        "PR-12",
        "urgent",
    )


def test_direct_send_title_defaults_to_the_first_line_cut_to_200(api: Api) -> None:
    alice, _ = api.agent("alice"), api.agent("bob")
    sent = direct(alice, to=["bob"], body="\n  Deploy is blocked  \nmore detail").json()
    title = alice.ok("GET", f"/threads/{sent['message']['thread_id']}")["title"]
    assert title == "Deploy is blocked"
    long = direct(alice, to=["bob"], body="w" * 300, summary=None)
    error_message(long, 422, "summary_required", "summary")
    first_line = "v" * 250
    sent = direct(api, to=["bob"], body=first_line).json()  # the operator needs no summary
    title = api.ok("GET", f"/threads/{sent['message']['thread_id']}")["title"]
    assert len(title) == 200 and title.endswith("…")
    titled = direct(alice, to=["bob"], body="x", title="  Explicit  ").json()
    assert alice.ok("GET", f"/threads/{titled['message']['thread_id']}")["title"] == "Explicit"


def test_direct_send_refusals_open_nothing(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    api.agent("gone")
    api.ok("POST", "/agents/gone/archive")
    cases = [
        ({"to": [], "body": "x"}, 422, "validation_error", "to"),
        ({"to": ["alice"], "body": "x"}, 422, "validation_error", "to"),
        ({"to": ["ghost"], "body": "x"}, 422, "validation_error", "to"),
        ({"to": ["gone"], "body": "x"}, 422, "validation_error", "to"),
        ({"to": ["bob"], "body": ""}, 422, "validation_error", "body"),
        ({"to": ["bob"], "body": "x", "title": "t" * 201}, 422, "validation_error", "title"),
        ({"to": ["bob"], "body": "x", "ref": "a\nb"}, 422, "validation_error", "ref"),
        ({"to": ["bob"], "body": "x", "kind": "shout"}, 422, "validation_error", "kind"),
        ({"to": ["bob"], "body": "x", "priority": "p1"}, 422, "validation_error", "priority"),
        ({"to": ["bob"], "body": "x", "reply_to": "msg_1"}, 422, "validation_error", "reply_to"),
        ({"to": "bob", "body": "x"}, 422, "validation_error", "to"),
        ({"body": "x"}, 422, "validation_error", "to"),
    ]
    for fields, status, code, field in cases:
        error_message(direct(alice, **fields), status, code, field)
    assert alice.ok("GET", "/threads")["items"] == []


def test_direct_send_repeats_with_its_idempotency_key_open_one_thread(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    first = direct(alice, "hello-bob", to=["bob"], body="hello", ref="T-1")
    assert first.status_code == 201, first.text
    again = direct(alice, "hello-bob", to=["bob"], body="hello", ref="T-1")
    assert again.status_code == 200, again.text
    assert again.json()["duplicate"] is True
    assert again.json()["message"] == first.json()["message"]
    assert again.json()["deliveries"] == [
        {**d, "state": "accepted"} for d in first.json()["deliveries"]
    ]
    other = direct(alice, "hello-bob", to=["bob"], body="something else")
    error_message(other, 409, "idempotency_key_reused", "idempotency_key")
    thread = first.json()["message"]["thread_id"]
    as_post = alice.post(
        f"/threads/{thread}/messages",
        json={"body": "hello"},
        headers={"Idempotency-Key": "hello-bob"},
    )
    error_message(as_post, 409, "idempotency_key_reused", "idempotency_key")
    assert thread_ids(alice) == [thread] and bob.inbox()["waiting"] == 1
    bad = direct(alice, "a b", to=["bob"], body="hello")
    error_message(bad, 422, "validation_error", "idempotency_key")


def test_racing_direct_sends_with_one_key_open_exactly_one_thread(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")

    def send(_: int) -> Any:
        return direct(alice, "race-1", to=["bob"], body="only once")

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(send, range(8)))
    assert sorted(a.status_code for a in answers) == [200] * 7 + [201], [a.text for a in answers]
    assert len({a.json()["message"]["id"] for a in answers}) == 1
    assert len(thread_ids(alice)) == 1
    assert bob.inbox()["waiting"] == 1


# --- one thread per task: a send with to and ref goes on in the open thread of the same people


def test_a_send_with_to_and_ref_goes_on_in_the_open_thread_of_the_same_people(api: Api) -> None:
    """Issue 25: every send with to opened a thread, so a task's threads piled up."""
    alice, bob = api.agent("alice"), api.agent("bob")
    first = alice.ok("POST", "/messages", 201, json={"to": ["bob"], "body": "step 1", "ref": "T-7"})
    assert "reused_thread" not in first  # it opened the thread: the answer is as before
    thread = first["message"]["thread_id"]
    again = alice.ok("POST", "/messages", 201, json={"to": ["bob"], "body": "step 2", "ref": "T-7"})
    assert again["reused_thread"] is True
    assert again["message"]["thread_id"] == thread
    assert [d["recipient"] for d in again["deliveries"]] == ["bob"]
    # The other way round too: the same two people, the same ref.
    answer = bob.ok("POST", "/messages", 201, json={"to": ["alice"], "body": "done", "ref": "T-7"})
    assert (answer["message"]["thread_id"], answer["reused_thread"]) == (thread, True)
    history = alice.ok("GET", f"/threads/{thread}/messages")["items"]
    assert [m["body"] for m in history] == ["step 1", "step 2", "done"]
    assert thread_ids(alice) == [thread] and bob.inbox()["waiting"] == 2


def test_a_send_opens_a_new_thread_unless_ref_and_people_match_an_open_one(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    api.agent("carol")
    opened = direct(alice, to=["bob"], body="start", ref="T-8").json()["message"]["thread_id"]
    news = [
        direct(alice, to=["bob"], body="no ref"),  # without a ref: a new thread, as before
        direct(alice, to=["bob"], body="other task", ref="T-9"),
        direct(alice, to=["bob", "carol"], body="one more person", ref="T-8"),
        direct(bob, to=["carol"], body="other people", ref="T-8"),
    ]
    for response in news:
        assert response.status_code == 201, response.text
        assert "reused_thread" not in response.json()
        assert response.json()["message"]["thread_id"] != opened
    # A participant added later makes it another set of people.
    alice.ok("POST", f"/threads/{opened}/participants", json={"username": "carol"})
    later = direct(alice, to=["bob"], body="after carol joined", ref="T-8").json()
    assert "reused_thread" not in later and later["message"]["thread_id"] != opened
    # A closed thread takes no mail: the next send opens another.
    alone = later["message"]["thread_id"]
    api.ok("POST", f"/threads/{alone}/close")
    after_close = direct(alice, to=["bob"], body="after the close", ref="T-8").json()
    assert "reused_thread" not in after_close and after_close["message"]["thread_id"] != alone
