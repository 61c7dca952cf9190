"""Fair dispatch, part by part: the per-URL in-flight leases (Redis and local), parking a job the
cap refused and waking it when a slot frees, the sweep's part in both, and the attempt of a worker
that died (``worker_lost``).

The limiter tests run against our own ``redis-server`` and the in-memory limiter alike. The
parking tests run on SQLite and PostgreSQL: the test server publishes to a private Redis that no
worker consumes, and the test makes each notify run itself (``inbots.deliveries.notify.notify``,
as the Celery task and the embedded dispatcher call it), with real receivers on loopback.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from inbots.config import Settings
from inbots.db.engine import Database
from inbots.deliveries.attempt import Engine, make_client
from inbots.deliveries.notify import notify, notify_all
from inbots.deliveries.parking import wake
from inbots.deliveries.renotify import sweep
from inbots.dispatch.jobs import Job, Result
from inbots.dispatch.limiter import Limiter, LocalLimiter, RedisLimiter, url_key
from inbots.kit.clock import utcnow
from inbots.models.deliveries import Delivery
from tests.celery_harness import (  # noqa: F401  (fixtures: a broker nobody consumes)
    FAST,
    RedisBroker,
    SharedRedis,
    hooked_agent,
    redis_broker_fixture,
    settings_overrides_fixture,
    timings_fixture,
)
from tests.helpers import Api
from tests.receivers import always, receiver

# --- the lease limiter -------------------------------------------------------------------------

MakeLimiter = Callable[[int, float], Limiter]


@pytest.fixture(params=["local", "redis"])
def make_limiter(request: pytest.FixtureRequest) -> MakeLimiter:
    """A limiter factory ``(cap, lease seconds)``: in memory, or on this test's redis-server."""
    if request.param == "local":
        return LocalLimiter
    broker: RedisBroker | SharedRedis = request.getfixturevalue("redis_broker")
    client = broker.client()
    request.addfinalizer(client.close)
    return lambda cap, ttl: RedisLimiter(client, cap, ttl)


def a_key() -> str:
    return url_key(f"http://127.0.0.1/{uuid.uuid4().hex}")


def test_a_url_has_at_most_cap_leases_and_a_release_frees_one(make_limiter: MakeLimiter) -> None:
    limiter = make_limiter(3, 30.0)
    key, other = a_key(), a_key()
    leases = [limiter.acquire(key) for _ in range(3)]
    assert all(leases) and len(set(leases)) == 3
    assert limiter.acquire(key) is None and limiter.free(key) == 0
    assert limiter.free(other) == 3 and limiter.acquire(other)  # each URL has its own slots
    limiter.release(key, leases[0] or "")
    assert limiter.free(key) == 1
    assert limiter.acquire(key) is not None and limiter.acquire(key) is None
    limiter.release(key, leases[0] or "")  # a lease given back twice frees nothing more
    assert limiter.free(key) == 0


def test_acquire_all_takes_each_keys_slots_in_turn(make_limiter: MakeLimiter) -> None:
    """A batch's slots in one call (one pipeline on Redis): the same answers as acquiring one
    by one, in order: a URL's first ``cap`` get a lease, the rest ``None``."""
    limiter = make_limiter(3, 30.0)
    key, other = a_key(), a_key()
    assert limiter.acquire(key)  # one slot of key held already
    got = limiter.acquire_all([key, other, key, key, other])
    assert [lease is not None for lease in got] == [True, True, True, False, True], got
    leases = [lease for lease in got if lease]
    assert len(set(leases)) == len(leases) == 4
    assert limiter.free(key) == 0 and limiter.free(other) == 1
    limiter.release(key, got[0] or "")
    assert limiter.free(key) == 1
    assert limiter.acquire_all([]) == []
    assert limiter.acquire_all([key]) != [None] and limiter.acquire_all([key]) == [None]


def test_acquire_all_on_a_redis_that_lost_its_scripts_loads_them_again(
    redis_broker: RedisBroker | SharedRedis,
) -> None:
    """The pipeline sends each script by its digest: after a Redis restart (here, SCRIPT
    FLUSH) every one answers NOSCRIPT, and the batch is sent again once the script is loaded."""
    client = redis_broker.client()
    try:
        limiter = RedisLimiter(client, 2, 30.0)
        key, other = a_key(), a_key()
        got = limiter.acquire_all([key, key, key])
        assert [lease is not None for lease in got] == [True, True, False], got
        client.script_flush()
        again = limiter.acquire_all([other, other, key])
        assert [lease is not None for lease in again] == [True, True, False], again
        assert limiter.free(other) == 0 and limiter.free(key) == 0
    finally:
        client.close()


