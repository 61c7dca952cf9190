"""The approval gate (agents-and-governance.md §3): a workspace policy holds matching messages;
held mail is invisible to its recipients (inbox, long-poll, history, reads, search, MCP) and not
notified until the operator approves it; a rejection never reaches them and is told to the
sender (its receipts read ``rejected``, and a ``message.rejected`` event). Both backends."""

from __future__ import annotations

import time
from typing import Any

import pytest
import standardwebhooks

from inbots.client import Client, Conflict, NotFound
from inbots.config import Settings
from inbots.db.engine import Database
from inbots.deliveries.renotify import sweep
from inbots.dispatch.jobs import Job
from inbots.kit.clock import utcnow
from tests.helpers import Api, Caller, assert_error, metric_samples, sample
from tests.mcp_client import over_http, run
from tests.receivers import FAST, always, receiver
from tests.test_cli import assert_one_line_error
from tests.test_cli import inbots as cli_run
from tests.test_cli import ok as cli_ok

HOLD_TASKS = {"approval": {"kinds": ["task"], "priorities": [], "senders": []}}


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return dict(FAST)


def held_send(api: Api, body: str = "Deploy to production") -> tuple[Caller, Caller, str, dict]:
    """Alice sends bob a task under a policy holding tasks: (alice, bob, thread, send answer)."""
    api.ok("PUT", "/policy", json=HOLD_TASKS)
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("Release", ["bob"])["id"]
    sent = alice.send(thread, body, kind="task", summary="Deploy it")
    return alice, bob, thread, sent


def receipt_states(alice: Caller, message_id: str) -> list[tuple[str, str]]:
    read = alice.ok("GET", f"/messages/{message_id}")
    return [(r["recipient"], r["state"]) for r in read["receipts"]]


def test_held_mail_moves_its_thread_only_when_approved(api: Api) -> None:
    """A held message is no activity its recipient may see (the thread's ``last_activity_at``
    stays put); approved, it is, and the thread moves to the approval's time."""
    api.ok("PUT", "/policy", json=HOLD_TASKS)
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("Release", ["bob"])["id"]
    before = bob.ok("GET", f"/threads/{thread}")["last_activity_at"]
    time.sleep(0.01)
    sent = alice.send(thread, "Deploy to production", kind="task")
    assert sent["held"] is True
    assert bob.ok("GET", f"/threads/{thread}")["last_activity_at"] == before
    decided = api.ok("POST", f"/approvals/{sent['message']['id']}/approve")
    after = bob.ok("GET", f"/threads/{thread}")["last_activity_at"]
    assert after > before and after == decided["approved_at"]


def test_the_senders_receipts_carry_the_gates_stamps(api: Api) -> None:
    """A held message's receipts say ``held`` with ``held_at``; approved, they carry
    ``approved_at`` too (the time the decision gave); a message never held has neither field."""
    alice, _bob, thread, sent = held_send(api)
    message_id = sent["message"]["id"]
    (receipt,) = alice.ok("GET", f"/messages/{message_id}")["receipts"]
    assert receipt["state"] == "held" and receipt["held_at"].endswith("Z")
    assert "approved_at" not in receipt and "rejected_at" not in receipt
    decided = api.ok("POST", f"/approvals/{message_id}/approve")
    (item,) = alice.ok("GET", "/outbox", params={"thread": thread})["items"]
    (receipt,) = item["receipts"]
    assert receipt["approved_at"] == decided["approved_at"]
    assert receipt["held_at"] <= receipt["approved_at"]
    plain = alice.send(thread, "Just a note")  # a note, not a task: never held
    (receipt,) = alice.ok("GET", f"/messages/{plain['message']['id']}")["receipts"]
    assert not {"held_at", "approved_at", "rejected_at"} & receipt.keys()


# The policy.


