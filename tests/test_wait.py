"""The long-poll: GET /v1/inbox/wait?timeout=."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.conftest import ServerThread
from tests.helpers import Api, Caller, assert_error

# The inbox's keys, and the receipts of the caller's own mail (empty unless events=receipts).
WAIT_KEYS = {"items", "returned", "waiting", "more", "next_cursor", "receipts"}
EMPTY = {
    "items": [],
    "returned": 0,
    "waiting": 0,
    "more": False,
    "next_cursor": None,
    "receipts": [],
}


def listening(server: ServerThread) -> int:
    return int(server.app.state.dispatch.wakeups.listening())


def wait_until_listening(server: ServerThread, count: int, limit: float = 10.0) -> None:
    deadline = time.monotonic() + limit
    while listening(server) < count:
        assert time.monotonic() < deadline, f"only {listening(server)} of {count} waits listening"
        time.sleep(0.01)


def timed_wait(base_url: str, caller: Caller, timeout: str) -> tuple[httpx.Response, float]:
    """One wait on its own connection; returns the response and when it came back."""
    with httpx.Client(base_url=base_url, timeout=90) as client:
        response = client.get("/v1/inbox/wait", params={"timeout": timeout}, headers=caller.headers)
    return response, time.monotonic()


def pair(api: Api) -> tuple[Caller, Caller, dict[str, Any]]:
    sender = api.agent("sender")
    reader = api.agent("reader")
    thread = sender.open_thread("Watch the build", ["reader"])
    return sender, reader, thread


def test_wait_returns_immediately_when_unshown_mail_exists(api: Api) -> None:
    sender, reader, thread = pair(api)
    sent = sender.send(thread["id"], "already here")

    started = time.monotonic()
    body = reader.ok("GET", "/inbox/wait", params={"timeout": "10"})
    elapsed = time.monotonic() - started

    assert elapsed < 5.0  # not the 10 s timeout (room for a loaded machine)
    assert set(body) == WAIT_KEYS
    assert [i["message_id"] for i in body["items"]] == [sent["message"]["id"]]
    assert body["returned"] == 1 and body["waiting"] == 1 and body["more"] is False
    assert body["items"][0]["state"] == "delivered"
    receipt = api.delivery(sent["deliveries"][0]["id"])
    assert receipt["delivered_at"] is not None and receipt["fetched_at"] is None


def test_wait_returns_at_once_on_a_send_by_another_client(api: Api, server: ServerThread) -> None:
    sender, reader, thread = pair(api)
    with ThreadPoolExecutor(1) as pool:
        waiting: Future[tuple[httpx.Response, float]] = pool.submit(
            timed_wait, api.base_url, reader, "20"
        )
        wait_until_listening(server, 1)
        time.sleep(0.2)
        assert not waiting.done()
        send_started = time.monotonic()
        sent = sender.send(thread["id"], "wake up", kind="task")
        response, returned_at = waiting.result(timeout=10)

    # Woken by the send (its request included), far from the 20 s timeout; well under a second
    # on a quiet machine, allowed a few under a loaded test run.
    assert returned_at - send_started < 3.0
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == WAIT_KEYS
    (item,) = body["items"]
    assert item["message_id"] == sent["message"]["id"]
    assert item["kind"] == "task" and item["sender"] == "sender" and item["state"] == "delivered"
    assert body["returned"] == 1 and body["waiting"] == 1 and body["more"] is False
    assert listening(server) == 0


def test_wait_returns_empty_items_at_the_timeout(api: Api) -> None:
    reader = api.agent("reader")

    started = time.monotonic()
    body = reader.ok("GET", "/inbox/wait", params={"timeout": "1"})
    elapsed = time.monotonic() - started

    assert 0.9 <= elapsed < 3.0
    assert body == EMPTY


def test_wait_for_already_shown_mail_does_not_return_early(api: Api) -> None:
    sender, reader, thread = pair(api)
    sent = sender.send(thread["id"], "seen it")
    reader.inbox()  # shown: stamped delivered

    started = time.monotonic()
    body = reader.ok("GET", "/inbox/wait", params={"timeout": "1"})
    elapsed = time.monotonic() - started

    assert 0.9 <= elapsed < 3.0
    assert body == {
        "items": [],
        "returned": 0,
        "waiting": 1,
        "more": True,
        "next_cursor": None,
        "receipts": [],
    }
    assert api.delivery(sent["deliveries"][0]["id"])["fetched_at"] is None


def test_wait_answers_the_new_mail_behind_a_full_page_of_mail_already_shown(api: Api) -> None:
    """The wait's answer lists what it woke for. With a page's worth (50) of older mail already
    shown, the inbox's first page would not reach the new message: it would stay unshown, and
    every later wait would answer at once, again without it."""
    sender, reader, thread = pair(api)
    for i in range(50):
        sender.send(thread["id"], f"older {i}")
    assert reader.inbox()["returned"] == 50  # all shown
    new = sender.send(thread["id"], "the new one")

    body = reader.ok("GET", "/inbox/wait", params={"timeout": "5"})
    assert [i["message_id"] for i in body["items"]] == [new["message"]["id"]]
    assert body["returned"] == 1 and body["waiting"] == 51 and body["more"] is True
    assert api.delivery(new["deliveries"][0]["id"])["delivered_at"] is not None

    started = time.monotonic()
    again = reader.ok("GET", "/inbox/wait", params={"timeout": "1"})
    assert time.monotonic() - started >= 0.9, "the wait answered at once: nothing new had come"
    assert again == {
        "items": [],
        "returned": 0,
        "waiting": 51,
        "more": True,
        "next_cursor": None,
        "receipts": [],
    }


def test_wait_is_not_woken_by_mail_for_someone_else(api: Api, server: ServerThread) -> None:
    sender, reader, _ = pair(api)
    api.agent("other")
    elsewhere = sender.open_thread("Not the reader's", ["other"])
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(timed_wait, api.base_url, reader, "2")
        wait_until_listening(server, 1)
        started = time.monotonic()
        sender.send(elsewhere["id"], "for other only")
        response, returned_at = waiting.result(timeout=10)

    assert returned_at - started >= 1.0  # it ran to its timeout
    assert response.status_code == 200
    assert response.json() == EMPTY


def test_wait_is_not_woken_again_by_mail_already_shown_when_it_is_read(
    api: Api, server: ServerThread
) -> None:
    sender, reader, thread = pair(api)
    sent = sender.send(thread["id"], "seen it")
    reader.inbox()
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(timed_wait, api.base_url, reader, "2")
        wait_until_listening(server, 1)
        started = time.monotonic()
        # Activity on the shown delivery is not new mail.
        with httpx.Client(base_url=api.base_url) as client:
            other = Caller(client, reader.token, "reader")
            other.ok("GET", f"/messages/{sent['message']['id']}")
            other.ok("POST", f"/deliveries/{sent['deliveries'][0]['id']}/received")
        response, returned_at = waiting.result(timeout=10)

    assert returned_at - started >= 1.0
    assert response.json() == {
        "items": [],
        "returned": 0,
        "waiting": 1,
        "more": True,
        "next_cursor": None,
        "receipts": [],
    }


def test_wait_with_timeout_above_60_still_wakes_on_mail(api: Api, server: ServerThread) -> None:
    sender, reader, thread = pair(api)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(timed_wait, api.base_url, reader, "999")
        wait_until_listening(server, 1)
        send_started = time.monotonic()
        sent = sender.send(thread["id"], "capped, not an error")
        response, returned_at = waiting.result(timeout=10)

    # Woken by the send (its request included), far from the 20 s timeout; well under a second
    # on a quiet machine, allowed a few under a loaded test run.
    assert returned_at - send_started < 3.0
    assert response.status_code == 200, response.text
    assert [i["message_id"] for i in response.json()["items"]] == [sent["message"]["id"]]


@pytest.mark.parametrize(
    "settings_overrides", [{"wait_max_seconds": 1.5, "wait_default_seconds": 1.0}]
)
def test_wait_timeout_above_the_maximum_is_capped(api: Api) -> None:
    reader = api.agent("reader")

    started = time.monotonic()
    body = reader.ok("GET", "/inbox/wait", params={"timeout": "999"})
    elapsed = time.monotonic() - started

    assert 1.4 <= elapsed < 3.5  # the 1.5 s maximum, not 999 s and not the 1 s default
    assert body == EMPTY


@pytest.mark.parametrize("settings_overrides", [{"wait_default_seconds": 2.0}])
def test_wait_with_an_empty_timeout_uses_the_default(api: Api) -> None:
    reader = api.agent("reader")

    started = time.monotonic()
    body = reader.ok("GET", "/inbox/wait", params={"timeout": ""})
    elapsed = time.monotonic() - started

    assert 1.9 <= elapsed < 8.0  # the 2 s default (not the 1 s floor, nor 30 s or 60 s)
    assert body == EMPTY


@pytest.mark.parametrize("timeout", ["abc", "nan", "soon", "30s"])
def test_wait_timeout_that_is_no_number_is_refused_naming_timeout(api: Api, timeout: str) -> None:
    """Issue 25: ``timeout=abc`` silently waited 30 s; it is a 422 at once, naming the field."""
    reader = api.agent("reader")

    started = time.monotonic()
    response = reader.get("/inbox/wait", params={"timeout": timeout})

    assert time.monotonic() - started < 0.9  # refused, not waited out
    error = assert_error(response, 422, "validation_error", field="timeout")
    assert repr(timeout) in error["message"]


@pytest.mark.parametrize("settings_overrides", [{"wait_default_seconds": 2.0}])
def test_wait_without_timeout_uses_the_default(api: Api) -> None:
    reader = api.agent("reader")

    started = time.monotonic()
    body = reader.ok("GET", "/inbox/wait")
    elapsed = time.monotonic() - started

    assert 1.9 <= elapsed < 8.0
    assert body == EMPTY


def test_wait_does_not_return_closed_thread_mail(api: Api) -> None:
    sender, reader, thread = pair(api)
    sender.send(thread["id"], "never shown")
    api.ok("POST", f"/threads/{thread['id']}/close")

    started = time.monotonic()
    body = reader.ok("GET", "/inbox/wait", params={"timeout": "1"})

    assert time.monotonic() - started >= 0.9
    assert body == EMPTY


def test_operator_token_waits_for_the_operators_own_mail(api: Api) -> None:
    worker = api.agent("worker")
    thread = api.open_thread("Operator's task", ["worker"])
    api.send(thread["id"], "go")
    with ThreadPoolExecutor(max_workers=1) as pool:
        waiting = pool.submit(api.ok, "GET", "/inbox/wait", params={"timeout": "10"})
        time.sleep(0.3)
        assert not waiting.done()
        reply = worker.send(thread["id"], "done, see PR 12")
        started = time.monotonic()
        body = waiting.result(timeout=10)
    assert time.monotonic() - started < 5
    assert [i["message_id"] for i in body["items"]] == [reply["message"]["id"]]
    assert body["items"][0]["sender"] == "worker"


def test_wait_without_token_is_unauthorized(api: Api) -> None:
    assert_error(api.client.get("/v1/inbox/wait", params={"timeout": "1"}), 401, "unauthorized")


WAITERS = 60  # more than the database pool (2 + 2 overflow) and AnyIO's 40 worker threads


@pytest.mark.parametrize("settings_overrides", [{"db_pool_size": 2}])
def test_many_waits_hold_no_database_connection_or_worker_thread(
    api: Api, server: ServerThread
) -> None:
    waiters = [api.agent(f"waiter-{n:02d}") for n in range(WAITERS)]
    bystander = api.agent("bystander")
    api.agent("buddy")
    side_thread = bystander.open_thread("Unrelated work", ["buddy"])
    big_thread = api.open_thread("Everyone", [w.name for w in waiters])

    async def scenario() -> tuple[list[httpx.Response], float, dict[str, float], str]:
        limits = httpx.Limits(max_connections=WAITERS + 20, max_keepalive_connections=WAITERS + 20)
        async with httpx.AsyncClient(base_url=api.base_url, timeout=60, limits=limits) as client:
            tasks = [
                asyncio.create_task(
                    client.get("/v1/inbox/wait", params={"timeout": "30"}, headers=w.headers)
                )
                for w in waiters
            ]
            deadline = time.monotonic() + 20
            while listening(server) < WAITERS:
                assert time.monotonic() < deadline, f"{listening(server)} of {WAITERS} waiting"
                assert not any(t.done() for t in tasks), [
                    t.result().text for t in tasks if t.done()
                ]
                await asyncio.sleep(0.02)

            # While all of them wait, other requests still get a connection and a thread.
            timings: dict[str, float] = {}
            started = time.monotonic()
            me = await client.get("/v1/me", headers=bystander.headers)
            timings["me"] = time.monotonic() - started
            assert me.status_code == 200 and me.json()["username"] == "bystander", me.text
            started = time.monotonic()
            side = await client.post(
                f"/v1/threads/{side_thread['id']}/messages",
                json={"body": "unrelated"},
                headers=bystander.headers,
            )
            timings["send"] = time.monotonic() - started
            assert side.status_code == 201, side.text
            started = time.monotonic()
            listed = await client.get("/v1/deliveries", headers=api.headers)
            timings["deliveries"] = time.monotonic() - started
            assert listed.status_code == 200, listed.text
            await asyncio.sleep(0.3)
            assert not any(t.done() for t in tasks), "a wait returned before its mail arrived"
            assert listening(server) == WAITERS

            sent_at = time.monotonic()
            big = await client.post(
                f"/v1/threads/{big_thread['id']}/messages",
                json={"body": "wake up, all of you"},
                headers=api.headers,
            )
            assert big.status_code == 201, big.text
            responses = await asyncio.wait_for(asyncio.gather(*tasks), timeout=20)
            return list(responses), time.monotonic() - sent_at, timings, big.json()["message"]["id"]

    responses, woke_after, timings, message_id = asyncio.run(scenario())

    assert all(t < 2.0 for t in timings.values()), timings
    assert woke_after < 5.0, woke_after
    for response in responses:
        assert response.status_code == 200, response.text
        body = response.json()
        assert [i["message_id"] for i in body["items"]] == [message_id]
        assert body["returned"] == 1 and body["waiting"] == 1 and body["more"] is False
    assert listening(server) == 0
