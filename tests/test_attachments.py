"""Attachments (coordination.md §2): sent with a message in base64, stored in its transaction with
their SHA-256, listed with it (metadata only), read back byte for byte at
``GET /v1/attachments/{id}`` by its sender, its recipients and the operator, refused whole when
over the limits or malformed."""

from __future__ import annotations

import base64
import hashlib
import os
import time
from datetime import timedelta
from typing import Any

import pytest
import standardwebhooks
from sqlalchemy import select, update

from inbots.client import Client, NotFound
from inbots.config import Settings
from inbots.db.engine import Database
from inbots.db.uow import unit_of_work
from inbots.deliveries.retention import purge
from inbots.kit.clock import utcnow
from inbots.models.attachments import Attachment
from inbots.models.threads import Thread
from tests.helpers import Api, Caller, assert_error
from tests.receivers import always, receiver

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
KIB = 1024
MIB = 1024 * KIB


def attachment(name: str, content_type: str, data: bytes) -> dict[str, str]:
    return {"name": name, "content_type": content_type, "data": base64.b64encode(data).decode()}


def meta(name: str, content_type: str, data: bytes) -> dict[str, Any]:
    """What a message lists of an attachment, but its id."""
    return {
        "name": name,
        "content_type": content_type,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def without_ids(listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    assert all(a["id"].startswith("att_") for a in listed)
    return [{k: v for k, v in a.items() if k != "id"} for a in listed]


def pair(api: Api) -> tuple[Caller, Caller, str]:
    alice, bob = api.agent("alice"), api.agent("bob")
    return alice, bob, alice.open_thread("Specs", ["bob"])["id"]


def test_an_attachment_round_trips_byte_for_byte_with_its_sha256(api: Api) -> None:
    alice, bob, thread = pair(api)
    blob = os.urandom(300 * KIB) + b"\x00\xff"
    files = [
        attachment("shot.png", "image/png", PNG),
        attachment("dump.bin", "application/octet-stream", blob),
    ]
    sent = alice.send(thread, "see attached", attachments=files)
    listed = sent["message"]["attachments"]
    assert without_ids(listed) == [
        meta("shot.png", "image/png", PNG),
        meta("dump.bin", "application/octet-stream", blob),
    ]
    for item, data in zip(listed, [PNG, blob], strict=True):
        for who in (alice, bob, api):
            got = who.get(f"/attachments/{item['id']}")
            assert got.status_code == 200, got.text
            assert got.content == data
            assert hashlib.sha256(got.content).hexdigest() == item["sha256"]
            assert got.headers["content-type"] == item["content_type"]
            assert got.headers["x-content-type-options"] == "nosniff"
            assert got.headers["content-disposition"] == f'attachment; filename="{item["name"]}"'


def test_messages_inbox_outbox_and_reads_list_the_metadata(api: Api) -> None:
    alice, bob, thread = pair(api)
    plain = alice.send(thread, "no files")
    assert "attachments" not in plain["message"]  # a message without any answers as before
    sent = alice.send(thread, "one file", attachments=[attachment("a.txt", "text/plain", b"hi")])
    listed = sent["message"]["attachments"]
    assert without_ids(listed) == [meta("a.txt", "text/plain", b"hi")]
    mid = sent["message"]["id"]
    history = bob.ok("GET", f"/threads/{thread}/messages")["items"]
    assert ["attachments" in m for m in history] == [False, True]
    assert history[1]["attachments"] == listed
    assert bob.ok("GET", f"/messages/{mid}")["message"]["attachments"] == listed
    with_bodies = bob.inbox(include="body")["items"]
    assert [i.get("attachments") for i in with_bodies] == [None, listed]
    assert all("attachments" not in i for i in bob.inbox()["items"])  # summaries only
    outbox = alice.ok("GET", "/outbox")["items"]
    assert [o["message"].get("attachments") for o in outbox] == [listed, None]
    detail = api.ok("GET", f"/threads/{thread}")["messages"]
    assert [m.get("attachments") for m in detail] == [None, listed]


def test_a_direct_send_carries_attachments(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    sent = alice.ok(
        "POST",
        "/messages",
        201,
        json={
            "to": ["bob"],
            "body": "logs",
            "attachments": [attachment("l.log", "text/plain", b"x")],
        },
    )
    (item,) = sent["message"]["attachments"]
    assert bob.get(f"/attachments/{item['id']}").content == b"x"


def test_anyone_outside_the_message_gets_404_and_reading_stamps_nothing(api: Api) -> None:
    alice, bob, thread = pair(api)
    carol = api.agent("carol")
    sent = alice.send(thread, "private", attachments=[attachment("k.txt", "text/plain", b"key")])
    att = sent["message"]["attachments"][0]["id"]
    assert_error(carol.get(f"/attachments/{att}"), 404, "not_found")
    assert_error(bob.get("/attachments/att_nope"), 404, "not_found")
    # Another workspace's operator does not see it either.
    assert bob.get(f"/attachments/{att}").status_code == 200
    delivery = sent["deliveries"][0]["id"]
    assert api.delivery(delivery)["fetched_at"] is None  # the download stamped nothing
    assert api.delivery(delivery)["delivered_at"] is None


def test_another_workspaces_operator_gets_404(api: Api, other_api: Api) -> None:
    alice, _, thread = pair(api)
    sent = alice.send(thread, "x", attachments=[attachment("k.txt", "text/plain", b"key")])
    att = sent["message"]["attachments"][0]["id"]
    assert_error(other_api.get(f"/attachments/{att}"), 404, "not_found")


def test_a_held_messages_attachments_are_held_with_it(api: Api) -> None:
    api.ok(
        "PUT", "/policy", json={"approval": {"kinds": ["task"], "priorities": [], "senders": []}}
    )
    alice, bob, thread = pair(api)
    files = [attachment("plan.txt", "text/plain", b"the plan")]
    sent = alice.send(thread, "do it", kind="task", attachments=files)
    assert sent["held"] is True
    att = sent["message"]["attachments"][0]["id"]
    assert_error(bob.get(f"/attachments/{att}"), 404, "not_found")
    assert alice.get(f"/attachments/{att}").content == b"the plan"  # its sender
    assert api.get(f"/attachments/{att}").content == b"the plan"  # the operator, deciding
    api.ok("POST", f"/approvals/{sent['message']['id']}/approve")
    assert bob.get(f"/attachments/{att}").content == b"the plan"


def test_non_ascii_names_get_a_utf8_filename_star(api: Api) -> None:
    alice, bob, thread = pair(api)
    name = 'résumé "final".txt'
    sent = alice.send(thread, "cv", attachments=[attachment(name, "text/plain", b"cv")])
    got = bob.get(f"/attachments/{sent['message']['attachments'][0]['id']}")
    assert got.headers["content-disposition"] == (
        'attachment; filename="r_sum_ \\"final\\".txt"; '
        "filename*=UTF-8''r%C3%A9sum%C3%A9%20%22final%22.txt"
    )


# --- refusals: nothing stored ----------------------------------------------------------------


def nothing_sent(bob: Caller) -> None:
    assert bob.inbox()["waiting"] == 0


def test_over_a_mib_is_413_naming_the_attachment(api: Api) -> None:
    alice, bob, thread = pair(api)
    files = [
        attachment("ok.bin", "application/octet-stream", b"1"),
        attachment("big.bin", "application/octet-stream", b"\0" * (MIB + 1)),
    ]
    response = alice.post(f"/threads/{thread}/messages", json={"body": "x", "attachments": files})
    assert_error(response, 413, "payload_too_large", field="attachments[1]")
    nothing_sent(bob)
    exactly = [attachment("edge.bin", "application/octet-stream", b"\1" * MIB)]
    sent = alice.send(thread, "a MiB exactly", attachments=exactly)
    assert sent["message"]["attachments"][0]["bytes"] == MIB


def test_over_four_mib_in_all_is_413_naming_the_attachment_that_crossed(api: Api) -> None:
    alice, bob, thread = pair(api)
    files = [attachment(f"{i}.bin", "application/octet-stream", b"\0" * MIB) for i in range(5)]
    response = alice.post(f"/threads/{thread}/messages", json={"body": "x", "attachments": files})
    assert_error(response, 413, "payload_too_large", field="attachments[4]")
    nothing_sent(bob)
    four = files[:4]
    assert len(alice.send(thread, "4 MiB", attachments=four)["message"]["attachments"]) == 4


def test_more_than_five_is_refused(api: Api) -> None:
    alice, bob, thread = pair(api)
    files = [attachment(f"{i}.txt", "text/plain", b"x") for i in range(6)]
    response = alice.post(f"/threads/{thread}/messages", json={"body": "x", "attachments": files})
    assert_error(response, 413, "payload_too_large", field="attachments[5]")
    nothing_sent(bob)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"data": "not base64!"}, "attachments[1]"),
        ({"data": "YWJj\nZGVm"}, "attachments[1]"),
        ({"data": "YWJjZA"}, "attachments[1]"),  # unpadded
        ({"name": ""}, "attachments[1].name"),
        ({"name": "../etc/passwd"}, "attachments[1].name"),
        ({"name": "x" * 256}, "attachments[1].name"),
        ({"name": "a\r\nb.txt"}, "attachments[1].name"),
        ({"content_type": "png"}, "attachments[1].content_type"),
        ({"content_type": "text/plain\r\nX-Evil: 1"}, "attachments[1].content_type"),
        ({"content_type": "image/"}, "attachments[1].content_type"),
    ],
)
def test_bad_attachments_are_422_naming_the_attachment(
    api: Api, change: dict[str, str], field: str
) -> None:
    alice, bob, thread = pair(api)
    files = [
        attachment("a.txt", "text/plain", b"a"),
        {**attachment("b.txt", "text/plain", b"b"), **change},
    ]
    response = alice.post(f"/threads/{thread}/messages", json={"body": "x", "attachments": files})
    assert_error(response, 422, "validation_error", field=field)
    nothing_sent(bob)