def test_the_policy_is_empty_by_default_and_replaced_whole(api: Api) -> None:
    empty = api.ok("GET", "/policy")
    assert empty["approval"] == {"kinds": [], "priorities": [], "senders": []}
    api.agent("intern")
    put = api.ok(
        "PUT",
        "/policy",
        json={
            "approval": {
                "kinds": ["decision", "task", "task"],
                "priorities": ["urgent"],
                "senders": ["intern"],
            }
        },
    )
    assert put["approval"] == {
        "kinds": ["task", "decision"],
        "priorities": ["urgent"],
        "senders": ["intern"],
    }
    assert put["updated_at"].endswith("Z")
    assert api.ok("GET", "/policy") == put
    cleared = api.ok("PUT", "/policy", json={"approval": {}})
    assert cleared["approval"] == {"kinds": [], "priorities": [], "senders": []}


def test_the_policy_is_the_operators_alone(api: Api) -> None:
    agent = api.agent("sneaky")
    assert_error(agent.get("/policy"), 403, "forbidden")
    assert_error(agent.call("PUT", "/policy", json=HOLD_TASKS), 403, "forbidden")
    assert_error(agent.get("/approvals"), 403, "forbidden")
    assert_error(agent.post("/approvals/msg_x/approve"), 403, "forbidden")
    assert_error(agent.post("/approvals/msg_x/reject", json={}), 403, "forbidden")
    assert api.ok("GET", "/policy")["approval"]["kinds"] == []


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ({"approval": {"kinds": ["chore"]}}, 422, "validation_error", "approval.kinds"),
        ({"approval": {"priorities": ["low"]}}, 422, "validation_error", "approval.priorities"),
        ({"approval": {"senders": ["nobody"]}}, 422, "validation_error", "approval.senders"),
        ({"approval": {"senders": ["operator"]}}, 422, "validation_error", "approval.senders"),
        ({"approval": {"kind": ["task"]}}, 422, "unknown_field", None),
        ({"approvals": {}}, 422, "unknown_field", None),
        ({"approval": {"kinds": "task"}}, 422, "validation_error", None),
    ],
)
def test_a_bad_policy_is_refused_naming_the_field_and_changes_nothing(
    api: Api, body: dict[str, Any], status: int, code: str, field: str | None
) -> None:
    api.ok("PUT", "/policy", json=HOLD_TASKS)
    error = assert_error(api.call("PUT", "/policy", json=body), status, code)
    if field is not None:
        assert error["field"] == field, error
    assert api.ok("GET", "/policy")["approval"] == HOLD_TASKS["approval"]


def test_a_message_matching_any_list_is_held_and_others_flow(api: Api) -> None:
    intern = api.agent("intern")
    bob = api.agent("bob")
    api.ok(
        "PUT",
        "/policy",
        json={"approval": {"kinds": ["decision"], "priorities": ["urgent"], "senders": ["intern"]}},
    )
    lead = api.agent("lead")
    thread = lead.open_thread("Mixed", ["bob", "intern"])["id"]
    assert lead.send(thread, "a decision", kind="decision")["held"] is True
    assert lead.send(thread, "urgent", priority="urgent")["held"] is True
    assert intern.send(thread, "anything from the intern")["held"] is True
    plain = lead.send(thread, "a plain update")
    assert plain["held"] is False and plain["deliveries"][0]["state"] == "accepted"
    assert [i["message_id"] for i in bob.inbox()["items"]] == [plain["message"]["id"]]
    assert len(api.ok("GET", "/approvals")["items"]) == 3
    # The operator's own mail is never held.
    assert api.send(thread, "from the operator", kind="decision")["held"] is False


# Held mail is invisible to recipients.


