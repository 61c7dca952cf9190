"""Reply and acknowledge in one call (coordination.md §3): ``POST /v1/threads/{id}/messages``
with ``acknowledge`` beside ``reply_to`` stores the reply and acknowledges the caller's copy of
the message it answers, in one transaction. Both backends."""

from __future__ import annotations

from typing import Any

from tests.helpers import Api, Caller, assert_error

HOLD_DECISIONS = {"approval": {"kinds": ["decision"], "priorities": [], "senders": []}}


def asked(api: Api) -> tuple[Caller, Caller, dict[str, Any], dict[str, Any]]:
    """alice asks bob a question; bob's copy is unacknowledged."""
    alice, bob = api.agent("alice"), api.agent("bob")
    thread = alice.open_thread("Ship 2.0?", ["bob"])
    question = alice.send(thread["id"], "Can we ship 2.0 on Friday?", kind="question")
    return alice, bob, thread, question


def history(caller: Caller, thread_id: str) -> list[str]:
    items = caller.ok("GET", f"/threads/{thread_id}/messages")["items"]
    return [m["body"] for m in items]


def test_a_reply_acknowledges_the_message_it_answers(api: Api) -> None:
    alice, bob, thread, question = asked(api)
    (mine,) = question["deliveries"]

    reply = bob.send(
        thread["id"],
        "Yes, the release branch is green.",
        reply_to=question["message"]["id"],
        acknowledge="done",
    )

    assert reply["acknowledged"] == {"delivery_id": mine["id"], "outcome": "done"}
    assert reply["message"]["reply_to"] == question["message"]["id"]
    receipt = api.delivery(mine["id"])
    assert receipt["state"] == "acknowledged"
    # The note is the reply's summary as inboxes show it (here the short body itself).
    assert (receipt["outcome"], receipt["note"]) == ("done", "Yes, the release branch is green.")
    assert bob.inbox()["items"] == []
    (sent,) = alice.ok("GET", "/outbox")["items"]
    assert sent["receipts"][0]["state"] == "acknowledged"
    # alice has the reply; a send without acknowledge answers no acknowledged field.
    (item,) = alice.inbox()["items"]
    assert item["message_id"] == reply["message"]["id"]
    plain = alice.send(thread["id"], "Thanks")
    assert "acknowledged" not in plain


def test_declined_with_a_summary_takes_the_summary_as_its_note(api: Api) -> None:
    _, bob, thread, question = asked(api)
    (mine,) = question["deliveries"]
    reply = bob.send(
        thread["id"],
        "Not on Friday: the migration needs a second review, and the on-call rota is thin.",
        summary="Not Friday: migration needs review",
        reply_to=question["message"]["id"],
        acknowledge="declined",
    )
    assert reply["acknowledged"] == {"delivery_id": mine["id"], "outcome": "declined"}
    receipt = api.delivery(mine["id"])
    assert (receipt["outcome"], receipt["note"]) == (
        "declined",
        "Not Friday: migration needs review",
    )


def test_acknowledge_without_reply_to_is_422_and_stores_nothing(api: Api) -> None:
    _, bob, thread, question = asked(api)
    refused = bob.post(
        f"/threads/{thread['id']}/messages", json={"body": "done", "acknowledge": "done"}
    )
    assert_error(refused, 422, "validation_error", field="acknowledge")
    assert "reply_to" in refused.json()["error"]["message"]
    bad = bob.post(
        f"/threads/{thread['id']}/messages",
        json={"body": "done", "reply_to": question["message"]["id"], "acknowledge": "yes"},
    )
    assert_error(bad, 422, "validation_error", field="acknowledge")
    assert history(bob, thread["id"]) == ["Can we ship 2.0 on Friday?"]
    assert api.delivery(question["deliveries"][0]["id"])["acknowledged_at"] is None


def test_no_copy_to_acknowledge_refuses_the_reply_too(api: Api) -> None:
    """One transaction: when the acknowledgement cannot be made, the reply is not stored."""
    alice, bob, thread, question = asked(api)
    # alice sent the question: she holds no copy of it.
    refused = alice.post(
        f"/threads/{thread['id']}/messages",
        json={"body": "Any news?", "reply_to": question["message"]["id"], "acknowledge": "done"},
    )
    assert_error(refused, 422, "validation_error", field="acknowledge")
    assert history(alice, thread["id"]) == ["Can we ship 2.0 on Friday?"]
    assert bob.inbox()["waiting"] == 1
    # A reply_to that the send refuses leaves bob's copy unacknowledged.
    other = alice.open_thread("Elsewhere", ["bob"])
    wrong = bob.post(
        f"/threads/{other['id']}/messages",
        json={"body": "Yes", "reply_to": question["message"]["id"], "acknowledge": "done"},
    )
    assert wrong.status_code == 422, wrong.text
    assert api.delivery(question["deliveries"][0]["id"])["acknowledged_at"] is None
    assert history(bob, other["id"]) == []


def test_a_repeat_answers_the_same_acknowledgement_and_an_earlier_one_stands(api: Api) -> None:
    _, bob, thread, question = asked(api)
    (mine,) = question["deliveries"]
    fields = {"reply_to": question["message"]["id"], "acknowledge": "done"}
    headers = {"Idempotency-Key": "reply-1"}
    first = bob.send(thread["id"], "Yes", headers=headers, **fields)
    again = bob.ok(  # a repeat answers 200 with the original
        "POST",
        f"/threads/{thread['id']}/messages",
        json={"body": "Yes", **fields},
        headers=headers,
    )
    assert again["duplicate"] is True and again["message"]["id"] == first["message"]["id"]
    assert (
        again["acknowledged"]
        == first["acknowledged"]
        == {
            "delivery_id": mine["id"],
            "outcome": "done",
        }
    )
    # Acknowledged already: a second reply with acknowledge keeps the first outcome and note.
    later = bob.send(
        thread["id"],
        "On reflection, no",
        reply_to=question["message"]["id"],
        acknowledge="declined",
    )
    assert later["acknowledged"] == {"delivery_id": mine["id"], "outcome": "done"}
    assert api.delivery(mine["id"])["note"] == "Yes"


def test_a_held_reply_acknowledges_without_letting_its_words_out(api: Api) -> None:
    """A reply the approval policy holds still acknowledges, with no note: the operator has not
    approved its words yet."""
    _, bob, thread, question = asked(api)
    api.ok("PUT", "/policy", json=HOLD_DECISIONS)
    reply = bob.send(
        thread["id"],
        "Ship it.",
        kind="decision",
        reply_to=question["message"]["id"],
        acknowledge="done",
    )
    assert reply["held"] is True
    receipt = api.delivery(question["deliveries"][0]["id"])
    assert (receipt["state"], receipt["outcome"], receipt["note"]) == ("acknowledged", "done", None)
