"""Every agent write spends from one token bucket (agents-and-governance.md §3; issue 25): a
send, opening a thread, adding a participant, a close request, the brief, a new session, keys and
the webhook. Refused: 429 rate_limited with Retry-After, nothing stored, no token spent. A send
costs one token plus one per recipient beyond the first ten. Acknowledgements and working
heartbeats spend nothing; the operator is never limited."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from inbots.db.engine import Database
from inbots.db.uow import unit_of_work
from inbots.models.messages import SendBucket
from inbots.models.threads import Participant, Thread
from tests.helpers import Api, Caller
from tests.mcp_client import over_http, run

# A bucket of two that refills one token a minute: the third write within a minute is refused.
small = pytest.mark.parametrize(
    "settings_overrides", [{"rate_limit_per_minute": 1, "rate_limit_burst": 2}]
)
# A loopback URL nothing listens on: private targets are allowed in tests and nothing is sent.
IDLE_URL = "http://127.0.0.1:9/hook"


def refused(response: httpx.Response) -> str:
    """The rate limit's 429: rate_limited, a Retry-After within the minute a token takes."""
    assert response.status_code == 429, (response.status_code, response.text)
    error = response.json()["error"]
    assert error["code"] == "rate_limited"
    assert 1 <= int(response.headers["Retry-After"]) <= 60, response.headers
    assert "writes a minute" in error["message"], error
    assert "nothing of this one was stored" in error["message"], error
    return str(error["message"])


def bucket(database: Database, agent: Caller) -> tuple[float, float]:
    """The agent's bucket row as stored: (tokens, stamp)."""
    agent_id = agent.ok("GET", "/me")["id"]
    with unit_of_work(database, readonly=True) as uow:
        row = uow.session.get_one(SendBucket, agent_id)
        return row.tokens, row.stamp


def threads(database: Database) -> int:
    with unit_of_work(database, readonly=True) as uow:
        return uow.session.scalar(select(func.count()).select_from(Thread)) or 0


@small
def test_thread_opening_answers_429_with_retry_after_under_a_small_rate_limit(
    api: Api, database: Database
) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    alice.open_thread("One", ["bob"])
    alice.open_thread("Two", ["*"], goal="g" * 2_000)
    before, tokens = threads(database), bucket(database, alice)
    refused(alice.post("/threads", json={"title": "Three", "participants": ["bob"]}))
    assert threads(database) == before  # nothing stored
    assert bucket(database, alice) == tokens  # and no token spent: the row is as it was
    # Another agent has a bucket of its own; the operator has none.
    api.agent("carol").open_thread("Carol's", ["bob"])
    for n in range(4):
        api.open_thread(f"Operator {n}", ["alice"])