def test_held_mail_is_invisible_to_its_recipients_everywhere(api: Api, server: Any) -> None:
    alice, bob, thread, sent = held_send(api, "Deploy the zebracorn build")
    message_id = sent["message"]["id"]
    delivery_id = sent["deliveries"][0]["id"]
    assert sent["held"] is True
    assert [d["state"] for d in sent["deliveries"]] == ["held"]
    # The inbox, its count, the long-poll, history, the read, search, the ack: nothing.
    inbox = bob.inbox(status="all")
    assert inbox["items"] == [] and inbox["waiting"] == 0
    waited = bob.ok("GET", "/inbox/wait", params={"timeout": "1"})
    assert waited["items"] == [] and waited["waiting"] == 0
    assert bob.ok("GET", f"/threads/{thread}/messages")["items"] == []
    for ident in (message_id, delivery_id):
        assert_error(bob.get(f"/messages/{ident}"), 404, "not_found")
    assert bob.ok("GET", "/search", params={"q": "zebracorn"})["items"] == []
    acked = bob.ok("POST", "/acks", json={"ids": [message_id, delivery_id]})
    assert acked["acknowledged"] == [] and sorted(acked["not_found"]) == sorted(
        [message_id, delivery_id]
    )
    assert_error(bob.post(f"/deliveries/{delivery_id}/working", json={}), 404, "not_found")
    agents = {a["username"]: a for a in api.ok("GET", "/agents")["items"]}
    assert agents["bob"]["unread"] == 0
    # Through MCP too.

    async def mcp_inbox() -> Any:
        async with over_http(server.url, bob.token) as tools:
            return await tools.ok("check_inbox")

    assert run(mcp_inbox)["items"] == []
    # The sender sees its message, held; the operator sees the delivery held.
    assert [m["id"] for m in alice.ok("GET", f"/threads/{thread}/messages")["items"]] == [
        message_id
    ]
    assert receipt_states(alice, message_id) == [("bob", "held")]
    outbox = alice.ok("GET", "/outbox", params={"state": "held"})["items"]
    assert [o["message"]["id"] for o in outbox] == [message_id]
    assert alice.ok("GET", "/search", params={"q": "zebracorn"})["items"][0]["message_id"] == (
        message_id
    )
    detail = api.delivery(delivery_id)
    assert detail["state"] == "held" and detail["held_at"]
    # Approved, it is bob's as any mail is.
    decided = api.ok("POST", f"/approvals/{message_id}/approve")
    assert decided["state"] == "approved" and decided["approved_at"].endswith("Z")
    assert decided["rejected_at"] is None and decided["message_id"] == message_id
    inbox = bob.inbox()
    assert [i["message_id"] for i in inbox["items"]] == [message_id] and inbox["waiting"] == 1
    assert bob.ok("GET", f"/messages/{message_id}")["message"]["body"].startswith("Deploy")
    assert bob.ok("GET", "/search", params={"q": "zebracorn"})["items"]
    assert api.ok("GET", "/approvals")["items"] == []
    assert receipt_states(alice, message_id) == [("bob", "fetched")]


def test_the_queue_lists_held_messages_oldest_first_with_what_to_decide_on(api: Api) -> None:
    """Each item gives what the operator decides on: the thread's title, goal and ref, the
    recipients' usernames and the whole body, beside the sender, kind, priority and summary."""
    api.ok("PUT", "/policy", json=HOLD_TASKS)
    alice = api.agent("alice")
    api.agent("bob")
    api.agent("carol")
    opened = alice.open_thread(
        "Release 4.2", ["bob", "carol"], goal="Shipped by Friday", ref="R-42"
    )
    thread = opened["id"]
    body = "Deploy to production\n\nthen run the smoke tests"
    first = alice.send(thread, body, kind="task", summary="Deploy it")
    second = alice.send(thread, "x" * 10, kind="task", summary="Second task")
    items = api.ok("GET", "/approvals")["items"]
    assert [i["message_id"] for i in items] == [first["message"]["id"], second["message"]["id"]]
    item = items[0]
    assert item == {
        "subject": "message",
        "id": first["message"]["id"],
        "message_id": first["message"]["id"],
        "thread_id": thread,
        "sender": "alice",
        "kind": "task",
        "priority": "normal",
        "summary": "Deploy it",
        "body": body,
        "thread_title": "Release 4.2",
        "thread_goal": "Shipped by Friday",
        "thread_ref": "R-42",
        "recipients": ["bob", "carol"],
        "brief": None,
        "held_at": item["held_at"],
    }
    assert item["held_at"].endswith("Z")