def test_leaked_leases_expire_each_on_its_own_while_traffic_continues(
    make_limiter: MakeLimiter,
) -> None:
    """Two leases are never released (their worker was killed), 0.5 s apart. Other callers keep
    taking and giving back the other slots, and being refused: each leaked lease still expires
    its own lease time after it was taken, and then the URL has its whole cap again."""
    ttl, gap = 1.0, 0.5
    limiter = make_limiter(4, ttl)
    key = a_key()
    first_leaked = time.monotonic()
    assert limiter.acquire(key)
    time.sleep(gap)
    second_leaked = time.monotonic()
    assert limiter.acquire(key)

    free_seen: list[tuple[float, int]] = []
    while time.monotonic() < second_leaked + ttl + 0.4:
        held = [lease for lease in (limiter.acquire(key) for _ in range(5)) if lease]
        for lease in held:
            limiter.release(key, lease)
        free_seen.append((time.monotonic(), limiter.free(key)))
        time.sleep(0.02)

    def free_at(moment: float) -> int:
        return next(n for at, n in free_seen if at >= moment)

    assert free_at(second_leaked) == 2, free_seen  # both leaked leases count
    assert free_at(first_leaked + ttl + 0.15) == 3, free_seen  # the first expired by itself
    assert free_at(second_leaked + ttl + 0.15) == 4, free_seen  # and then the second
    assert len([lease for lease in (limiter.acquire(key) for _ in range(5)) if lease]) == 4


def test_a_redis_url_with_no_lease_left_leaves_no_key(
    redis_broker: RedisBroker | SharedRedis,
) -> None:
    client = redis_broker.client()
    try:
        limiter = RedisLimiter(client, 2, 0.3)
        key = a_key()
        lease = limiter.acquire(key)
        assert lease and client.exists(RedisLimiter.name(key))
        limiter.release(key, lease)
        assert limiter.acquire(key)
        time.sleep(0.45)
        assert not client.exists(RedisLimiter.name(key)), "an idle URL left its key behind"
    finally:
        client.close()


# --- parking and waking ------------------------------------------------------------------------


@pytest.fixture
def engine(database: Database, settings: Settings) -> Iterator[Engine]:
    """The worker's parts, in this process, with a cap of one request in flight per URL."""
    made = Engine(database, settings, make_client(settings), LocalLimiter(1, 30.0))
    yield made
    made.client.close()


class Held:
    """Receiver behaviour: request ``number`` (1-based) waits until released; others answer 200
    at once (or ``status``)."""

    def __init__(self, numbers: Sequence[int] = (1,), status: int = 200) -> None:
        self.numbers = set(numbers)
        self.status = status
        self.release = threading.Event()

    def __call__(self, number: int) -> tuple[int, bytes]:
        if number in self.numbers:
            self.release.wait(20)
        return self.status, b"ok"


def mail(api: Api, url: str, count: int) -> list[str]:
    """``count`` messages to one new webhook agent at ``url``; their delivery ids, in order."""
    name = f"hook-{uuid.uuid4().hex[:8]}"
    hooked_agent(api, name, url)
    sender = api.agent(f"sender-{uuid.uuid4().hex[:8]}")
    thread = sender.open_thread("Parking", [name])["id"]
    return [sender.send(thread, f"message {i}")["deliveries"][0]["id"] for i in range(count)]


def row(database: Database, delivery_id: str) -> Any:
    with database.engine.connect() as conn:
        return conn.execute(select(Delivery).where(Delivery.id == delivery_id)).one()


def in_background(fn: Callable[[], Result]) -> tuple[threading.Thread, list[Result]]:
    out: list[Result] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return thread, out


def reasons(api: Api, delivery_id: str) -> list[tuple[int, int, str, str]]:
    return [
        (a["number"], a["publish"], a["trigger"], a["reason"])
        for a in api.delivery(delivery_id)["attempts"]
    ]


# The first attempt is held until the test lets it go: its timeout must not run out first, however
# loaded the machine (the other tests' timings stay FAST).
HELD = {**FAST, "webhook_timeout_seconds": 5.0, "publish_lost_seconds": 30.0}


