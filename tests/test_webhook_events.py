"""Webhook event types in the embedded default: an agent chooses which notifications it receives
(``webhook_events``), and ``message.acknowledged``, ``thread.close_requested`` and
``thread.closed`` reach subscribed receivers through the same engine as ``message.created``
(signed, retried, logged, redeliverable), verified with ``standardwebhooks``."""

from __future__ import annotations

import time
from typing import Any

import pytest
import standardwebhooks

from tests.helpers import Api, Caller
from tests.receivers import FAST, Receiver, always, fail_then_ok, receiver

TYPES = ["message.created", "message.acknowledged", "thread.close_requested", "thread.closed"]


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return dict(FAST)


def hooked(api: Api, name: str, hook: Receiver, events: list[str] | None) -> tuple[Caller, str]:
    """An agent with a webhook at ``hook`` receiving ``events`` (None: the default); returns
    the agent and its signing secret."""
    agent = api.agent(name)
    body: dict[str, Any] = {"url": hook.url}
    if events is not None:
        body["webhook_events"] = events
    webhook = agent.ok("PUT", "/me/webhook", json=body)
    return agent, webhook["signing_secret"]


def verified(secret: str, hook: Receiver, count: int = 1) -> list[dict[str, Any]]:
    """The first ``count`` notifications ``hook`` got, each verified by ``standardwebhooks``."""
    requests = hook.wait_for(count)
    payloads = []
    for request in requests[:count]:
        payload = standardwebhooks.Webhook(secret).verify(request.body, request.headers)
        assert request.headers["webhook-id"] == payload.get("event_id", payload.get("delivery_id"))
        payloads.append(payload)
    return payloads


def wait_event_state(api: Api, event_id: str, state: str, timeout: float = 10) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        detail = api.ok("GET", f"/events/{event_id}")
        if detail["state"] == state or time.monotonic() > deadline:
            return detail  # type: ignore[no-any-return]
        time.sleep(0.05)


# Choosing the types.


def test_a_webhook_receives_message_created_unless_it_chooses_otherwise(api: Api) -> None:
    agent = api.agent("chooser")
    made = agent.ok("PUT", "/me/webhook", json={"url": "http://127.0.0.1:9/hook"})
    assert made["webhook_events"] == ["message.created"]
    chosen = agent.ok(
        "PUT",
        "/me/webhook",
        json={"url": made["url"], "webhook_events": ["thread.closed", "message.acknowledged"]},
    )
    assert chosen["webhook_events"] == ["message.acknowledged", "thread.closed"]
    assert chosen["signing_secret"] == made["signing_secret"]
    # A later change of the URL alone keeps the choice; the read models show it.
    moved = agent.ok("PUT", "/me/webhook", json={"url": "http://127.0.0.1:9/other"})
    assert moved["webhook_events"] == ["message.acknowledged", "thread.closed"]
    assert agent.ok("GET", "/me/webhook")["webhook_events"] == moved["webhook_events"]
    assert api.ok("GET", "/agents/chooser/webhook")["webhook_events"] == moved["webhook_events"]
    # The operator chooses for an agent the same way; [] receives nothing.
    none = api.ok(
        "PUT", "/agents/chooser/webhook", json={"url": moved["url"], "webhook_events": []}
    )
    assert none["webhook_events"] == []
    all_types = api.ok(
        "PUT", "/agents/chooser/webhook", json={"url": moved["url"], "webhook_events": TYPES}
    )
    assert all_types["webhook_events"] == TYPES
    # Removing the webhook forgets the choice with the secret.
    agent.ok("DELETE", "/me/webhook", 204)
    again = agent.ok("PUT", "/me/webhook", json={"url": moved["url"]})
    assert again["webhook_events"] == ["message.created"]


def test_unknown_event_types_are_refused_naming_the_allowed_ones(api: Api) -> None:
    agent = api.agent("chooser")
    for wrong in (["message.deleted"], ["message.created", "thread.opened"]):
        response = agent.call(
            "PUT", "/me/webhook", json={"url": "http://127.0.0.1:9/hook", "webhook_events": wrong}
        )
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["field"] == "webhook_events"
        assert all(t in error["message"] for t in TYPES), error["message"]
    response = api.call(
        "PUT",
        "/agents/chooser/webhook",
        json={"url": "http://127.0.0.1:9/hook", "webhook_events": ["nope"]},
    )
    assert response.status_code == 422 and response.json()["error"]["field"] == "webhook_events"
    assert agent.call("GET", "/me/webhook").status_code == 404  # nothing was stored


# Each type reaches a subscribed receiver.