def test_a_waiting_long_poll_is_not_woken_by_held_mail_but_is_by_its_approval(
    api: Api,
) -> None:
    api.ok("PUT", "/policy", json=HOLD_TASKS)
    alice = api.agent("alice")
    bob = api.agent("bob")
    thread = alice.open_thread("Wake", ["bob"])["id"]
    sent = alice.send(thread, "held", kind="task")
    started = time.monotonic()
    waited = bob.ok("GET", "/inbox/wait", params={"timeout": "1"})
    assert waited["items"] == [] and time.monotonic() - started >= 0.9
    api.ok("POST", f"/approvals/{sent['message']['id']}/approve")
    waited = bob.ok("GET", "/inbox/wait", params={"timeout": "5"})
    assert [i["message_id"] for i in waited["items"]] == [sent["message"]["id"]]


# Webhooks.


def test_a_webhook_gets_nothing_while_held_and_the_notification_after_approval(
    api: Api,
) -> None:
    with receiver(always(200)) as hook:
        api.ok("PUT", "/policy", json=HOLD_TASKS)
        alice = api.agent("alice")
        bob = api.agent("bob")
        secret = bob.ok("PUT", "/me/webhook", json={"url": hook.url})["signing_secret"]
        thread = alice.open_thread("Hooked", ["bob"])["id"]
        sent = alice.send(thread, "held work", kind="task")
        plain = alice.send(thread, "plain update")
        (first,) = hook.wait_for(1)
        assert first.json()["message_id"] == plain["message"]["id"]
        time.sleep(1.0)
        assert len(hook.requests) == 1, "nothing is sent for held mail"
        delivery_id = sent["deliveries"][0]["id"]
        assert api.delivery(delivery_id)["publish_count"] == 0
        # A redeliver is refused: the sweep would otherwise republish it until it failed.
        error = assert_error(api.post(f"/deliveries/{delivery_id}/redeliver"), 409, "conflict")
        assert "approve" in error["message"]
        assert api.delivery(delivery_id)["publish_count"] == 0
        api.ok("POST", f"/approvals/{sent['message']['id']}/approve")
        second = hook.wait_for(2)[1]
    payload = standardwebhooks.Webhook(secret).verify(second.body, second.headers)
    assert payload["type"] == "message.created"
    assert payload["delivery_id"] == delivery_id
    assert payload["message_id"] == sent["message"]["id"]
    detail = api.delivery(delivery_id)
    assert detail["state"] == "notified" and detail["approved_at"]