def test_media_types_with_parameters_are_kept_as_sent(api: Api) -> None:
    alice, bob, thread = pair(api)
    kind = "text/csv; charset=utf-8"
    sent = alice.send(thread, "csv", attachments=[attachment("t.csv", kind, b"a,b\n")])
    got = bob.get(f"/attachments/{sent['message']['attachments'][0]['id']}")
    assert got.headers["content-type"] == kind and got.content == b"a,b\n"


def test_an_idempotent_repeat_must_carry_the_same_attachments(api: Api) -> None:
    alice, bob, thread = pair(api)
    first = [attachment("a.txt", "text/plain", b"one")]
    key = {"Idempotency-Key": "files-1"}
    sent = alice.send(thread, "x", attachments=first, headers=key)
    path = f"/threads/{thread}/messages"
    again = alice.ok("POST", path, 200, json={"body": "x", "attachments": first}, headers=key)
    assert again["duplicate"] is True
    assert again["message"]["attachments"] == sent["message"]["attachments"]
    other = [attachment("a.txt", "text/plain", b"two")]
    response = alice.post(
        f"/threads/{thread}/messages", json={"body": "x", "attachments": other}, headers=key
    )
    assert_error(response, 409, "idempotency_key_reused")
    # Without attachments, a key stored before attachments existed still matches its repeat.
    plain = alice.send(thread, "y", headers={"Idempotency-Key": "plain-1"})
    response = alice.post(
        f"/threads/{thread}/messages",
        json={"body": "y", "attachments": first},
        headers={"Idempotency-Key": "plain-1"},
    )
    assert_error(response, 409, "idempotency_key_reused")
    plain_key = {"Idempotency-Key": "plain-1"}
    repeat = alice.ok("POST", path, 200, json={"body": "y"}, headers=plain_key)
    assert repeat["message"] == plain["message"]
    assert bob.inbox()["waiting"] == 2


