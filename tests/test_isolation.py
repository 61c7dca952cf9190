"""Isolation: whatever an outsider names, the answer never reveals that it exists.

An agent outside a thread, another workspace's operator and another workspace's agent all get the
same 404 for a real id as for a made-up one (the message may only differ by echoing the id).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from inbots.db.engine import Database
from inbots.models.deliveries import Delivery
from inbots.models.messages import Message
from inbots.models.threads import Participant
from tests.helpers import Api, Caller


def fake_like(ident: str) -> str:
    """An id of the same kind and shape that names nothing."""
    prefix, _, body = ident.partition("_")
    return f"{prefix}_{'0' * 10}{body[10:][::-1]}"


@dataclass
class World:
    """Workspace one: alice opened a thread with bob and posted; carol is in the workspace only."""

    alice: Caller
    bob: Caller
    carol: Caller
    alice_id: str
    thread_id: str
    message_id: str
    delivery_id: str  # bob's copy of the message
    other_thread_id: str  # a thread carol is in, so carol has something of her own


@pytest.fixture
def world(api: Api) -> World:
    alice = api.agent("alice")
    bob = api.agent("bob")
    carol = api.agent("carol")
    alice_id = alice.ok("GET", "/me")["id"]
    thread = alice.open_thread("Secret task", ["bob"])
    sent = alice.send(thread["id"], "the secret plan", kind="task")
    other = carol.open_thread("Carol's own", ["alice"])
    return World(
        alice=alice,
        bob=bob,
        carol=carol,
        alice_id=alice_id,
        thread_id=thread["id"],
        message_id=sent["message"]["id"],
        delivery_id=sent["deliveries"][0]["id"],
        other_thread_id=other["id"],
    )


def assert_same_not_found(
    real: httpx.Response, real_id: str, fake: httpx.Response, fake_id: str, label: str
) -> None:
    assert real.status_code == 404, (label, real.status_code, real.text)
    assert fake.status_code == 404, (label, fake.status_code, fake.text)
    real_body, fake_body = real.json(), fake.json()
    assert set(real_body) == {"error"}, (label, real_body)
    assert real_body["error"]["code"] == "not_found", (label, real_body)
    assert fake_body["error"]["code"] == "not_found", (label, fake_body)
    assert set(real_body["error"]) == set(fake_body["error"]), (label, real_body, fake_body)
    real_message = real_body["error"]["message"].replace(real_id, "<id>")
    fake_message = fake_body["error"]["message"].replace(fake_id, "<id>")
    assert real_message == fake_message, (label, real_message, fake_message)
    assert real_body["error"].get("field") == fake_body["error"].get("field"), label
    assert real.headers.get("content-type") == fake.headers.get("content-type"), label


def probe(
    caller: Caller,
    method: str,
    template: str,
    real_id: str,
    fake_id: str,
    json: Any = None,
) -> None:
    kwargs = {"json": json} if json is not None else {}
    real = caller.call(method, template.format(id=real_id), **kwargs)
    fake = caller.call(method, template.format(id=fake_id), **kwargs)
    assert_same_not_found(real, real_id, fake, fake_id, f"{method} {template}")


def agent_probes(caller: Caller, world: World) -> None:
    """Every id-taking agent endpoint, with the real ids of workspace one and made-up ones."""
    thread, fake_thread = world.thread_id, fake_like(world.thread_id)
    probe(caller, "GET", "/threads/{id}", thread, fake_thread)
    probe(caller, "GET", "/threads/{id}/messages", thread, fake_thread)
    probe(caller, "POST", "/threads/{id}/messages", thread, fake_thread, json={"body": "let me in"})
    probe(
        caller,
        "POST",
        "/threads/{id}/participants",
        thread,
        fake_thread,
        json={"username": caller.name},
    )
    probe(caller, "POST", "/threads/{id}/close-request", thread, fake_thread)
    message, fake_message = world.message_id, fake_like(world.message_id)
    probe(caller, "GET", "/messages/{id}", message, fake_message)
    delivery, fake_delivery = world.delivery_id, fake_like(world.delivery_id)
    probe(caller, "GET", "/messages/{id}", delivery, fake_delivery)
    probe(caller, "POST", "/deliveries/{id}/received", delivery, fake_delivery)
    probe(caller, "GET", "/messages/{id}", thread, "made-up")


def assert_untouched(api: Api, world: World) -> None:
    """None of the probes changed anything in workspace one."""
    detail = api.ok("GET", f"/threads/{world.thread_id}")
    assert detail["status"] == "open"
    assert sorted(detail["participants"]) == ["alice", "bob"]
    assert [m["id"] for m in detail["messages"]] == [world.message_id]
    receipt = api.delivery(world.delivery_id)
    assert receipt["state"] == "accepted", receipt
    assert receipt["delivered_at"] is None and receipt["acknowledged_at"] is None


def ack_probe(caller: Caller, world: World) -> None:
    ids = [world.message_id, world.delivery_id]
    fakes = [fake_like(i) for i in ids]
    real = caller.ok("POST", "/acks", json={"ids": ids, "outcome": "done"})
    fake = caller.ok("POST", "/acks", json={"ids": fakes, "outcome": "done"})
    assert real == {"acknowledged": [], "already": [], "not_found": ids}
    assert fake == {"acknowledged": [], "already": [], "not_found": fakes}


# --- an agent outside the thread -------------------------------------------------------------


def test_agent_outside_thread_gets_identical_404s(api: Api, world: World) -> None:
    agent_probes(world.carol, world)
    assert_untouched(api, world)


def test_agent_outside_thread_cannot_ack_others_deliveries(api: Api, world: World) -> None:
    ack_probe(world.carol, world)
    assert_untouched(api, world)


def test_agent_outside_thread_does_not_see_it_listed(world: World) -> None:
    listed = [t["id"] for t in world.carol.ok("GET", "/threads")["items"]]
    assert listed == [world.other_thread_id]
    assert world.carol.inbox()["items"] == []


def test_participant_sees_what_outsider_cannot(world: World) -> None:
    """The control: the same calls succeed for a participant, so the 404s above mean something."""
    assert world.bob.ok("GET", f"/threads/{world.thread_id}")["id"] == world.thread_id
    assert world.bob.ok("GET", f"/messages/{world.message_id}")["message"]["body"] == (
        "the secret plan"
    )
    assert world.bob.ok("GET", f"/messages/{world.delivery_id}")["delivery"]["id"] == (
        world.delivery_id
    )
    acked = world.bob.ok("POST", "/acks", json={"ids": [world.delivery_id]})
    assert acked["acknowledged"] == [world.delivery_id]


def test_sender_cannot_read_recipients_delivery_by_id(api: Api, world: World) -> None:
    """Alice sent the message, but the delivery id is bob's copy: not hers to name."""
    real = world.alice.call("POST", f"/deliveries/{world.delivery_id}/received")
    fake_id = fake_like(world.delivery_id)
    fake = world.alice.call("POST", f"/deliveries/{fake_id}/received")
    assert_same_not_found(real, world.delivery_id, fake, fake_id, "received")
    acked = world.alice.ok("POST", "/acks", json={"ids": [world.delivery_id]})
    assert acked["not_found"] == [world.delivery_id]
    assert_untouched(api, world)