def test_a_rejection_is_never_shown_and_the_sender_is_told(api: Api) -> None:
    with receiver(always(200)) as hook:
        api.ok("PUT", "/policy", json=HOLD_TASKS)
        alice = api.agent("alice")
        secret = alice.ok(
            "PUT", "/me/webhook", json={"url": hook.url, "webhook_events": ["message.rejected"]}
        )["signing_secret"]
        bob = api.agent("bob")
        bob_hook = bob.ok("PUT", "/me/webhook", json={"url": hook.url + "/bob"})
        assert bob_hook["webhook_events"] == ["message.created"]
        thread = alice.open_thread("Refused", ["bob"])["id"]
        sent = alice.send(thread, "rm -rf the archive", kind="task")
        message_id = sent["message"]["id"]
        decided = api.ok(
            "POST", f"/approvals/{message_id}/reject", json={"reason": "Too destructive"}
        )
        assert decided["state"] == "rejected" and decided["reason"] == "Too destructive"
        assert decided["approved_at"] is None and decided["rejected_at"].endswith("Z")
        (told,) = hook.wait_for(1)
        time.sleep(0.5)
        assert len(hook.requests) == 1, "bob's webhook never hears of it"
    payload = standardwebhooks.Webhook(secret).verify(told.body, told.headers)
    assert payload["type"] == "message.rejected"
    assert payload["message_id"] == message_id and payload["thread_id"] == thread
    assert (payload["sender"], payload["rejected_by"]) == ("alice", "operator")
    assert payload["reason"] == "Too destructive" and payload["event_id"].startswith("evt_")
    # Never visible to bob.
    assert bob.inbox(status="all")["items"] == []
    assert_error(bob.get(f"/messages/{message_id}"), 404, "not_found")
    assert bob.ok("GET", f"/threads/{thread}/messages")["items"] == []
    # The sender's outbox and receipt say rejected, with the reason.
    (item,) = alice.ok("GET", "/outbox", params={"state": "rejected"})["items"]
    (receipt,) = item["receipts"]
    assert receipt["state"] == "rejected" and receipt["rejection_reason"] == "Too destructive"
    assert receipt["rejected_at"].endswith("Z")
    events = api.ok("GET", "/events", params={"type": "message.rejected"})["items"]
    assert [(e["recipient"], e["actor"], e["message_id"], e["note"]) for e in events] == [
        ("alice", "operator", message_id, "Too destructive")
    ]
    assert api.ok("GET", "/approvals")["items"] == []
    # The operator cannot redeliver it either (bob's webhook receives message.created).
    delivery_id = sent["deliveries"][0]["id"]
    error = assert_error(api.post(f"/deliveries/{delivery_id}/redeliver"), 409, "conflict")
    assert "rejected" in error["message"]
    detail = api.delivery(delivery_id)
    assert detail["state"] == "rejected" and detail["publish_count"] == 0


def test_a_polling_sender_is_told_of_a_rejection_in_its_long_poll(api: Api) -> None:
    """A sender without a webhook learns of the rejection where it learns of acknowledgements:
    ``GET /v1/inbox/wait?events=receipts`` answers at once with a ``rejected`` receipt per
    recipient (the operator's reason with it), once; MCP ``wait_for_mail`` the same."""
    api.ok("PUT", "/policy", json=HOLD_TASKS)
    alice = api.agent("alice")
    api.agent("bob")
    api.agent("carol")
    thread = alice.open_thread("Two of them", ["bob", "carol"])["id"]
    sent = alice.send(thread, "Drop the tables", kind="task", summary="Drop")
    message_id = sent["message"]["id"]
    quiet = alice.ok("GET", "/inbox/wait", params={"timeout": "1", "events": "receipts"})
    assert quiet["receipts"] == []  # held: nothing to say yet
    api.ok("POST", f"/approvals/{message_id}/reject", json={"reason": "Not today"})

    started = time.monotonic()
    told = alice.ok("GET", "/inbox/wait", params={"timeout": "10", "events": "receipts"})
    # At once, not at the 10 s timeout (a loaded CI machine has taken over 2 s for a request).
    assert time.monotonic() - started < 5.0, "a rejection waiting ends the wait at once"
    receipts = told["receipts"]
    assert sorted(r["recipient"] for r in receipts) == ["bob", "carol"]
    assert {r["delivery_id"] for r in receipts} == {d["id"] for d in sent["deliveries"]}
    for receipt in receipts:
        assert receipt["message_id"] == message_id and receipt["thread_id"] == thread
        assert receipt["state"] == "rejected" and receipt["rejection_reason"] == "Not today"
        assert receipt["rejected_at"].endswith("Z")
    assert len({r["event_id"] for r in receipts}) == 1  # one event for the message
    again = alice.ok("GET", "/inbox/wait", params={"timeout": "1", "events": "receipts"})
    assert again["receipts"] == []  # shown once

    second = alice.send(thread, "Drop the views", kind="task", summary="Views")["message"]["id"]
    api.ok("POST", f"/approvals/{second}/reject")

    async def over_mcp() -> dict[str, Any]:
        async with over_http(api.base_url, alice.token) as tools:
            result: dict[str, Any] = await tools.ok(
                "wait_for_mail", timeout_seconds=5, include_receipts=True
            )
            return result

    waited = run(over_mcp)
    assert [(r["message_id"], r["state"]) for r in waited["receipts"]] == [
        (second, "rejected"),
        (second, "rejected"),
    ]


