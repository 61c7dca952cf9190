"""Faults in the production shape (real Celery worker and beat subprocesses, a private Redis, real
receivers on loopback):

- a worker killed with SIGKILL mid-delivery: while a request hangs, while a retry countdown
  waits, and while it holds in-flight slots of a URL;
- Redis stopped while messages are sent, and Redis lost in the middle of an attempt;
- publishes whose jobs the broker lost, swept by the real renotify task.

The spec's promises under test: no accepted message is ever lost, at most one successful
notification per publish, and the attempt log and stamps tell the whole story.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

from inbots.config import Settings
from inbots.db.engine import Database
from inbots.deliveries.attempt import Engine, make_client
from inbots.deliveries.notify import notify
from inbots.dispatch.jobs import Job
from inbots.dispatch.limiter import RedisLimiter
from tests.celery_harness import (  # noqa: F401  (fixtures)
    FAST,
    CeleryHarness,
    RedisBroker,
    SharedRedis,
    assert_at_most_one_ok_per_publish,
    celery_fixture,
    hooked_agent,
    missing,
    queued_jobs,
    redis_broker_fixture,
    settings_overrides_fixture,
    timings_fixture,
    wait_state,
    wait_until,
)
from tests.helpers import Api
from tests.receivers import always, fail_then_ok, receiver


class Gate:
    """Receiver behaviour: the first ``held`` requests hang (until released or ``seconds``);
    every later request answers 200 at once."""

    def __init__(self, held: int, seconds: float = 60.0) -> None:
        self.held = held
        self.seconds = seconds
        self.release = threading.Event()

    def __call__(self, number: int) -> tuple[int, bytes]:
        if number <= self.held:
            self.release.wait(self.seconds)
            return 200, b"too late"
        return 200, b"ok"


def steps(detail: dict[str, Any]) -> list[tuple[int, int, str, str, int | None]]:
    return [
        (a["number"], a["publish"], a["trigger"], a["reason"], a["status_code"])
        for a in detail["attempts"]
    ]


# A retry 3 s away (so a worker can be killed while it holds the countdown), a 3 s timeout (so
# it can be killed while a request hangs), and a publish-lost window over the whole retry
# sequence (3 × 1.2 + 2 × 3 = 9.6 s), swept every second by a real beat. A killed attempt's
# claim runs out 6 s after it was taken (timeout + 3 s). The window also covers the new
# worker's start-up, which a loaded machine once stretched near 10 s: the job published while
# no worker ran must reach it before the sweep takes that job for lost.
KILL = {
    **FAST,
    "retry_schedule": "3",
    "webhook_timeout_seconds": 3.0,
    "webhook_claim_margin_seconds": 3.0,
    "publish_lost_seconds": 14.0,
    "renotify_interval_seconds": 1.0,
}


def assert_recovered_once(detail: dict[str, Any]) -> None:
    """A delivery whose attempt died with its worker: the attempt is logged ``worker_lost`` and
    the next one succeeds, once. The sweep resumes it within its publish as soon as the claim
    runs out (no publish spent); if the job it publishes has not run by the time the publish is
    lost too (a worker still starting, on a loaded machine), the publish-lost rule republishes it
    instead and the resumed job is skipped as superseded. Both are right; nothing else is."""
    resumed = [(1, 1, "publish", "worker_lost", None), (2, 1, "retry", "ok", 200)]
    republished = [(1, 1, "publish", "worker_lost", None), (2, 2, "renotify", "ok", 200)]
    assert steps(detail) in (resumed, republished), detail
    assert detail["publish_count"] == steps(detail)[-1][1] and not detail["failed_at"], detail


@pytest.mark.slow
@pytest.mark.parametrize("timings", [KILL], ids=["kill"])
def test_a_worker_killed_mid_delivery_loses_nothing(api: Api, celery: CeleryHarness) -> None:
    """SIGKILL the worker while one notification hangs on its request, another waits for its
    retry countdown, and then publish a third while no worker runs. After a new worker starts,
    all three are notified, once each per publish; the beat's renotify sweep recovers the two
    the dead worker held: the hung one as soon as its claim runs out, within its publish (the
    resumed job logs the killed attempt as ``worker_lost``), the one waiting for its retry once
    its publish is lost; the broker still holds the third."""
    gate = Gate(held=1)
    first_worker = celery.worker(wait=False)
    beat = celery.beat(wait=False)
    with (
        receiver(gate) as hanging,
        receiver(fail_then_ok(1)) as flaky,
        receiver(always(200)) as healthy,
    ):
        try:
            hooked_agent(api, "hanging", hanging.url)
            hooked_agent(api, "flaky", flaky.url)
            hooked_agent(api, "healthy", healthy.url)
            sender = api.agent("sender")
            both = sender.open_thread("Two of them", ["hanging", "flaky"])["id"]
            alone = sender.open_thread("Later", ["healthy"])["id"]
            first_worker.ready()
            beat.ready()

            sent = sender.send(both, "first")
            ids = {d["recipient"]: d["id"] for d in sent["deliveries"]}
            celery.wait_for(hanging, 1)  # the request is in flight, the worker waits on it
            celery.wait_for(flaky, 1)
            wait_until(
                lambda: api.delivery(ids["flaky"])["next_attempt_at"],
                5,
                "the flaky receiver's retry to be scheduled",
                details=celery.errors,
            )
            assert len(hanging.requests) == 1 and first_worker.alive
            first_worker.kill()
            killed_at = time.monotonic()

            ids["healthy"] = sender.send(alone, "while no worker runs")["deliveries"][0]["id"]
            time.sleep(0.3)
            assert healthy.requests == [] and api.delivery(ids["healthy"])["state"] == "accepted"
            assert api.delivery(ids["hanging"])["attempts"] == []  # the killed try left no row

            celery.worker()
            healthy_detail = wait_state(api, ids["healthy"], "notified", 10, celery)
            assert steps(healthy_detail) == [(1, 1, "publish", "ok", 200)], (
                f"the broker's job, not the sweep, notified it: worker back after "
                f"{time.monotonic() - killed_at:.1f} s"
            )
            flaky_detail = wait_state(api, ids["flaky"], "notified", 25, celery)
            # The hung attempt's claim (timeout + 3 s) must run out before it is tried again.
            hanging_detail = wait_state(api, ids["hanging"], "notified", 30, celery)
            recovered_after = time.monotonic() - killed_at
            time.sleep(0.5)
            assert beat.alive
        finally:
            gate.release.set()
        hanging_requests = list(hanging.requests)
        flaky_requests = list(flaky.requests)
        healthy_requests = list(healthy.requests)

    assert steps(healthy_detail) == [(1, 1, "publish", "ok", 200)]
    assert healthy_detail["publish_count"] == 1
    assert len(healthy_requests) == 1

    assert steps(flaky_detail) == [
        (1, 1, "publish", "http_500", 500),
        (2, 2, "renotify", "ok", 200),
    ]
    assert flaky_detail["publish_count"] == 2 and not flaky_detail["failed_at"]
    assert len(flaky_requests) == 2

    assert_recovered_once(hanging_detail)
    assert len(hanging_requests) == 2, "the hung request is the only one before the retry"
    assert {r.headers["webhook-id"] for r in hanging_requests} == {ids["hanging"]}
    assert recovered_after < 30

    for detail in (healthy_detail, flaky_detail, hanging_detail):
        assert_at_most_one_ok_per_publish(detail)


# A 1.5 s timeout: a slot's lease lasts 3.5 s (timeout + 2 s), and so does a claim (the least
# margin allowed). The whole retry sequence is 0.2 × 1.2 + 2 × 1.5 = 3.24 s, so a publish is lost
# after 4 s; the beat sweeps every half second.
LEASE = {
    **FAST,
    "retry_schedule": "0.2",
    "webhook_timeout_seconds": 1.5,
    "webhook_claim_margin_seconds": 2.0,
    "publish_lost_seconds": 4.0,
    "renotify_interval_seconds": 0.5,
}
LEASE_SECONDS = 1.5 + 2.0
ANSWER_SECONDS = 0.6  # how long the receiver takes with every request after the killed ones


def most_at_once(spans: list[tuple[float, float]]) -> tuple[int, float | None]:
    """The most requests a receiver was handling at once, and when that first happened."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    best, now, first = 0, 0, None
    for at, step in events:
        now += step
        if now > best:
            best, first = now, at
    return best, first