def test_a_declined_acknowledgement_reaches_the_senders_webhook_at_once(
    api: Api,
) -> None:
    with receiver(always(204)) as hook:
        lead, secret = hooked(api, "lead", hook, ["message.acknowledged"])
        worker = api.agent("worker")
        thread = lead.open_thread("Delegated", ["worker"])
        sent = lead.send(thread["id"], "Port the parser", kind="task")
        note = "Not my area: " + "x" * 200
        worker.ok(
            "POST",
            "/acks",
            json={"ids": [sent["message"]["id"]], "outcome": "declined", "note": note},
        )
        acked_at = time.monotonic()
        (payload,) = verified(secret, hook)
        # Pushed when the ack commits, not by the sweep a minute later (a loaded machine may
        # take a few seconds; on a quiet one it is a few milliseconds).
        assert hook.requests[0].at - acked_at < 5.0
    delivery_id = sent["deliveries"][0]["id"]
    assert payload["type"] == "message.acknowledged"
    assert payload["event_id"].startswith("evt_")
    assert payload["delivery_id"] == delivery_id
    assert payload["message_id"] == sent["message"]["id"]
    assert (payload["thread_id"], payload["thread_title"]) == (thread["id"], "Delegated")
    assert (payload["sender"], payload["recipient"]) == ("lead", "worker")
    assert payload["outcome"] == "declined"
    assert len(payload["note"]) == 120 and payload["note"].endswith("…")
    assert payload["note"].startswith("Not my area: x")
    assert payload["acknowledged_at"].endswith("Z")
    assert "body" not in payload and "summary" not in payload
    detail = wait_event_state(api, payload["event_id"], "notified")
    assert detail["type"] == "message.acknowledged" and detail["recipient"] == "lead"
    assert detail["actor"] == "worker" and detail["note"] == note  # stored whole
    assert [(a["number"], a["trigger"], a["reason"]) for a in detail["attempts"]] == [
        (1, "publish", "ok")
    ]


def test_close_requested_and_closed_reach_subscribed_participants(api: Api) -> None:
    with receiver(always(200)) as hook:
        _, secret = hooked(api, "watcher", hook, ["thread.close_requested", "thread.closed"])
        opener = api.agent("opener")
        thread = opener.open_thread("Finish the release", ["watcher"])
        opener.ok("POST", f"/threads/{thread['id']}/close-request", 202)
        requested = verified(secret, hook)[0]
        api.ok("POST", f"/threads/{thread['id']}/close")
        closed = verified(secret, hook, 2)[1]
    assert requested["type"] == "thread.close_requested"
    assert (requested["thread_id"], requested["thread_title"]) == (
        thread["id"],
        "Finish the release",
    )
    assert (requested["recipient"], requested["requested_by"]) == ("watcher", "opener")
    assert requested["event_id"].startswith("evt_") and requested["created_at"].endswith("Z")
    assert closed["type"] == "thread.closed"
    assert (closed["recipient"], closed["closed_by"]) == ("watcher", "operator")
    assert closed["thread_id"] == thread["id"]
    # The actor is not told of its own act; the operator's listing has both events.
    listed = api.ok("GET", "/events", params={"thread": thread["id"]})["items"]
    assert sorted((e["type"], e["recipient"], e["state"]) for e in listed) == [
        ("thread.close_requested", "watcher", "notified"),
        ("thread.closed", "watcher", "notified"),
    ]


def test_message_created_still_arrives_beside_the_other_types(api: Api) -> None:
    with receiver(always(200)) as hook:
        _, secret = hooked(api, "reader", hook, TYPES)
        writer = api.agent("writer")
        thread = writer.open_thread("Mixed", ["reader"])
        sent = writer.send(thread["id"], "hello", summary="Say hello")
        (payload,) = verified(secret, hook)
    assert payload["type"] == "message.created"
    assert payload["delivery_id"] == sent["deliveries"][0]["id"]
    assert hook.requests[0].headers["webhook-id"] == payload["delivery_id"]


# Agents that did not choose a type get nothing of it.