def test_reject_without_a_reason_and_with_a_bad_body(api: Api) -> None:
    _, _, _, sent = held_send(api)
    message_id = sent["message"]["id"]
    assert_error(
        api.post(f"/approvals/{message_id}/reject", json={"why": "x"}), 422, "unknown_field"
    )
    assert_error(
        api.post(f"/approvals/{message_id}/reject", json={"reason": "x" * 1001}),
        422,
        "validation_error",
        "reason",
    )
    assert len(api.ok("GET", "/approvals")["items"]) == 1  # nothing changed
    decided = api.ok("POST", f"/approvals/{message_id}/reject")
    assert decided["state"] == "rejected" and decided["reason"] is None


def test_approve_refuses_a_bad_body_and_answers_its_reason(api: Api) -> None:
    """Approve takes the same ``{reason?}`` as reject: an unknown field, a body that is not
    JSON or an overlong reason is refused and nothing is decided; a reason is answered back."""
    _, _, _, sent = held_send(api)
    message_id = sent["message"]["id"]
    url = f"/approvals/{message_id}/approve"
    assert_error(api.post(url, json={"bogus": 1}), 422, "unknown_field")
    not_json = api.post(url, content=b"not json", headers={"Content-Type": "application/json"})
    assert_error(not_json, 422, "invalid_json")
    assert_error(api.post(url, json={"reason": "x" * 1001}), 422, "validation_error", "reason")
    assert len(api.ok("GET", "/approvals")["items"]) == 1  # nothing changed
    decided = api.ok("POST", url, json={"reason": "  Fine for Friday.  "})
    assert decided["state"] == "approved" and decided["reason"] == "Fine for Friday."
    assert api.ok("GET", "/approvals")["items"] == []


# Not found, not held.


def test_unknown_ids_are_404_and_decided_or_unheld_messages_409(api: Api, other_api: Api) -> None:
    alice, _, thread, sent = held_send(api)
    message_id = sent["message"]["id"]
    for ident in ("msg_nope", "dlv_nope", "nonsense"):
        for action in ("approve", "reject"):
            error = assert_error(api.post(f"/approvals/{ident}/{action}"), 404, "not_found")
            assert "msg_" in error["message"] and "GET /v1/approvals" in error["message"]
    # Another workspace's operator cannot see it.
    assert_error(other_api.post(f"/approvals/{message_id}/approve"), 404, "not_found")
    plain = alice.send(thread, "not held")["message"]["id"]
    error = assert_error(api.post(f"/approvals/{plain}/approve"), 409, "not_held")
    assert "never held" in error["message"]
    api.ok("POST", f"/approvals/{message_id}/approve")
    for action in ("approve", "reject"):
        error = assert_error(api.post(f"/approvals/{message_id}/{action}"), 409, "not_held")
        assert "already approved" in error["message"]


def test_an_idempotent_repeat_of_a_held_send_says_held(api: Api) -> None:
    api.ok("PUT", "/policy", json=HOLD_TASKS)
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("Repeat", ["bob"])["id"]
    key = {"Idempotency-Key": "k-1"}
    first = alice.send(thread, "once", kind="task", headers=key)
    again = alice.ok(
        "POST",
        f"/threads/{thread}/messages",
        200,  # a replay
        json={"body": "once", "kind": "task"},
        headers=key,
    )
    assert first["held"] is True and again["held"] is True and again["duplicate"] is True
    assert again["deliveries"][0]["state"] == "held"


# The sweep.