@pytest.mark.slow
@pytest.mark.parametrize("timings", [LEASE], ids=["lease"])
def test_a_killed_workers_slots_come_back_within_the_attempt_timeout(
    api: Api, celery: CeleryHarness, redis_broker: RedisBroker | SharedRedis
) -> None:
    """Cap 4. The worker dies holding 2 of the URL's slots (two requests hang at the receiver).
    Mail to that URL keeps coming (one message every 0.1 s; the receiver takes 0.6 s with each,
    so more than 4 would be in flight if the cap allowed): as soon as a new worker is up, and no
    later than the slots' lease (timeout + 2 s) after the kill, the receiver handles 4 requests
    at once again, never more. The two killed attempts are logged as ``worker_lost`` and their
    deliveries notified within their publish: the sweep resumes each as soon as its claim runs
    out."""
    held = 2
    release = threading.Event()
    spans: list[tuple[float, float]] = []
    lock = threading.Lock()

    def behave(number: int) -> tuple[int, bytes]:
        if number <= held:  # the killed worker's requests
            release.wait(60)
            return 200, b"too late"
        began = time.monotonic()
        time.sleep(ANSWER_SECONDS)
        with lock:
            spans.append((began, time.monotonic()))
        return 200, b"ok"

    first_worker = celery.worker(wait=False)
    beat = celery.beat(wait=False)
    with receiver(behave) as hook:
        try:
            hooked_agent(api, "busy", hook.url)
            sender = api.agent("sender")
            thread = sender.open_thread("Capped", ["busy"])["id"]
            first_worker.ready()
            beat.ready()
            killed = [sender.send(thread, f"killed {i}")["deliveries"][0]["id"] for i in range(2)]
            celery.wait_for(hook, held)
            first_worker.kill()
            killed_at = time.monotonic()

            celery.worker()
            worker_up = time.monotonic()
            later = []
            while time.monotonic() < worker_up + 6:
                later.append(sender.send(thread, "after")["deliveries"][0]["id"])
                time.sleep(0.1)
            details = [wait_state(api, d, "notified", 30, celery) for d in later]
            lost = [wait_state(api, d, "notified", 20, celery) for d in killed]
        finally:
            release.set()
        with lock:
            observed = list(spans)

    most, first_full = most_at_once(observed)
    by_lease = killed_at + LEASE_SECONDS
    print(
        f"after the kill: new worker up at +{worker_up - killed_at:.1f} s, 4 in flight again at "
        f"+{(first_full or killed_at) - killed_at:.1f} s (lease {LEASE_SECONDS} s); most at once "
        f"{most}; {len(observed)} requests"
    )
    if most < 4:
        client = redis_broker.client()
        leftovers = {
            key.decode(): client.type(key).decode() for key in client.scan_iter("inbots:*")
        }
        pytest.fail(
            f"at most {most} requests in flight to the URL after the worker holding 2 of its "
            f"4 slots was killed (the dead slots never came back); Redis keys: {leftovers}"
        )
    assert most == 4, f"{most} requests in flight at once: more than the cap of 4"
    assert first_full is not None
    # 4 s of slack: a loaded two-core CI run took 2.5 s more; slots that never come back fail
    # above, and a lease of the default length would still fail here.
    assert first_full <= max(by_lease, worker_up) + 4.0, (
        f"the cap was full again only {first_full - killed_at:.1f} s after the kill "
        f"(lease {LEASE_SECONDS:.1f} s, new worker up after {worker_up - killed_at:.1f} s)"
    )
    for detail in details:
        # Each is answered once; on a loaded machine an answer may come after the 1.5 s timeout,
        # and then the retry is the one that lands. Nothing else may go wrong on the way.
        reasons = [a["reason"] for a in detail["attempts"]]
        assert reasons[-1] == "ok" and set(reasons[:-1]) <= {"timeout"}, detail
    for detail in lost:
        assert_recovered_once(detail)
        assert detail["attempts"][0]["url"] == hook.url
        assert_at_most_one_ok_per_publish(detail)