def test_an_agent_not_subscribed_gets_nothing_of_that_type(api: Api) -> None:
    with receiver(always(200)) as hook:
        lead, _ = hooked(api, "lead", hook, None)  # message.created only
        other, _ = hooked(api, "other", hook, ["message.acknowledged"])  # no message.created
        thread = lead.open_thread("Quiet", ["other"])
        sent = lead.send(thread["id"], "to other")
        other.ok("POST", "/acks", json={"ids": [sent["message"]["id"]], "outcome": "done"})
        other.ok("POST", f"/threads/{thread['id']}/close-request", 403)
        lead.ok("POST", f"/threads/{thread['id']}/close-request", 202)
        api.ok("POST", f"/threads/{thread['id']}/close")
        time.sleep(1.0)
        assert hook.requests == []
    delivery = api.delivery(sent["deliveries"][0]["id"])
    assert delivery["publish_count"] == 0 and delivery["attempts"] == []
    # The acknowledgement is still an event: the sender's long-poll and outbox have it, unsent.
    (event,) = api.ok("GET", "/events", params={"agent": "lead"})["items"]
    assert (event["type"], event["state"], event["publish_count"], event["alert"]) == (
        "message.acknowledged",
        "unsent",
        0,
        None,  # an agent's event, not an operator's alert
    )
    assert api.ok("GET", "/events", params={"type": "thread.closed"})["items"] == []


# The engine's guarantees hold for events: retries, the attempt log, redeliver.


def test_an_event_is_retried_logged_and_redelivered_under_the_same_webhook_id(api: Api) -> None:
    with receiver(fail_then_ok(2)) as hook:
        lead, secret = hooked(api, "lead", hook, ["message.acknowledged"])
        worker = api.agent("worker")
        thread = lead.open_thread("Retry me", ["worker"])
        message_id = lead.send(thread["id"], "hello")["message"]["id"]
        worker.ok("POST", "/acks", json={"ids": [message_id], "outcome": "done"})
        requests = hook.wait_for(3)
        event_id = requests[0].headers["webhook-id"]
        detail = wait_event_state(api, event_id, "notified")
        assert [(a["publish"], a["trigger"], a["reason"]) for a in detail["attempts"]] == [
            (1, "publish", "http_500"),
            (1, "retry", "http_500"),
            (1, "retry", "ok"),
        ]
        assert all(r.headers["webhook-id"] == event_id for r in requests)

        redone = api.ok("POST", f"/events/{event_id}/redeliver", 202)
        assert redone["id"] == event_id and redone["publish_count"] == 2
        fourth = hook.wait_for(4)[3]
        assert fourth.headers["webhook-id"] == event_id
        standardwebhooks.Webhook(secret).verify(fourth.body, fourth.headers)
        deadline = time.monotonic() + 10
        while len(api.ok("GET", f"/events/{event_id}")["attempts"]) < 4:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    attempts = api.ok("GET", f"/events/{event_id}")["attempts"]
    assert (attempts[3]["number"], attempts[3]["publish"], attempts[3]["trigger"]) == (
        4,
        2,
        "redeliver",
    )


def test_an_event_that_keeps_failing_is_failed_and_listed_as_such(api: Api) -> None:
    with receiver(always(500)) as hook:
        lead, _ = hooked(api, "lead", hook, ["message.acknowledged"])
        worker = api.agent("worker")
        thread = lead.open_thread("Broken handler", ["worker"])
        message_id = lead.send(thread["id"], "hello")["message"]["id"]
        worker.ok("POST", "/acks", json={"ids": [message_id]})
        event_id = hook.wait_for(1)[0].headers["webhook-id"]
        detail = wait_event_state(api, event_id, "failed")
    assert detail["failure_reason"] == "webhook attempts exhausted (4; last: http_500)"
    assert [e["id"] for e in api.ok("GET", "/events", params={"state": "failed"})["items"]] == [
        event_id
    ]


def test_the_operators_event_endpoints_check_their_input(api: Api) -> None:
    agent = api.agent("plain")
    assert agent.call("GET", "/events").status_code == 403
    missing = api.call("GET", "/events/evt_00000000000000000000000000")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    redeliver = api.call("POST", "/events/evt_00000000000000000000000000/redeliver")
    assert redeliver.status_code == 404
    for params, field in (({"type": "message.created"}, "type"), ({"state": "odd"}, "state")):
        response = api.call("GET", "/events", params=params)
        assert response.status_code == 422 and response.json()["error"]["field"] == field


def test_redelivering_an_event_to_an_agent_without_that_type_is_a_conflict(api: Api) -> None:
    with receiver(always(200)) as hook:
        lead, _ = hooked(api, "lead", hook, ["message.acknowledged"])
        worker = api.agent("worker")
        thread = lead.open_thread("Then unsubscribe", ["worker"])
        message_id = lead.send(thread["id"], "hello")["message"]["id"]
        worker.ok("POST", "/acks", json={"ids": [message_id]})
        event_id = hook.wait_for(1)[0].headers["webhook-id"]
        lead.ok("PUT", "/me/webhook", json={"url": hook.url, "webhook_events": []})
        response = api.call("POST", f"/events/{event_id}/redeliver")
    assert response.status_code == 409, response.text
    assert "message.acknowledged" in response.json()["error"]["message"]