# --- the request-size limit follows the attachments' ------------------------------------------


def test_send_routes_take_a_body_as_large_as_the_attachments_allow(api: Api) -> None:
    """Four 1 MiB attachments in base64 are ~5.6 MB of JSON: over the 64 KiB of other routes."""
    alice, bob, thread = pair(api)
    files = [attachment(f"{i}.bin", "application/octet-stream", os.urandom(MIB)) for i in range(4)]
    sent = alice.send(thread, "big", attachments=files)
    assert [a["bytes"] for a in sent["message"]["attachments"]] == [MIB] * 4
    # Other routes keep the usual cap.
    big_note = {"ids": ["dlv_x"], "outcome": "done", "note": "x" * (70 * KIB)}
    assert_error(bob.post("/acks", json=big_note), 413, "payload_too_large")


def test_what_passes_the_usual_cap_must_be_attachments(api: Api) -> None:
    """The larger cap is for attachments: a send whose body is over 64 KiB without them (or
    with a small one beside 70 KiB of other JSON) is refused as before attachments, 413
    naming the usual cap, nothing stored."""
    alice, bob, thread = pair(api)
    padded = {"body": "x", "summary": "s", "kind": "update", "pad": " " * (70 * KIB)}
    for extra in ({}, {"attachments": [attachment("a.txt", "text/plain", b"hi")]}):
        response = alice.post(f"/threads/{thread}/messages", json={**padded, **extra})
        assert_error(response, 413, "payload_too_large")
        assert "65536" in response.json()["error"]["message"]
    nothing_sent(bob)