# Lost publishes are republished after 2.5 s (the whole retry sequence is 2.24 s), swept every
# half second by a real beat.
DOWN = {
    **FAST,
    "retry_schedule": "0.2",
    "webhook_timeout_seconds": 1.0,
    "publish_lost_seconds": 2.5,
    "renotify_interval_seconds": 0.5,
}


@pytest.mark.parametrize("timings", [DOWN], ids=["down"])
def test_redis_down_while_sending_loses_nothing(
    api: Api, celery: CeleryHarness, redis_broker: RedisBroker | SharedRedis
) -> None:
    """Stop the broker (our own redis-server): every send is still accepted, quickly. Start it
    again (empty: it kept nothing): the web process publishes the jobs it held (or the renotify
    job, a real beat, publishes what was lost) and every delivery is notified once; new mail
    flows again.

    The worker is idle when Redis stops and the beat starts once Redis is back; a worker that is
    busy across two restarts is tests/test_production_shape.py's.
    """
    if not redis_broker.stoppable:
        missing("this test stops Redis: it needs a redis-server binary of its own")
    worker = celery.worker(wait=False)
    with receiver(always(200)) as hook:
        hooked_agent(api, "reader", hook.url)
        sender = api.agent("sender")
        thread = sender.open_thread("Through the outage", ["reader"])["id"]
        worker.ready()
        before = sender.send(thread, "before")["deliveries"][0]["id"]
        wait_state(api, before, "notified", 10, celery)
        time.sleep(0.2)  # the task is acknowledged

        redis_broker.stop()
        during: list[str] = []
        for i in range(5):
            began = time.monotonic()
            during.append(sender.send(thread, f"during {i}")["deliveries"][0]["id"])
            took = time.monotonic() - began
            assert took < 2.5, (
                f"a send took {took:.1f} s while the broker was down: the publisher must try a "
                "few times and give up quickly (the message is already accepted)"
            )
        time.sleep(0.5)
        stuck = [api.delivery(d) for d in during]
        # Nothing of the outage went out. ("before" may have taken a retry on a loaded machine:
        # an attempt that timed out is posted again, which receivers dedupe by webhook-id.)
        assert {r.headers["webhook-id"] for r in hook.requests} == {before}

        redis_broker.start()
        beat = celery.beat(wait=False)
        # Sent at once: the publisher may still be backing off (the sweep then publishes it).
        early = sender.send(thread, "right after")["deliveries"][0]["id"]
        details = [wait_state(api, d, "notified", 20, celery) for d in during]
        early_detail = wait_state(api, early, "notified", 10, celery)
        # By now the publisher must publish again by itself: the first publish reaches a worker.
        began = time.monotonic()
        after = sender.send(thread, "after")["deliveries"][0]["id"]
        after_detail = wait_state(api, after, "notified", 10, celery)
        after_latency = time.monotonic() - began
        time.sleep(0.5)
        requests = list(hook.requests)
        before_detail = api.delivery(before)
        assert worker.alive and beat.alive

    for detail in stuck:
        assert detail["state"] == "accepted" and detail["publish_count"] == 1, detail
    for detail in details:
        # The web process held the jobs it could not publish and published them once Redis
        # answered again; on a loaded machine the sweep may have republished first instead.
        held, republished = [(1, 1, "publish", "ok", 200)], [(1, 2, "renotify", "ok", 200)]
        assert steps(detail) in (held, republished), detail
        assert detail["publish_count"] == steps(detail)[0][1], detail
        assert_at_most_one_ok_per_publish(detail)
    assert [a["reason"] for a in early_detail["attempts"]] == ["ok"], early_detail
    assert steps(after_detail) == [(1, 1, "publish", "ok", 200)], (
        "once Redis is back, a new message must be published at once, not left to the sweep"
    )
    assert after_latency < 3.0, f"the first message after the outage took {after_latency:.1f} s"
    ids = [r.headers["webhook-id"] for r in requests]
    assert sorted(i for i in ids if i != before) == sorted([*during, early, after]), (
        "a notification was lost or doubled"
    )
    assert ids.count(before) == len(before_detail["attempts"]), before_detail  # one POST each
    assert_at_most_one_ok_per_publish(before_detail)