def test_outsider_probes_create_nothing(api: Api, world: World, database: Database) -> None:
    def counts() -> tuple[int, int, int]:
        with database.engine.connect() as conn:
            return (
                conn.execute(select(func.count()).select_from(Message)).scalar_one(),
                conn.execute(select(func.count()).select_from(Delivery)).scalar_one(),
                conn.execute(select(func.count()).select_from(Participant)).scalar_one(),
            )

    before = counts()
    agent_probes(world.carol, world)
    ack_probe(world.carol, world)
    assert counts() == before


# --- another workspace's operator ------------------------------------------------------------


def test_other_workspace_operator_gets_identical_404s(
    api: Api, other_api: Api, world: World
) -> None:
    agent_id, fake_agent = world.alice_id, fake_like(world.alice_id)
    thread, fake_thread = world.thread_id, fake_like(world.thread_id)
    delivery, fake_delivery = world.delivery_id, fake_like(world.delivery_id)
    message, fake_message = world.message_id, fake_like(world.message_id)
    probe(other_api, "GET", "/agents/{id}", agent_id, fake_agent)
    probe(other_api, "GET", "/agents/{id}", "alice", "zelda")
    probe(other_api, "POST", "/agents/{id}/archive", agent_id, fake_agent)
    probe(other_api, "POST", "/agents/{id}/archive", "bob", "zelda")
    probe(other_api, "GET", "/threads/{id}", thread, fake_thread)
    probe(other_api, "GET", "/threads/{id}/messages", thread, fake_thread)
    probe(other_api, "POST", "/threads/{id}/messages", thread, fake_thread, json={"body": "hi"})
    probe(other_api, "POST", "/threads/{id}/close", thread, fake_thread)
    probe(other_api, "POST", "/threads/{id}/close/dismiss", thread, fake_thread)
    probe(other_api, "GET", "/deliveries/{id}", delivery, fake_delivery)
    probe(other_api, "GET", "/messages/{id}", message, fake_message)
    assert_untouched(api, world)
    assert {a["status"] for a in api.ok("GET", "/agents")["items"]} == {"active"}