@pytest.mark.parametrize("timings", [HELD], ids=["held"])
def test_a_job_refused_by_the_cap_parks_and_the_released_slot_wakes_it(
    api: Api, database: Database, settings: Settings, engine: Engine
) -> None:
    """Cap 1: while the first attempt holds the slot, the second job parks its delivery and ends
    (no countdown, no attempt). The parked delivery is not a lost publish. When the first
    attempt ends it wakes the parked delivery: that job is handed back to be published, once."""
    held = Held()
    with receiver(held) as hook:
        first, second = mail(api, hook.url, 2)
        worker, out = in_background(lambda: notify(engine, Job(first, 1)))
        hook.wait_for(1)

        parked = notify(engine, Job(second, 1))
        assert (parked.outcome, parked.countdown, parked.wake) == ("parked", None, ())
        waiting = row(database, second)
        assert waiting.parked_key == url_key(hook.url) and waiting.parked_at is not None
        assert waiting.job_trigger == "publish" and waiting.claimed_until is None
        assert api.delivery(second)["attempts"] == []

        # A sweep after the publish-lost window: parked is not lost, and the URL has no free
        # slot, so the sweep neither republishes it nor wakes it.
        published: list[Job] = []
        soon = utcnow() + timedelta(seconds=settings.publish_lost_seconds + 1)
        report = sweep(database, settings, published.extend, soon, limiter=engine.limiter)
        assert (report.republished, report.woken, published) == (0, 0, [])
        assert row(database, second).publish_count == 1

        held.release.set()
        worker.join(10)
        (done,) = out
        assert done.outcome == "notified"
        assert done.wake == (Job(second, 1, "publish", retry=False),)
        woken = row(database, second)
        assert woken.parked_key is None and woken.last_published_at > waiting.last_published_at
        assert woken.parked_at == waiting.parked_at, "a woken delivery keeps its place in line"

        assert notify(engine, done.wake[0]).outcome == "notified"
        assert row(database, second).parked_at is None
        assert len(hook.requests) == 2
    assert reasons(api, second) == [(1, 1, "publish", "ok")]


def test_a_duplicate_job_waits_for_the_running_attempt_instead_of_spinning(
    api: Api, database: Database, settings: Settings, engine: Engine
) -> None:
    """A second job for a delivery whose attempt is running comes back once that attempt must
    have ended (its slot's lease: the timeout + 2 s after the claim), not every half second.
    Measured from the claim the row records, so a loaded machine's delay before the duplicate
    runs is taken off exactly."""
    held = Held()
    with receiver(held) as hook:
        (delivery_id,) = mail(api, hook.url, 1)
        worker, out = in_background(lambda: notify(engine, Job(delivery_id, 1)))
        hook.wait_for(1)
        claimed_until = row(database, delivery_id).claimed_until
        before = utcnow()
        duplicate = notify(engine, Job(delivery_id, 1))
        after = utcnow()
        held.release.set()
        worker.join(10)
    assert duplicate.outcome == "busy" and duplicate.countdown is not None
    # The lease ends lease seconds after the claim; the claim itself runs claim_seconds.
    claimed_at = claimed_until - timedelta(seconds=settings.claim_seconds)
    ends = claimed_at + timedelta(seconds=settings.inflight_lease_seconds)
    earliest = (ends - after).total_seconds() + 0.05 - 0.01
    latest = (ends - before).total_seconds() + 0.05 + 0.01
    assert earliest <= duplicate.countdown <= latest, (duplicate, earliest, latest)
    assert settings.inflight_lease_seconds - duplicate.countdown < 10  # not a retry's wait
    assert out[0].outcome == "notified" and len(hook.requests) == 1


class ReleasedMeanwhile(LocalLimiter):
    """The lost wake-up, made to happen every time: the attempt holding the URL's only slot
    ends just after this job was refused, before its delivery is parked, so that attempt's
    wake-up finds nothing parked."""

    def __init__(self) -> None:
        super().__init__(1, 30.0)
        self.holder: tuple[str, str] | None = None

    def acquire(self, key: str) -> str | None:
        lease = super().acquire(key)
        if lease is None and self.holder is not None:
            self.release(*self.holder)
            self.holder = None
        return lease


def test_the_same_row_twice_in_one_batch_is_sent_once(api: Api, engine: Engine) -> None:
    """Two jobs of one batch for the same row: the first claims and sends, the second finds it
    claimed (busy, back when that attempt must have ended), as a duplicate job would."""
    with receiver(always(200)) as hook:
        (delivery_id,) = mail(api, hook.url, 1)
        results = notify_all(engine, [Job(delivery_id, 1, "publish")] * 2)
        time.sleep(0.3)
        assert len(hook.requests) == 1, hook.requests
    outcomes = sorted(r.outcome for r in results)
    assert outcomes == ["busy", "notified"], results
    busy = next(r for r in results if r.outcome == "busy")
    assert busy.countdown is not None and busy.countdown > 1, busy