def test_a_send_body_over_the_send_cap_is_refused_before_it_is_read(api: Api) -> None:
    alice, _, thread = pair(api)

    def endless() -> Any:
        chunk = b"A" * (256 * KIB)
        for _ in range(64):  # 16 MiB, never sent whole
            yield chunk

    response = alice.client.post(
        f"/v1/threads/{thread}/messages",
        headers={**alice.headers, "Content-Type": "application/json"},
        content=endless(),
    )
    assert_error(response, 413, "payload_too_large")


# --- attachments go with their message ---------------------------------------------------------


def test_retention_deletes_attachments_with_their_messages(
    api: Api, database: Database, settings: Settings
) -> None:
    alice, bob, thread = pair(api)
    kept = alice.open_thread("Kept", ["bob"])["id"]
    gone = alice.send(thread, "old", attachments=[attachment("o.txt", "text/plain", b"old")])
    stays = alice.send(kept, "new", attachments=[attachment("n.txt", "text/plain", b"new")])
    api.ok("POST", f"/threads/{thread}/close")
    with unit_of_work(database) as uow:
        uow.session.execute(
            update(Thread)
            .where(Thread.id == thread)
            .values(closed_at=utcnow() - timedelta(days=31))
        )
    assert purge(database, settings, days=30).messages == 1
    old_id = gone["message"]["attachments"][0]["id"]
    assert_error(api.get(f"/attachments/{old_id}"), 404, "not_found")
    with unit_of_work(database) as uow:
        left = uow.session.scalars(select(Attachment.id)).all()
    assert left == [stays["message"]["attachments"][0]["id"]]
    assert bob.get(f"/attachments/{left[0]}").content == b"new"


# --- the Python client -------------------------------------------------------------------------


def test_the_client_sends_bytes_and_reads_them_back(api: Api) -> None:
    alice, bob, thread = pair(api)
    blob = os.urandom(2000)
    with Client(api.base_url, alice.token) as sender, Client(api.base_url, bob.token) as reader:
        files = [{"name": "r.bin", "content_type": "application/octet-stream", "data": blob}]
        sent = sender.send(thread, "bytes", attachments=files)
        (listed,) = sent.message.attachments
        assert (listed.bytes, listed.sha256) == (len(blob), hashlib.sha256(blob).hexdigest())
        assert reader.attachment(listed.id) == blob
        assert reader.read(sent.message.id).message.attachments == [listed]
        with pytest.raises(NotFound):
            reader.attachment("att_unknown")


# --- webhooks: the metadata, never the bytes ---------------------------------------------------


def test_a_webhook_notification_carries_the_metadata_never_the_bytes(api: Api) -> None:
    secret_bytes = b"TOP-SECRET-CONTENT"
    with receiver(always(200)) as hook:
        alice, bob, thread = pair(api)
        secret = bob.ok("PUT", "/me/webhook", json={"url": hook.url})["signing_secret"]
        plain = alice.send(thread, "no files")
        files = [attachment("s.txt", "text/plain", secret_bytes)]
        sent = alice.send(thread, "a file", attachments=files)
        first, second = sorted(hook.wait_for(2), key=lambda r: r.json()["message_id"])
    assert first.json()["message_id"] == plain["message"]["id"]
    assert "attachments" not in first.json()  # a notification without files is as before
    payload = standardwebhooks.Webhook(secret).verify(second.body, second.headers)
    assert payload["attachments"] == sent["message"]["attachments"]
    assert secret_bytes not in second.body
    assert base64.b64encode(secret_bytes) not in second.body


@pytest.mark.parametrize(
    "settings_overrides", [{"ttl_min_seconds": 1, "renotify_interval_seconds": 0.2}]
)
def test_an_expired_copys_attachments_are_gone_for_its_recipient(api: Api) -> None:
    alice, bob, thread = pair(api)
    files = [attachment("t.txt", "text/plain", b"soon gone")]
    sent = alice.send(thread, "read me soon", ttl_seconds=3, attachments=files)
    att = sent["message"]["attachments"][0]["id"]
    assert bob.get(f"/attachments/{att}").content == b"soon gone"
    deadline = time.monotonic() + 15
    while api.delivery(sent["deliveries"][0]["id"])["state"] != "expired":
        assert time.monotonic() < deadline, "the sweep expires it"
        time.sleep(0.2)
    assert_error(bob.get(f"/attachments/{att}"), 410, "expired")
    assert alice.get(f"/attachments/{att}").content == b"soon gone"  # its sender still may