def test_other_workspace_operator_cannot_add_participants(
    api: Api, other_api: Api, world: World
) -> None:
    other_api.agent("zoe")
    probe(
        other_api,
        "POST",
        "/threads/{id}/participants",
        world.thread_id,
        fake_like(world.thread_id),
        json={"username": "zoe"},
    )
    assert_untouched(api, world)


def test_other_workspace_operator_cannot_close_close_requested_thread(
    api: Api, other_api: Api, world: World
) -> None:
    world.alice.ok("POST", f"/threads/{world.thread_id}/close-request", 202)
    fake = fake_like(world.thread_id)
    probe(other_api, "POST", "/threads/{id}/close", world.thread_id, fake)
    probe(other_api, "POST", "/threads/{id}/close/dismiss", world.thread_id, fake)
    assert api.ok("GET", f"/threads/{world.thread_id}")["status"] == "close_requested"


def test_other_workspace_lists_show_nothing_of_the_first(
    api: Api, other_api: Api, world: World
) -> None:
    assert other_api.ok("GET", "/agents")["items"] == []
    assert other_api.ok("GET", "/threads")["items"] == []
    for status in ("open", "close_requested", "closed"):
        assert other_api.ok("GET", "/threads", params={"status": status})["items"] == []
    assert other_api.ok("GET", "/deliveries")["items"] == []
    for params in (
        {"agent": "bob"},
        {"agent": world.alice_id},
        {"thread": world.thread_id},
        {"state": "accepted"},
    ):
        assert other_api.ok("GET", "/deliveries", params=params)["items"] == [], params
    assert other_api.ok("GET", "/operator/inbox")["items"] == []
    zoe = other_api.agent("zoe")
    other_api.agent("yann")
    assert sorted(i["username"] for i in zoe.ok("GET", "/directory")["items"]) == [
        "operator",
        "yann",
    ]
    assert zoe.ok("GET", "/directory", params={"query": "ali"})["items"] == []
    assert zoe.ok("GET", "/threads")["items"] == []
    assert zoe.inbox() == {
        "items": [],
        "returned": 0,
        "waiting": 0,
        "more": False,
        "next_cursor": None,
    }
    # ...and the first workspace does not see the second.
    assert sorted(a["username"] for a in api.ok("GET", "/agents")["items"]) == [
        "alice",
        "bob",
        "carol",
    ]
    assert "zoe" not in [i["username"] for i in world.alice.ok("GET", "/directory")["items"]]


