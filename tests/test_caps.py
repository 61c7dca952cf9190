"""Caps and the send rate limit (agents-and-governance.md §3): 429 rate_limited with Retry-After,
a sentence naming the cap, nothing stored; on every send path; held with two web processes."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, text

from inbots.config import Settings
from inbots.db.engine import Database
from inbots.db.uow import unit_of_work
from inbots.models.deliveries import Delivery
from inbots.models.messages import Message
from inbots.models.threads import Thread
from tests.conftest import free_port, new_workspace
from tests.helpers import Api, Caller
from tests.mcp_client import over_bridge, over_http, run, text_of
from tests.processes import clean_env, inbots_executable

CAPS = {"cap_per_recipient": 5, "cap_per_pair": 3}
RATE = {"rate_limit_per_minute": 1, "rate_limit_burst": 3}


def refused(response: httpx.Response, *fragments: str) -> str:
    """A 429 rate_limited answer with a Retry-After and a sentence naming ``fragments``."""
    assert response.status_code == 429, (response.status_code, response.text)
    error = response.json()["error"]
    assert error["code"] == "rate_limited"
    assert int(response.headers["Retry-After"]) >= 1
    for fragment in fragments:
        assert fragment in error["message"], error["message"]
    return str(error["message"])


def counts(database: Database) -> tuple[int, int, int]:
    """(threads, messages, deliveries) in the database."""
    with unit_of_work(database, readonly=True) as uow:
        return (
            uow.session.scalar(select(func.count()).select_from(Thread)) or 0,
            uow.session.scalar(select(func.count()).select_from(Message)) or 0,
            uow.session.scalar(select(func.count()).select_from(Delivery)) or 0,
        )


def post(caller: Caller, thread_id: str, body: str, **headers: str) -> httpx.Response:
    return caller.post(f"/threads/{thread_id}/messages", json={"body": body}, headers=headers)


def test_limits_lists_the_caps_and_the_rate_limit(api: Api) -> None:
    limits = api.ok("GET", "/limits")
    assert limits["cap_per_recipient"] == 2_000
    assert limits["cap_per_pair"] == 500
    assert limits["rate_limit_burst"] == 30
    assert limits["ttl_min_seconds"] == 300
    assert limits["ttl_max_seconds"] == 604_800
    assert limits["retention_days"] == 0


@pytest.mark.parametrize("settings_overrides", [{**CAPS, "rate_limit_per_minute": 0}])
def test_the_pair_cap_refuses_a_sender_and_stores_nothing(api: Api, database: Database) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    thread = alice.open_thread("Pair", ["bob"])["id"]
    for n in range(3):
        alice.send(thread, f"m{n}")
    before = counts(database)
    message = refused(post(alice, thread, "one too many"), "bob", "INBOTS_CAP_PER_PAIR", "3")
    assert "acknowledges" in message
    assert counts(database) == before
    assert bob.inbox()["waiting"] == 3
    # Another sender still gets through (up to the recipient's cap) ...
    carol = api.agent("carol")
    other = carol.open_thread("Other", ["bob"])["id"]
    carol.send(other, "from carol")
    # ... and an acknowledgement frees a place for alice.
    first = bob.inbox()["items"][0]["delivery_id"]
    bob.ok("POST", "/acks", json={"ids": [first], "outcome": "done"})
    alice.send(thread, "now it fits")


@pytest.mark.parametrize("settings_overrides", [{**CAPS, "rate_limit_per_minute": 0}])
def test_closing_a_thread_frees_its_places(api: Api) -> None:
    """Mail in a closed thread leaves the inbox and cannot be acknowledged: it stops counting."""
    alice = api.agent("alice")
    api.agent("bob")
    first = alice.open_thread("First", ["bob"])["id"]
    for n in range(3):
        alice.send(first, f"m{n}")
    second = alice.open_thread("Second", ["bob"])["id"]
    refused(post(alice, second, "full"), "INBOTS_CAP_PER_PAIR")
    api.ok("POST", f"/threads/{first}/close")
    alice.send(second, "room again")


def held_by(database: Database, message_id: str) -> set[str]:
    """Whom a message has a delivery for (their agent ids)."""
    with unit_of_work(database, readonly=True) as uow:
        return set(
            uow.session.scalars(
                select(Delivery.recipient_id).where(Delivery.message_id == message_id)
            )
        )


@pytest.mark.parametrize("settings_overrides", [{**CAPS, "rate_limit_per_minute": 0}])
def test_a_send_to_several_skips_a_full_inbox_and_says_so(api: Api, database: Database) -> None:
    """A broadcast, a direct send to several and a post to a thread of several leave out a
    recipient at a cap (``skipped``) and reach the others; a send whose every recipient is at
    a cap is refused whole, as a send to one is."""
    senders = [api.agent(f"sender-{n}") for n in range(3)]
    full = api.agent("full")
    roomy = api.agent("roomy")
    for n, sender in enumerate(senders):
        thread = sender.open_thread(f"T{n}", ["full"])["id"]
        for m in range(2 if n < 2 else 1):
            sender.send(thread, f"{n}.{m}")
    assert full.inbox()["waiting"] == 5  # its cap
    ids = {a["username"]: a["id"] for a in api.ok("GET", "/agents")["items"]}

    sent = senders[2].ok("POST", "/messages", 201, json={"to": ["*"], "body": "to everybody"})
    assert sent["skipped"] == [{"recipient": "full", "reason": "inbox_full"}]
    reached = {d["recipient"] for d in sent["deliveries"]}
    assert reached == {"sender-0", "sender-1", "roomy"}
    assert held_by(database, sent["message"]["id"]) == {ids[n] for n in reached}
    assert full.inbox()["waiting"] == 5 and roomy.inbox()["waiting"] == 1
    # The operator's broadcast too.
    by_operator = api.ok("POST", "/messages", 201, json={"to": ["*"], "body": "from the desk"})
    assert by_operator["skipped"] == [{"recipient": "full", "reason": "inbox_full"}]
    assert "full" not in {d["recipient"] for d in by_operator["deliveries"]}
    # A post to a thread of several.
    thread = senders[2].open_thread("Two", ["full", "roomy"])["id"]
    posted = senders[2].send(thread, "to the thread")
    assert posted["skipped"] == [{"recipient": "full", "reason": "inbox_full"}]
    assert [d["recipient"] for d in posted["deliveries"]] == ["roomy"]
    # Nobody left to send to: refused whole, nothing stored.
    before = counts(database)
    refused(post(senders[2], senders[2].open_thread("Full", ["full"])["id"], "x"), "full's inbox")
    assert counts(database)[1:] == before[1:]  # the new thread only: no message, no delivery
    # The skipped places were never counted: one acknowledgement frees one place for one send.
    first = full.inbox()["items"][0]["delivery_id"]
    full.ok("POST", "/acks", json={"ids": [first], "outcome": "done"})
    senders[2].ok("POST", "/messages", 201, json={"to": ["full"], "body": "one place"})
    refused(senders[2].post("/messages", json={"to": ["full"], "body": "no place"}), "full")


@pytest.mark.parametrize("settings_overrides", [{**CAPS, "rate_limit_per_minute": 0}])
def test_a_broadcast_skips_a_recipient_at_the_pair_cap(api: Api, server: Any) -> None:
    """``pair_full``: the recipient holds the most one sender may leave it; the MCP answer
    names whom it left out and why."""
    alice = api.agent("alice")
    api.agent("bob")
    api.agent("carol")
    thread = alice.open_thread("Pair", ["bob"])["id"]
    for n in range(3):
        alice.send(thread, f"m{n}")
    sent = alice.ok("POST", "/messages", 201, json={"to": ["bob", "carol"], "body": "both"})
    assert sent["skipped"] == [{"recipient": "bob", "reason": "pair_full"}]
    assert [d["recipient"] for d in sent["deliveries"]] == ["carol"]
    only = alice.ok("POST", "/messages", 201, json={"to": ["carol"], "body": "one"})
    assert "skipped" not in only  # the key is there only when someone was left out

    async def scenario() -> str:
        async with over_http(server.url, alice.token) as tools:
            result = await tools.call("send_message", to=["bob", "carol"], body="again")
            assert not result.is_error, text_of(result)
            return text_of(result)

    text = run(scenario)
    assert "Not sent to bob (holds the most unacknowledged messages" in text, text
    assert "one delivery each for carol" in text, text


@pytest.mark.parametrize("settings_overrides", [{**RATE, "cap_per_recipient": 0}])
def test_the_rate_limit_refuses_past_the_burst_but_not_a_replay(
    api: Api, database: Database
) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    thread = api.open_thread("Fast", ["alice", "bob"])["id"]  # the operator's: no token
    first = post(alice, thread, "keyed", **{"Idempotency-Key": "k-1"})
    assert first.status_code == 201
    alice.send(thread, "two")
    alice.send(thread, "three")
    before = counts(database)
    response = post(alice, thread, "four")
    message = refused(response, "1 writes a minute", "bursts of up to 3")
    assert int(response.headers["Retry-After"]) <= 60
    assert "nothing of this one was stored" in message
    refused(alice.post("/messages", json={"to": ["bob"], "body": "direct"}), "a minute")
    assert counts(database) == before
    # An idempotent replay of an accepted send is answered, not refused, and spends nothing.
    again = post(alice, thread, "keyed", **{"Idempotency-Key": "k-1"})
    assert again.status_code in (200, 201), again.text
    assert again.json()["duplicate"] is True
    assert again.json()["message"]["id"] == first.json()["message"]["id"]
    # The operator's own sends are not rate-limited; another agent has its own bucket.
    for n in range(5):
        api.send(thread, f"operator {n}")
    carol = api.agent("carol")
    other = carol.open_thread("Carol's", ["alice"])["id"]  # a token of carol's
    for n in range(2):
        carol.send(other, f"carol {n}")


@pytest.mark.parametrize("settings_overrides", [{**CAPS, **RATE, "rate_limit_burst": 5}])
def test_send_message_over_mcp_is_refused_with_the_same_sentence(api: Api, server: Any) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    thread = api.open_thread("MCP", ["alice", "bob"])["id"]  # the operator's: no token
    for n in range(3):  # bob and the operator hold the most alice may leave them (the pair cap)
        alice.send(thread, f"m{n}")

    for connect in (over_http, over_bridge):  # /mcp, and inbots mcp's bridge over HTTP

        async def scenario(connect: Any = connect) -> tuple[str, str, dict[str, Any]]:
            async with connect(server.url, alice.token) as tools:  # a new session: a token
                result = await tools.call("send_message", thread_id=thread, body="one more")
                code, text = await tools.error("send_message", thread_id=thread, body="more")
                assert isinstance(result.structured_content, dict)
                return code, text, result.structured_content["error"]

        code, text, error = run(scenario)
        assert code == "rate_limited", connect
        assert "a minute" in text or "INBOTS_CAP_PER_PAIR" in text
        assert "Retry-After" not in text  # a header the tool's caller never sees
        # ... so the wait is in the structured error, in whole seconds as Retry-After says.
        assert isinstance(error["retry_after"], int) and error["retry_after"] >= 1, error
    http = alice.post(f"/threads/{thread}/messages", json={"body": "over HTTP"})
    assert http.status_code == 429 and int(http.headers["Retry-After"]) >= 1


@pytest.mark.parametrize(
    "settings_overrides", [{"cap_per_pair": 0, "cap_per_recipient": 4, "rate_limit_burst": 0}]
)
def test_a_cap_or_limit_of_zero_is_off(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("Caps", ["bob"])["id"]
    for n in range(4):  # no pair cap (0), no rate limit (burst 0): only the recipient's cap
        alice.send(thread, f"{n}")
    refused(post(alice, thread, "5"), "INBOTS_CAP_PER_RECIPIENT")


# Two web processes --------------------------------------------------------------------------


@contextmanager
def two_web_processes(settings: Settings, tmp_path: Path, **limits: int) -> Iterator[str]:
    """``inbots web --workers 2`` on the test's database, with ``limits`` as INBOTS_ settings."""
    port = free_port()
    env = clean_env(
        tmp_path,
        INBOTS_DATABASE_URL=settings.database_url,
        INBOTS_LOG_LEVEL="WARNING",
        **{f"INBOTS_{name.upper()}": str(value) for name, value in limits.items()},
    )
    log = (tmp_path / f"web-{port}.log").open("w")
    process = subprocess.Popen(
        [inbots_executable(), "web", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None, (tmp_path / f"web-{port}.log").read_text()
            assert time.monotonic() < deadline, "inbots web did not answer /readyz"
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def race(calls: list[Callable[[], httpx.Response]]) -> list[httpx.Response]:
    """Run the calls at once (one thread each, released together)."""
    gate = threading.Barrier(len(calls))
    answers: list[httpx.Response | None] = [None] * len(calls)

    def one(index: int) -> None:
        gate.wait()
        answers[index] = calls[index]()

    workers = [threading.Thread(target=one, args=(i,)) for i in range(len(calls))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert all(answer is not None for answer in answers)
    return [answer for answer in answers if answer is not None]


def _accepted(answers: list[httpx.Response]) -> int:
    for answer in answers:
        assert answer.status_code in (201, 429), (answer.status_code, answer.text)
        if answer.status_code == 429:
            refused(answer)
    return sum(answer.status_code == 201 for answer in answers)


def _register(client: httpx.Client, token: str, *names: str) -> dict[str, str]:
    """Each name registered as an agent by the operator: name -> its API key."""
    keys = {}
    for name in names:
        made = client.post(
            "/v1/agents", json={"name": name}, headers={"Authorization": f"Bearer {token}"}
        )
        assert made.status_code == 201, made.text
        keys[name] = made.json()["api_key"]
    return keys


def _direct(client: httpx.Client, key: str, to: str, body: str) -> Callable[[], httpx.Response]:
    headers = {"Authorization": f"Bearer {key}"}
    return lambda: client.post("/v1/messages", json={"to": [to], "body": body}, headers=headers)


def test_caps_hold_with_two_web_processes_and_concurrent_senders(
    settings: Settings, database: Database, tmp_path: Path
) -> None:
    """The pair cap (4) and the recipient cap (10) with 2 uvicorn workers and 12 / 30 concurrent
    direct sends: no more accepted than the cap, every refusal a 429 with Retry-After, nothing
    half-stored (each accepted send is one thread, one message, one delivery; a refused one
    leaves none)."""
    token = new_workspace(database)
    with (
        two_web_processes(
            settings, tmp_path, cap_per_recipient=10, cap_per_pair=4, rate_limit_per_minute=0
        ) as url,
        httpx.Client(base_url=url, timeout=60, limits=httpx.Limits(max_connections=64)) as client,
    ):
        keys = _register(client, token, "target", *(f"sender-{n}" for n in range(5)))

        pair = race([_direct(client, keys["sender-0"], "target", f"pair {n}") for n in range(12)])
        assert _accepted(pair) == 4
        many = [
            _direct(client, keys[f"sender-{s}"], "target", f"{s}.{n}")
            for s in range(1, 5)
            for n in range(8)
        ]
        answers = race(many)
        assert _accepted(answers) == 6  # 10 in all, 4 of them from sender-0
        assert [a.headers.get("Retry-After") for a in answers if a.status_code == 429]

    threads, messages, deliveries = counts(database)
    assert (threads, messages, deliveries) == (10, 10, 10)
    with unit_of_work(database, readonly=True) as uow:
        per_sender = dict(
            uow.session.execute(
                select(Delivery.sender_id, func.count()).group_by(Delivery.sender_id)
            ).all()
        )
    assert all(count <= 4 for count in per_sender.values()), per_sender


def test_the_rate_limit_holds_with_two_web_processes(
    settings: Settings, database: Database, tmp_path: Path
) -> None:
    """One agent, a burst of 5, 16 concurrent sends across two processes: 5 accepted."""
    token = new_workspace(database)
    with (
        two_web_processes(
            settings, tmp_path, rate_limit_per_minute=1, rate_limit_burst=5, cap_per_recipient=0
        ) as url,
        httpx.Client(base_url=url, timeout=60, limits=httpx.Limits(max_connections=64)) as client,
    ):
        keys = _register(client, token, "fast", "reader")
        answers = race([_direct(client, keys["fast"], "reader", f"n{n}") for n in range(16)])
        assert _accepted(answers) == 5
    assert counts(database) == (5, 5, 5)


@pytest.mark.parametrize("backend", ["postgres"])  # SQLite has one writer at a time: no margin
def test_the_recipient_cap_is_exact_when_many_senders_start_far_from_it(
    settings: Settings, database: Database, tmp_path: Path
) -> None:
    """Far from its cap a recipient is locked shared (sends from many senders side by side),
    near it exclusive: a cap of twice PostgreSQL's max_connections plus 40 lets the first sends
    through the shared path. 2 web processes, 30 senders racing cap + 60 sends: never more
    accepted than the cap, and sending on one by one reaches it exactly."""
    with unit_of_work(database, readonly=True) as uow:
        margin = int(uow.session.execute(text("SHOW max_connections")).scalar_one())
    cap = 2 * margin + 40
    token = new_workspace(database)
    with (
        two_web_processes(
            settings, tmp_path, cap_per_recipient=cap, cap_per_pair=0, rate_limit_per_minute=0
        ) as url,
        httpx.Client(base_url=url, timeout=60, limits=httpx.Limits(max_connections=64)) as client,
    ):
        keys = _register(client, token, "target", *(f"sender-{n}" for n in range(30)))
        calls = [
            _direct(client, keys[f"sender-{n % 30}"], "target", f"wave {n}")
            for n in range(cap + 60)
        ]
        accepted = sum(_accepted(race(calls[i : i + 37])) for i in range(0, len(calls), 37))
        assert accepted <= cap
        assert counts(database)[2] == accepted
        sent = accepted
        while True:
            answer = _direct(client, keys[f"sender-{sent % 30}"], "target", f"one {sent}")()
            if answer.status_code == 429:
                refused(answer, "inbox is full", str(cap))
                break
            assert answer.status_code == 201, answer.text
            sent += 1
            assert sent <= cap
    assert sent == cap
    assert counts(database)[2] == cap