@pytest.mark.parametrize("timings", [DOWN], ids=["down"])
def test_an_attempt_answered_while_redis_goes_down_is_still_recorded(
    api: Api,
    settings: Settings,
    database: Database,
    redis_broker: RedisBroker | SharedRedis,
) -> None:
    """The receiver answers 200, but Redis (the in-flight limiter's store) went away during the
    request. The attempt happened: it must be logged and the delivery stamped notified. Run with
    the worker's own parts (RedisLimiter on the broker, the notify function), in this process."""
    if not redis_broker.stoppable:
        missing("this test stops Redis: it needs a redis-server binary of its own")

    def answer_after_redis_dies(_n: int) -> tuple[int, bytes]:
        redis_broker.stop()
        return 200, b"ok"

    limiter = RedisLimiter(
        redis.Redis.from_url(settings.broker_url, socket_timeout=3, socket_connect_timeout=3),
        settings.webhook_max_in_flight_per_url,
        ttl_seconds=int(settings.webhook_timeout_seconds * 3) + 5,
    )
    engine = Engine(database, settings, make_client(settings), limiter)
    with receiver(answer_after_redis_dies) as hook:
        hooked_agent(api, "reader", hook.url)
        sender = api.agent("sender")
        thread = sender.open_thread("Limiter gone", ["reader"])["id"]
        delivery_id = sender.send(thread, "hello")["deliveries"][0]["id"]  # no worker: queued
        try:
            result = notify(engine, Job(delivery_id, 1, "publish"))
        except Exception as exc:
            detail = api.delivery(delivery_id)
            pytest.fail(
                f"notify raised {type(exc).__name__} ({exc}) after the receiver answered 200; "
                f"the attempt was not recorded: state={detail['state']}, "
                f"attempts={detail['attempts']}, requests received={len(hook.requests)}"
            )
        finally:
            engine.client.close()
    detail = api.delivery(delivery_id)
    assert result.outcome == "notified", result
    assert steps(detail) == [(1, 1, "publish", "ok", 200)]
    assert detail["notified_at"]