def test_a_slot_freed_while_a_job_parks_wakes_it(
    api: Api, database: Database, settings: Settings
) -> None:
    """After parking, the job looks again: a slot that came free meanwhile wakes the line."""
    limiter = ReleasedMeanwhile()
    engine = Engine(database, settings, make_client(settings), limiter)
    try:
        with receiver(always(200)) as hook:
            (delivery_id,) = mail(api, hook.url, 1)
            key = url_key(hook.url)
            limiter.holder = (key, limiter.acquire(key) or "")
            parked = notify(engine, Job(delivery_id, 1))
            assert parked.outcome == "parked"
            assert parked.wake == (Job(delivery_id, 1),), "the freed slot woke nobody"
            assert notify(engine, parked.wake[0]).outcome == "notified"
    finally:
        engine.client.close()


def test_the_sweep_wakes_parked_deliveries_when_their_url_has_free_slots(
    api: Api, database: Database, settings: Settings, engine: Engine
) -> None:
    """Three deliveries park behind a slot held elsewhere (a worker that died after sending,
    before waking anyone). Sweeps an hour later do not take them for lost publishes — nothing
    republished, no publish attempt used, nothing failed — and wake none while the slot is
    taken; once it is free, a sweep wakes the oldest, as many as there are free slots. A parked
    delivery that is no longer owed a notification leaves the line instead."""
    with receiver(always(200)) as hook:
        ids = mail(api, hook.url, 4)
        key = url_key(hook.url)
        lease = engine.limiter.acquire(key)
        assert lease
        assert [notify(engine, Job(d, 1)).outcome for d in ids] == ["parked"] * 4
        reader_ack = ids[0]  # acknowledged while parked: no longer owed
        with database.engine.begin() as conn:
            conn.execute(
                update(Delivery).where(Delivery.id == reader_ack).values(acknowledged_at=utcnow())
            )

        published: list[Job] = []
        later = utcnow() + timedelta(hours=1)
        for _ in range(3):
            report = sweep(database, settings, published.extend, later, limiter=engine.limiter)
            assert (report.republished, report.exhausted, report.woken) == (0, 0, 0)
        assert published == []
        for delivery_id in ids:
            detail = api.delivery(delivery_id)
            assert detail["publish_count"] == 1 and not detail["failed_at"], detail

        engine.limiter.release(key, lease)
        report = sweep(database, settings, published.extend, later, limiter=engine.limiter)
        assert report.woken == 1 and published == [Job(ids[1], 1)]
        assert row(database, reader_ack).parked_key is None  # left the line on the way
        assert [row(database, d).parked_key for d in ids[2:]] == [key, key]


def test_a_woken_retry_goes_back_on_the_retry_lane(
    api: Api, database: Database, settings: Settings, engine: Engine
) -> None:
    """A delivery whose first attempt failed parks when its retry finds the URL full; woken, its
    job goes to the retry lane, and its next attempt is logged as a retry."""
    held = Held(numbers=(2,))
    with receiver(_first_fails_then(held)) as hook:
        flaky, other = mail(api, hook.url, 2)
        first = notify(engine, Job(flaky, 1))
        assert first.outcome == "retry"
        worker, out = in_background(lambda: notify(engine, Job(other, 1)))
        hook.wait_for(2)
        time.sleep(max(0.0, (first.countdown or 0) + 0.05))  # the retry is due
        assert notify(engine, Job(flaky, 1)).outcome == "parked"
        held.release.set()
        worker.join(10)
        (done,) = out
        assert done.wake == (Job(flaky, 1, "publish", retry=True),)
        assert notify(engine, done.wake[0]).outcome == "notified"
    assert reasons(api, flaky) == [(1, 1, "publish", "http_500"), (2, 1, "retry", "ok")]


def _first_fails_then(held: Held) -> Callable[[int], tuple[int, bytes]]:
    def behave(number: int) -> tuple[int, bytes]:
        if number == 1:
            return 500, b"not yet"
        return held(number)

    return behave


# --- worker_lost -------------------------------------------------------------------------------


def die_mid_attempt(database: Database, settings: Settings, delivery_id: str) -> datetime:
    """Leave the delivery as a worker killed mid-attempt leaves it: claimed (for a claim's
    length, which has just run out), trigger ``publish``, no attempt recorded."""
    ran_out = utcnow() - timedelta(seconds=0.5)
    with database.engine.begin() as conn:
        conn.execute(
            update(Delivery)
            .where(Delivery.id == delivery_id)
            .values(claimed_until=ran_out, job_trigger="publish")
        )
    return ran_out - timedelta(seconds=settings.claim_seconds)