def test_held_deliveries_are_never_stalled_nor_republished(
    api: Api, database: Database, settings: Settings
) -> None:
    _, _, _, sent = held_send(api)
    delivery_id = sent["deliveries"][0]["id"]
    published: list[Job] = []
    later = utcnow().replace(year=utcnow().year + 1)
    report = sweep(database, settings, published.extend, later)
    assert report.stalled == 0 and not published
    assert api.delivery(delivery_id)["state"] == "held"
    api.ok("POST", f"/approvals/{sent['message']['id']}/approve")
    assert sweep(database, settings, published.extend, later).stalled == 1
    assert api.delivery(delivery_id)["state"] == "stalled"


@pytest.mark.parametrize("settings_overrides", [{"cap_per_pair": 1}])
def test_held_mail_counts_toward_the_pair_cap_and_rejected_mail_stops(api: Api) -> None:
    alice, _, thread, sent = held_send(api)
    assert_error(
        alice.post(f"/threads/{thread}/messages", json={"body": "more"}), 429, "rate_limited"
    )
    api.ok("POST", f"/approvals/{sent['message']['id']}/reject")
    assert alice.send(thread, "after the rejection")["held"] is False


# The CLI (the real console script against the server; SQLite: it is an HTTP client).


@pytest.mark.parametrize("backend", ["sqlite"])
def test_cli_pending_approve_and_reject(api: Api) -> None:
    alice, bob, thread, first = held_send(api)
    second = alice.send(thread, "Drop the table", kind="task", summary="Drop it")
    listed = cli_ok(api, "pending", "--output", "tsv").stdout.splitlines()
    header, *rows = [line.split("\t") for line in listed]
    assert [row[header.index("message_id")] for row in rows] == [
        first["message"]["id"],
        second["message"]["id"],
    ]
    table = cli_ok(api, "pending", "--output", "table").stdout
    assert "Deploy it" in table and "alice" in table
    approved = cli_ok(api, "approve", first["message"]["id"]).stdout
    assert f"Approved {first['message']['id']}" in approved
    assert [i["message_id"] for i in bob.inbox()["items"]] == [first["message"]["id"]]
    rejected = cli_run(
        api, "reject", second["message"]["id"], "--reason", "Not today", "--output", "json"
    ).json()
    assert rejected["state"] == "rejected" and rejected["reason"] == "Not today"
    assert cli_run(api, "pending", "--output", "json").json()["items"] == []
    assert "nothing waits for approval" in cli_ok(api, "pending", "--output", "table").stdout
    again = cli_run(api, "approve", first["message"]["id"])
    assert_one_line_error(again, 1, "not_held")
    missing = cli_run(api, "reject", "msg_nope")
    assert_one_line_error(missing, 1, "not_found")


def test_the_pending_gauge_counts_held_messages(api: Api) -> None:
    def pending() -> float:
        return sample(metric_samples(api.client.get("/metrics").text), "inbots_approvals_pending")

    before = pending()
    _, _, _, sent = held_send(api)
    assert pending() == before + 1
    api.ok("POST", f"/approvals/{sent['message']['id']}/approve")
    assert pending() == before


def test_the_python_client_sees_held_and_decides(api: Api) -> None:
    api.ok("PUT", "/policy", json=HOLD_TASKS)
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("Client", ["bob"])["id"]
    with Client(api.base_url, alice.token) as agent, Client(api.base_url, api.token) as op:
        sent = agent.send(thread, "Ship it", kind="task")
        plain = agent.send(thread, "Just news")
        assert sent.held is True and plain.held is False
        (waiting,) = op.approvals()
        assert waiting.message_id == sent.message.id and waiting.sender == "alice"
        decided = op.reject(sent.message.id, "No")
        assert decided.state == "rejected" and decided.reason == "No"
        with pytest.raises(Conflict) as raised:
            op.approve(sent.message.id)
        assert raised.value.code == "not_held"
        with pytest.raises(NotFound):
            op.approve("msg_nope")
        assert op.approvals() == []