# The whole retry sequence is 0.1 × 1.2 + 2 × 0.5 = 1.12 s: a publish is lost after 1.5 s.
LOST = {
    **FAST,
    "retry_schedule": "0.1",
    "webhook_timeout_seconds": 0.5,
    "publish_lost_seconds": 1.5,
    "renotify_interval_seconds": 0.5,
}


@pytest.mark.parametrize("timings", [LOST], ids=["lost"])
def test_a_publish_whose_job_the_broker_lost_is_republished_twice_then_failed(
    api: Api, celery: CeleryHarness, redis_broker: RedisBroker | SharedRedis
) -> None:
    """No worker takes mail, and every job published is taken out of the broker at once, as a
    flushed Redis loses it. The real ``delivery.renotify`` task — run three at a time, so sweeps
    overlap — finds each publish gone (nothing waits in the broker), republishes each delivery
    twice, one publish-lost window apart, then stamps it failed. (Jobs that merely wait for a
    worker are never taken for lost: tests/test_backlog.py.)"""
    celery.worker(queues="sweep")
    with receiver(always(200)) as hook:
        names = ["one", "two", "three"]
        for name in names:
            hooked_agent(api, name, hook.url)
        sender = api.agent("sender")
        thread = sender.open_thread("Into the void", names)["id"]
        sent = sender.send(thread, "nobody will tell you")
        ids = [d["id"] for d in sent["deliveries"]]
        lost: dict[str, list[Any]] = {}

        def lose() -> None:
            for delivery_id, jobs in queued_jobs(redis_broker, set(ids), take=True).items():
                lost.setdefault(delivery_id, []).extend(jobs)

        def all_failed() -> list[dict[str, Any]] | None:
            lose()
            for _ in range(3):
                celery.renotify()
            details = [api.delivery(d) for d in ids]
            return details if all(d["failed_at"] for d in details) else None

        def show() -> str:
            return f"{[api.delivery(d) for d in ids]}\n{celery.errors()}"

        details = wait_until(all_failed, 20, "all three to be failed", 0.2, show)
        time.sleep(0.5)
        for _ in range(3):
            celery.renotify()
        time.sleep(0.5)
        again = [api.delivery(d) for d in ids]
        lose()
        assert hook.requests == []

    for detail, later in zip(details, again, strict=True):
        assert detail["state"] == "failed", detail
        assert detail["failure_reason"] == "publish attempts exhausted", detail
        assert detail["publish_count"] == 3, detail
        assert detail["attempts"] == [] and detail["notified_at"] is None
        assert later == detail, "a sweep changed a failed delivery"
        # Each republish waited for the publish-lost window after the one before.
        accepted = _at(detail["accepted_at"])
        assert _at(detail["last_published_at"]) - accepted >= 2 * 1.5 - 0.01, detail
        assert _at(detail["failed_at"]) - _at(detail["last_published_at"]) >= 1.5 - 0.01
    for delivery_id in ids:
        assert sorted(lost.get(delivery_id, [])) == [
            (1, "publish"),
            (2, "renotify"),
            (3, "renotify"),
        ], (
            f"{delivery_id} was published {lost.get(delivery_id)} (overlapping sweeps must "
            "not double-publish)"
        )


def _at(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