@small
def test_sends_and_other_writes_share_one_bucket(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("Shared", ["bob"])["id"]
    alice.send(thread, "one")
    refused(alice.post(f"/threads/{thread}/messages", json={"body": "two"}))


@small
def test_adding_participants_is_rate_limited(api: Api, database: Database) -> None:
    alice = api.agent("alice")
    for name in ("bob", "carol", "dave"):
        api.agent(name)
    thread = api.open_thread("Team", ["alice"])["id"]
    alice.ok("POST", f"/threads/{thread}/participants", json={"username": "bob"})
    alice.ok("POST", f"/threads/{thread}/participants", json={"username": "bob"})  # a repeat
    refused(alice.post(f"/threads/{thread}/participants", json={"username": "dave"}))
    with unit_of_work(database, readonly=True) as uow:
        count = uow.session.scalar(
            select(func.count()).select_from(Participant).where(Participant.thread_id == thread)
        )
    assert count == 3  # the operator, alice, bob: not dave
    api.ok("POST", f"/threads/{thread}/participants", json={"username": "carol"})


@small
def test_close_requests_are_rate_limited(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    first = alice.open_thread("First", ["bob"])["id"]
    alice.open_thread("Second", ["bob"])
    refused(alice.post(f"/threads/{first}/close-request"))
    assert alice.ok("GET", f"/threads/{first}")["status"] == "open"


@small
def test_setting_the_brief_is_rate_limited(api: Api) -> None:
    alice = api.agent("alice")
    alice.ok("PUT", "/me/brief", json={"brief": "first"})
    alice.ok("PUT", "/me/brief", json={"brief": "second"})
    refused(alice.call("PUT", "/me/brief", json={"brief": "third"}))
    assert alice.ok("GET", "/agents/alice/brief")["brief"] == "second"


@small
def test_a_new_session_is_rate_limited_and_a_known_one_is_not(api: Api) -> None:
    alice = api.agent("alice")
    alice.ok("GET", "/inbox", headers={"X-Inbots-Session": "s1"})
    alice.ok("GET", "/inbox", headers={"X-Inbots-Session": "s2"})
    refused(alice.get("/inbox", headers={"X-Inbots-Session": "s3"}))
    alice.ok("GET", "/inbox", headers={"X-Inbots-Session": "s1"})  # seen before: no new row
    alice.ok("GET", "/inbox")  # no session at all
    labels = {s["label"] for s in alice.ok("GET", "/me/sessions")["items"]}
    assert labels == {"s1", "s2"}


@small
def test_issuing_and_revoking_keys_is_rate_limited(api: Api) -> None:
    alice = api.agent("alice")
    first = alice.ok("POST", "/me/keys", 201, json={"label": "one"})
    alice.ok("POST", "/me/keys", 201, json={"label": "two"})
    refused(alice.post("/me/keys", json={"label": "three"}))
    refused(alice.call("DELETE", f"/me/keys/{first['id']}"))
    labels = [k["label"] for k in alice.ok("GET", "/me/keys")["items"]]
    assert sorted(labels, key=str) == sorted(["default", "one", "two"], key=str), labels
    # The operator issues and revokes an agent's keys without limit.
    api.ok("DELETE", f"/agents/alice/keys/{first['id']}", 204)
    api.ok("POST", "/agents/alice/keys", 201, json={"label": "by the operator"})


@small
def test_webhook_changes_are_rate_limited(api: Api) -> None:
    alice = api.agent("alice")
    alice.ok("PUT", "/me/webhook", json={"url": IDLE_URL})
    secret = alice.ok("POST", "/me/webhook/rotate")["signing_secret"]
    refused(alice.call("DELETE", "/me/webhook"))
    refused(alice.call("PUT", "/me/webhook", json={"url": IDLE_URL + "/other"}))
    refused(alice.post("/me/webhook/rotate"))
    now = alice.ok("GET", "/me/webhook")
    assert now["url"] == IDLE_URL and now["signing_secret"] == secret


@small
def test_acknowledging_and_working_spend_nothing(api: Api, database: Database) -> None:
    """Heartbeats are frequent by design and an acknowledgement is how an inbox empties: with
    the bucket empty they still go through, and leave it as it was."""
    alice = api.agent("alice")
    api.agent("bob")
    thread = api.open_thread("Work", ["alice"])["id"]
    first, second = (api.send(thread, body)["deliveries"][0]["id"] for body in ("a", "b"))
    alice.open_thread("Drain 1", ["bob"])
    alice.open_thread("Drain 2", ["bob"])
    tokens = bucket(database, alice)
    for _ in range(3):
        alice.ok("POST", f"/deliveries/{first}/working", json={"note": "on it"})
    alice.ok("POST", f"/deliveries/{second}/received")
    alice.ok("POST", "/acks", json={"ids": [first, second], "outcome": "done"})
    assert bucket(database, alice) == tokens
    refused(alice.post("/threads", json={"title": "Still empty", "participants": ["bob"]}))


@small
def test_open_thread_over_mcp_is_refused_with_retry_after(api: Api, server: Any) -> None:
    """The MCP tools get the same refusal as a tool error, with ``retry_after`` in seconds; a
    new MCP session is itself a write (a session row)."""
    alice = api.agent("alice")
    api.agent("bob")

    async def scenario() -> tuple[str, str, Any]:
        async with over_http(server.url, alice.token) as tools:  # the session: one token
            await tools.ok("open_thread", title="Over MCP", participants=["bob"])
            result = await tools.call("open_thread", title="Again", participants=["bob"])
            code, text = await tools.error("open_thread", title="Again", participants=["bob"])
            assert isinstance(result.structured_content, dict)
            return code, text, result.structured_content["error"].get("retry_after")

    code, text, retry_after = run(scenario)
    assert code == "rate_limited"
    assert "writes a minute" in text and "Retry-After" not in text, text
    assert isinstance(retry_after, int) and 1 <= retry_after <= 60


# The cost of a send to many -----------------------------------------------------------------


@pytest.mark.parametrize(
    "settings_overrides", [{"rate_limit_per_minute": 1, "rate_limit_burst": 3}]
)
def test_a_send_costs_a_token_per_recipient_beyond_the_first_ten(
    api: Api, database: Database
) -> None:
    many = [f"r{n:02}" for n in range(12)]
    for name in many:
        api.agent(name)
    alice, bob, carol, dave = (api.agent(n) for n in ("alice", "bob", "carol", "dave"))
    # Ten recipients: one token each send; a bucket of three takes three such sends.
    for n in range(3):
        alice.ok("POST", "/messages", 201, json={"to": many[:10], "body": f"ten {n}"})
    refused(alice.post("/messages", json={"to": many[:10], "body": "a fourth"}))
    # Twelve: three tokens (one, plus one for each of the two beyond ten), the whole bucket.
    bob.ok("POST", "/messages", 201, json={"to": many, "body": "twelve"})
    refused(bob.post("/messages", json={"to": ["alice"], "body": "one more"}))
    # Not enough left for twelve: 429 saying what it costs, and when it is allowed.
    carol.open_thread("One token", ["alice"])
    before = (threads(database), bucket(database, carol))
    response = carol.post("/messages", json={"to": many, "body": "twelve"})
    message = refused(response)
    assert "costs 3 tokens" in message and "beyond the first 10" in message, message
    assert (threads(database), bucket(database, carol)) == before
    # More than the bucket can ever hold (everyone: 15 others, 6 tokens): 422, not a wait.
    answer = dave.post("/messages", json={"to": ["*"], "body": "everybody"})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "validation_error" and "Retry-After" not in answer.headers
    assert "costs 6 tokens" in error["message"], error
    assert "INBOTS_RATE_LIMIT_BURST" in error["message"], error
    assert "at most 12 recipients" in error["message"], error
    assert threads(database) == before[0]
    # The operator's broadcast costs nothing.
    api.ok("POST", "/messages", 201, json={"to": ["*"], "body": "from the desk"})