def lost_lines(caplog: pytest.LogCaptureFixture, delivery_id: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.getMessage().endswith(": worker_lost") and getattr(r, "delivery_id", "") == delivery_id
    ]


def assert_names_its_mail(record: logging.LogRecord, detail: dict[str, Any]) -> None:
    """A worker_lost line carries the ids every attempt line has (operations.md, Logs)."""
    named = (getattr(record, "message_id", None), getattr(record, "thread_id", None))
    assert named == (detail["message_id"], detail["thread_id"]), named


def test_the_next_job_logs_an_expired_claim_as_worker_lost_and_goes_on(
    api: Api,
    database: Database,
    settings: Settings,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with receiver(always(200)) as hook:
        (delivery_id,) = mail(api, hook.url, 1)
        claimed_at = die_mid_attempt(database, settings, delivery_id)
        with caplog.at_level(logging.WARNING, logger="inbots"):
            assert notify(engine, Job(delivery_id, 1)).outcome == "notified"
    detail = api.delivery(delivery_id)
    (line,) = lost_lines(caplog, delivery_id)
    assert_names_its_mail(line, detail)
    assert reasons(api, delivery_id) == [(1, 1, "publish", "worker_lost"), (2, 1, "retry", "ok")]
    lost = detail["attempts"][0]
    assert lost["status_code"] is None and lost["duration_ms"] is None
    assert lost["url"] == hook.url and "stopped before recording" in lost["response_excerpt"]
    started = datetime.fromisoformat(lost["started_at"].replace("Z", "+00:00"))
    assert abs((started - claimed_at).total_seconds()) < 0.01


@pytest.mark.parametrize("timings", [{**FAST, "retry_schedule": "0.05"}], ids=["two-attempts"])
def test_a_lost_attempt_counts_towards_giving_up(
    api: Api, database: Database, settings: Settings, engine: Engine
) -> None:
    """Two attempts allowed: one answered 500, the next one's worker died. That was the last:
    the delivery is failed, naming the lost attempt, and nothing more is sent."""
    with receiver(always(500)) as hook:
        (delivery_id,) = mail(api, hook.url, 1)
        assert notify(engine, Job(delivery_id, 1)).outcome == "retry"
        time.sleep(0.1)
        die_mid_attempt(database, settings, delivery_id)
        result = notify(engine, Job(delivery_id, 1))
        assert (result.outcome, result.reason) == ("failed", "worker_lost")
        assert len(hook.requests) == 1
    detail = api.delivery(delivery_id)
    assert detail["state"] == "failed"
    assert detail["failure_reason"] == "webhook attempts exhausted (2; last: worker_lost)"
    assert reasons(api, delivery_id) == [
        (1, 1, "publish", "http_500"),
        (2, 1, "retry", "worker_lost"),
    ]


def test_the_sweep_resumes_a_claim_as_soon_as_it_runs_out_within_its_publish(
    api: Api, database: Database, settings: Settings, engine: Engine
) -> None:
    """A worker died mid-attempt: the next sweep after its claim ran out publishes a job for the
    same publish (no publish spent, no publish-lost window waited for), which logs the lost
    attempt and notifies. A duplicate of that job sends nothing twice, and a claim that ran out
    long ago is left to the publish-lost rule."""
    with receiver(always(200)) as hook:
        (delivery_id,) = mail(api, hook.url, 1)
        die_mid_attempt(database, settings, delivery_id)
        published: list[Job] = []
        resumed = {"action": "resumed"}
        before = REGISTRY.get_sample_value("inbots_renotify_actions_total", resumed) or 0
        report = sweep(database, settings, published.extend, limiter=engine.limiter)
        assert (report.resumed, report.republished, report.worker_lost) == (1, 0, 0)
        after = REGISTRY.get_sample_value("inbots_renotify_actions_total", resumed)
        assert after == before + 1
        assert published == [Job(delivery_id, 1, "publish", retry=True)]
        assert notify(engine, published[0]).outcome == "notified"
        assert notify(engine, published[0]).outcome == "skipped"  # the duplicate
        assert len(hook.requests) == 1
        again: list[Job] = []
        assert sweep(database, settings, again.extend, limiter=engine.limiter).resumed == 0
    detail = api.delivery(delivery_id)
    assert detail["publish_count"] == 1
    assert reasons(api, delivery_id) == [(1, 1, "publish", "worker_lost"), (2, 1, "retry", "ok")]

    with receiver(always(200)) as hook:
        (old,) = mail(api, hook.url, 1)
        die_mid_attempt(database, settings, old)
        later = utcnow() + timedelta(
            seconds=max(settings.claim_seconds * 3 + 60, settings.publish_lost_seconds + 1)
        )
        late: list[Job] = []
        report = sweep(database, settings, late.extend, later, limiter=engine.limiter)
        assert (report.resumed, report.republished, report.worker_lost) == (0, 1, 1)
        assert late == [Job(old, 2, "renotify")]  # the publish-lost rule, as before


def test_the_sweep_logs_an_expired_claim_as_worker_lost_before_republishing(
    api: Api,
    database: Database,
    settings: Settings,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with receiver(always(200)) as hook:
        (delivery_id,) = mail(api, hook.url, 1)
        die_mid_attempt(database, settings, delivery_id)
        published: list[Job] = []
        soon = utcnow() + timedelta(seconds=settings.publish_lost_seconds + 1)
        with caplog.at_level(logging.WARNING, logger="inbots"):
            report = sweep(database, settings, published.extend, soon, limiter=engine.limiter)
        (line,) = lost_lines(caplog, delivery_id)
        assert_names_its_mail(line, api.delivery(delivery_id))
        assert (report.worker_lost, report.republished) == (1, 1)
        assert published == [Job(delivery_id, 2, "renotify")]
        assert row(database, delivery_id).claimed_until is None
        assert notify(engine, published[0]).outcome == "notified"
    assert reasons(api, delivery_id) == [(1, 1, "publish", "worker_lost"), (2, 2, "renotify", "ok")]


def test_redeliver_logs_an_expired_claim_and_takes_the_delivery_out_of_line(
    api: Api, database: Database, settings: Settings, engine: Engine
) -> None:
    with receiver(always(200)) as hook:
        lost, parked = mail(api, hook.url, 2)
        die_mid_attempt(database, settings, lost)
        key = url_key(hook.url)
        lease = engine.limiter.acquire(key)
        assert notify(engine, Job(parked, 1)).outcome == "parked"
        engine.limiter.release(key, lease or "")
        for delivery_id in (lost, parked):
            api.ok("POST", f"/deliveries/{delivery_id}/redeliver", 202)
        assert row(database, parked).parked_key is None
        assert row(database, lost).claimed_until is None
    assert reasons(api, lost) == [(1, 1, "publish", "worker_lost")]
    assert api.delivery(lost)["publish_count"] == 2


@pytest.mark.parametrize("backend", ["postgres"])
def test_waking_reads_the_parked_line_through_its_partial_index(
    api: Api, database: Database, settings: Settings, engine: Engine
) -> None:
    """The wake-up of a released slot (oldest parked on one URL) and the sweep's list of URLs
    with a line both read ``ix_deliveries_parked`` (PostgreSQL's own plan), so their cost is the
    line's, not the table's: each attempt runs the first."""
    from sqlalchemy import func

    from inbots.deliveries.parking import _OLDEST

    with receiver(always(200)) as hook:
        ids = mail(api, hook.url, 3)
        key = url_key(hook.url)
        lease = engine.limiter.acquire(key)
        assert lease and [notify(engine, Job(d, 1)).outcome for d in ids] == ["parked"] * 3
        engine.limiter.release(key, lease)
    keys = (
        select(Delivery.parked_key)
        .where(Delivery.parked_key.is_not(None))
        .group_by(Delivery.parked_key)
        .order_by(func.min(Delivery.parked_at))
        .limit(10)
    )
    with database.engine.connect() as conn, conn.begin():
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        conn.exec_driver_sql("SET LOCAL enable_bitmapscan = off")
        for query, params in ((_OLDEST, {"key": key, "n": 1}), (keys, {})):
            compiled = query.compile(dialect=conn.dialect)
            (plan,) = conn.exec_driver_sql(
                "EXPLAIN (FORMAT JSON) " + compiled.string, {**compiled.params, **params}
            ).scalar_one()
            assert "ix_deliveries_parked" in str(plan), plan
        conn.rollback()


@pytest.mark.parametrize("timings", [HELD], ids=["held"])
def test_a_batch_goes_on_with_the_rows_it_can_lock_and_takes_a_held_one_alone(
    api: Api, database: Database, engine: Engine
) -> None:
    """A batch never waits for a row while holding another (the deadlock a thread's close and a
    batch could make): with one of its deliveries locked by another transaction, it claims,
    posts and records the other at once, and claims the held one alone once it is let go."""
    if database.engine.dialect.name != "postgresql":
        pytest.skip("row locks: SQLite runs one writer at a time, so nothing is held meanwhile")
    with receiver(always(204)) as first, receiver(always(204)) as second:
        ids = sorted([*mail(api, first.url, 1), *mail(api, second.url, 1)])
        held, free = ids  # the held row comes first in the batch's order
        with database.engine.connect() as conn:
            conn.execute(select(Delivery.id).where(Delivery.id == held).with_for_update())
            worker, results = in_background(
                lambda: notify_all(engine, [Job(free, 1, "publish"), Job(held, 1, "publish")])[0]
            )
            deadline = time.monotonic() + 10
            while row(database, free).notified_at is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert row(database, free).notified_at is not None, "the free row waited for the held"
            assert row(database, held).notified_at is None and worker.is_alive()
            conn.rollback()  # the other transaction ends
        worker.join(10)
    assert results == [Result("notified")]
    assert reasons(api, free) == [(1, 1, "publish", "ok")]
    assert reasons(api, held) == [(1, 1, "publish", "ok")]


@pytest.mark.parametrize("size", [2, 6])
def test_a_batch_of_successes_is_recorded_in_one_insert_and_one_update(
    api: Api, database: Database, settings: Settings, size: int
) -> None:
    """Successes that finished together (a batch's POSTs against a fast receiver) are recorded
    in as many statements for six deliveries as for two: their attempts in one INSERT, their
    rows released and stamped notified in one UPDATE. Each delivery still gets exactly its own
    attempt and stamp. (The record is called with all of them, as when they all finished
    while the one before was being written: which POSTs finish together is up to timing.)"""
    from sqlalchemy import event

    from inbots.deliveries.attempt import send_and_release
    from inbots.deliveries.notify import _claim_together, _record_all

    wide = Engine(database, settings, make_client(settings), LocalLimiter(16, 30.0))
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(" ".join(statement.split()))

    try:
        with receiver(always(204)) as hook:
            jobs = [Job(d, 1, "publish") for _ in range(size) for d in mail(api, hook.url, 1)]
            jobs.sort(key=lambda job: job.row_id)
            claimed = _claim_together(wide, jobs, utcnow())
            done = [
                (jobs[k], claim, send_and_release(wide, claim, jobs[k].row_id))
                for k, claim in sorted(claimed.items())
            ]
        assert len(done) == size
        event.listen(database.engine, "before_cursor_execute", seen)
        try:
            results = _record_all(wide, done)  # type: ignore[arg-type]
        finally:
            event.remove(database.engine, "before_cursor_execute", seen)
    finally:
        wide.client.close()
    assert results == [Result("notified")] * size
    attempts = [s for s in statements if s.startswith("INSERT INTO delivery_attempts")]
    stamped = [s for s in statements if s.startswith("UPDATE deliveries") and "notified_at" in s]
    assert (len(attempts), len(stamped)) == (1, 1), statements
    for job in jobs:
        assert reasons(api, job.row_id) == [(1, 1, "publish", "ok")]
        assert row(database, job.row_id).notified_at is not None


def test_a_batch_to_healthy_receivers_is_posted_in_turn_and_recorded_in_one_transaction(
    api: Api, database: Database, settings: Settings
) -> None:
    """A batch whose receivers answer at once is posted on the calling thread, one POST after
    another (no sender thread starts), and recorded in one transaction: one attempts INSERT for
    the six, each delivery with exactly its own attempt and stamp. (The hand-over is given all
    the time it could want here, so the machine's speed cannot decide the path.)"""
    from sqlalchemy import event

    from inbots.deliveries.inline import Lookout

    wide = Engine(
        database, settings, make_client(settings), LocalLimiter(16, 30.0), lookout=Lookout(30.0)
    )
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(" ".join(statement.split()))

    try:
        with receiver(always(204)) as hook:
            jobs = [Job(d, 1, "publish") for _ in range(6) for d in mail(api, hook.url, 1)]
            event.listen(database.engine, "before_cursor_execute", seen)
            try:
                results = notify_all(wide, jobs)
            finally:
                event.remove(database.engine, "before_cursor_execute", seen)
        assert results == [Result("notified")] * 6
        assert not wide.senders._threads, "a healthy batch started sender threads"
    finally:
        wide.close()
    attempts = [s for s in statements if s.startswith("INSERT INTO delivery_attempts")]
    assert len(attempts) == 1, statements
    assert len(hook.requests) == 6
    for job in jobs:
        assert reasons(api, job.row_id) == [(1, 1, "publish", "ok")]
        assert row(database, job.row_id).notified_at is not None


def test_a_notify_waits_for_a_turn_and_runs_once_one_is_left(
    api: Api, database: Database, settings: Settings
) -> None:
    """An engine of one turn, held here: a job neither claims nor posts until the turn is left,
    then is notified at once."""
    from inbots.deliveries.inline import Turns

    one = Engine(database, settings, make_client(settings), LocalLimiter(16, 30.0), turns=Turns(1))
    try:
        with receiver(always(204)) as hook:
            (delivery_id,) = mail(api, hook.url, 1)
            with one.turns.take():
                worker, out = in_background(lambda: notify(one, Job(delivery_id, 1)))
                time.sleep(0.3)
                assert hook.requests == [] and row(database, delivery_id).claimed_until is None
            worker.join(10)
            assert out == [Result("notified")]
            assert len(hook.requests) == 1
    finally:
        one.close()


def test_a_woken_job_that_is_skipped_hands_its_slot_to_the_next_in_line(
    api: Api, database: Database, settings: Settings, engine: Engine
) -> None:
    """Two agents share a webhook URL (one line, one cap). Three deliveries park behind a held
    slot: two of the first agent's, then one of the second's. The first agent stops receiving
    message.created. When the slot frees, the oldest is woken and skipped: it must wake the next,
    and that one the next, so the second agent's delivery goes out now — not one slot per sweep
    (the probe: 1,385 alerts waited behind 2,395 unwanted ones, about 5 hours)."""
    with receiver(always(200)) as hook:
        first = mail(api, hook.url, 2)
        (second,) = mail(api, hook.url, 1)
        key = url_key(hook.url)
        lease = engine.limiter.acquire(key)
        assert lease
        assert [notify(engine, Job(d, 1)).outcome for d in [*first, second]] == ["parked"] * 3
        owner = api.delivery(first[0])["recipient"]
        api.ok("PUT", f"/agents/{owner}/webhook", json={"url": hook.url, "webhook_events": []})
        engine.limiter.release(key, lease)
        with database.engine.begin() as conn:  # the slot's release wakes the oldest, as it does
            woken = wake(Session(conn), key, 1, utcnow())
        assert woken == [Job(first[0], 1)]
        outcomes = []
        while woken:
            result = notify(engine, woken.pop())
            outcomes.append(result.outcome)
            woken += list(result.wake)
        assert outcomes == ["skipped", "skipped", "notified"], outcomes
        assert api.delivery(second)["state"] == "notified"
        assert all(row(database, d).parked_key is None for d in [*first, second])


@pytest.mark.parametrize("timings", [{**FAST, "retry_schedule": "0.05"}], ids=["two-attempts"])
def test_routine_outcomes_log_at_info_and_only_a_failure_warns(
    api: Api, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """A receiver answering 500 is its owner's problem and the attempt log records it: the retry
    is an INFO line; the delivery failing for good is the one WARNING. (Before, every retry was
    a warning: thousands in one receiver's outage.)"""
    with receiver(always(500)) as hook:
        (delivery_id,) = mail(api, hook.url, 1)
        with caplog.at_level(logging.INFO, logger="inbots.deliveries.notify"):
            assert notify(engine, Job(delivery_id, 1)).outcome == "retry"
            time.sleep(0.1)
            assert notify(engine, Job(delivery_id, 1)).outcome == "failed"
    lines = [
        (r.levelname, r.getMessage())
        for r in caplog.records
        if r.name == "inbots.deliveries.notify" and getattr(r, "delivery_id", "") == delivery_id
    ]
    assert lines == [
        ("INFO", "webhook attempt 1: retry"),
        ("WARNING", "webhook attempt 2: failed"),
    ], lines


def test_an_alert_has_slots_of_its_own_at_a_url_that_agents_webhooks_fill(
    api: Api, engine: Engine
) -> None:
    """The operator's alert webhook and an agent's webhook share a URL (one chat bridge for
    both). Every slot of that URL is taken by the agent's mail, and more mail waits parked: the
    alert is sent all the same, on the alerts' own slots — a backlog of mail never holds up the
    alert about it. (Before, alerts queued behind mail at the same URL.)"""
    with receiver(always(200)) as hook:
        (mail_id,) = mail(api, hook.url, 1)
        api.ok("PUT", "/operator/webhook", json={"url": hook.url, "events": ["approval.requested"]})
        held = api.agent("held")
        api.ok("PUT", "/policy", json={"approval": {"senders": ["held"]}})
        held.send(held.open_thread("Held", ["operator"])["id"], "needs a yes")
        (alert,) = api.ok("GET", "/events", params={"type": "approval.requested"})["items"]
        lease = engine.limiter.acquire(url_key(hook.url))
        assert lease
        assert notify(engine, Job(mail_id, 1)).outcome == "parked"
        assert notify(engine, Job(alert["id"], 1, alert=True)).outcome == "notified"
        assert [r.headers["webhook-id"] for r in hook.requests] == [alert["id"]]