def test_operator_inbox_is_per_workspace(api: Api, other_api: Api) -> None:
    alice = api.agent("alice")
    thread = alice.open_thread("For the boss", ["operator"])
    alice.send(thread["id"], "ping the operator")
    assert [i["sender"] for i in api.ok("GET", "/operator/inbox")["items"]] == ["alice"]
    assert other_api.ok("GET", "/operator/inbox")["items"] == []


# --- another workspace's agent ---------------------------------------------------------------


def test_other_workspace_agent_gets_identical_404s(api: Api, other_api: Api, world: World) -> None:
    zoe = other_api.agent("zoe")
    other_api.agent("yann")
    zoe.open_thread("Zoe's own", ["yann"])
    agent_probes(zoe, world)
    ack_probe(zoe, world)
    assert_untouched(api, world)


def test_other_workspace_agent_cannot_address_first_workspace_usernames(
    api: Api, other_api: Api, world: World
) -> None:
    zoe = other_api.agent("zoe")
    real = zoe.post("/threads", json={"title": "Reach out", "participants": ["alice"]})
    fake = zoe.post("/threads", json={"title": "Reach out", "participants": ["zelda"]})
    assert real.status_code == fake.status_code == 422, (real.text, fake.text)
    assert real.json()["error"]["code"] == fake.json()["error"]["code"] == "validation_error"
    assert real.json()["error"]["message"].replace("alice", "<name>") == fake.json()["error"][
        "message"
    ].replace("zelda", "<name>")
    assert real.json()["error"].get("field") == "participants"
    other_api.agent("zack")
    own = zoe.open_thread("Own", ["zack"])
    response = zoe.post(f"/threads/{own['id']}/participants", json={"username": "bob"})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "username"
    assert api.ok("GET", "/agents/bob")["unread"] == 1


def test_key_of_one_workspace_is_not_operator_of_another(
    api: Api, other_api: Api, world: World
) -> None:
    """Operator tokens are per workspace: each sees only its own agents."""
    assert {a["username"] for a in api.ok("GET", "/agents")["items"]} == {"alice", "bob", "carol"}
    other_api.agent("zoe")
    assert {a["username"] for a in other_api.ok("GET", "/agents")["items"]} == {"zoe"}


def test_second_workspace_may_register_the_same_username(api: Api, other_api: Api) -> None:
    first = api.ok("POST", "/agents", 201, json={"name": "alice"})
    second = other_api.ok("POST", "/agents", 201, json={"name": "alice"})
    assert first["id"] != second["id"]
    assert first["api_key"] != second["api_key"]
    one = Caller(api.client, first["api_key"], "alice").ok("GET", "/me")
    two = Caller(other_api.client, second["api_key"], "alice").ok("GET", "/me")
    assert (one["id"], two["id"]) == (first["id"], second["id"])
    assert api.ok("GET", "/agents/alice")["id"] == first["id"]
    assert other_api.ok("GET", "/agents/alice")["id"] == second["id"]
    # Archiving one leaves the other alone.
    api.ok("POST", "/agents/alice/archive")
    assert other_api.ok("GET", "/agents/alice")["status"] == "active"
    Caller(other_api.client, second["api_key"], "alice").ok("GET", "/me")


def test_same_username_in_two_workspaces_keeps_mail_apart(api: Api, other_api: Api) -> None:
    alice_one = api.agent("alice")
    bob_one = api.agent("bob")
    alice_two = other_api.agent("alice")
    bob_two = other_api.agent("bob")
    thread = alice_one.open_thread("Workspace one", ["bob"])
    alice_one.send(thread["id"], "for bob in workspace one")
    assert [i["summary"] for i in bob_one.inbox()["items"]] == ["for bob in workspace one"]
    assert bob_two.inbox()["items"] == []
    assert alice_two.ok("GET", "/threads")["items"] == []
