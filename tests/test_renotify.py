"""The renotify sweep, called directly as the beat's task and the embedded dispatcher call it,
with a moment an hour ahead so that fresh deliveries look stalled and their publishes lost.

(The test server's own embedded sweep runs too, on the real clock, where nothing is old yet.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from inbots.config import Settings
from inbots.db.engine import Database
from inbots.deliveries.renotify import SweepReport, republish_batch, stall_batch, sweep
from inbots.dispatch.backlog import Backlog, Lane
from inbots.dispatch.jobs import NOTIFY_QUEUE, Job
from inbots.dispatch.local import LocalDispatcher
from inbots.kit.clock import utcnow
from inbots.models.agents import Agent
from inbots.models.deliveries import Delivery
from inbots.webhooks.signing import new_secret
from tests.conftest import free_port
from tests.helpers import Api

HOUR = timedelta(hours=1)


def later() -> datetime:
    return utcnow() + timedelta(hours=1)  # past the 15-minute stall time and the publish window


def no_publish(jobs: Sequence[Job]) -> None:
    assert not jobs, "nothing here has a webhook to republish to"


def mailbox(api: Api, recipients: int, messages: int, **agent: Any) -> tuple[str, list[str]]:
    """A thread from ``sender`` to ``recipients`` new agents (``agent``: extra registration
    fields), with ``messages`` messages in it; returns the thread and its delivery ids."""
    tag = f"{free_port()}"
    names = [f"r{tag}-{i:02d}" for i in range(recipients)]
    for name in names:
        api.ok("POST", "/agents", 201, json={"name": name, **agent})
    sender = api.agent(f"s{tag}")
    thread = sender.open_thread("Stall me", names)["id"]
    ids = [d["id"] for _ in range(messages) for d in sender.send(thread, "hello")["deliveries"]]
    return thread, ids


@pytest.mark.parametrize("settings_overrides", [{"renotify_batch_size": 4}])
def test_stalled_is_stamped_in_bounded_batches_once_per_stall(
    api: Api, database: Database, settings: Settings
) -> None:
    _, ids = mailbox(api, 2, 5)
    now = later()
    reports = [sweep(database, settings, no_publish, now) for _ in range(4)]
    assert [r.stalled for r in reports] == [4, 4, 2, 0]
    for delivery_id in ids:
        detail = api.delivery(delivery_id)
        assert detail["state"] == "stalled" and detail["stalled_at"], detail


@pytest.mark.parametrize("settings_overrides", [{"renotify_batch_size": 5}])
def test_two_sweeps_at_once_never_act_on_the_same_delivery(
    api: Api, database: Database, settings: Settings
) -> None:
    """Each sweep claims its batch (``FOR UPDATE SKIP LOCKED`` on PostgreSQL; one writer at a
    time on SQLite): together they stamp each of the 30 deliveries exactly once."""
    _, ids = mailbox(api, 3, 10)
    now = later()
    reports: list[SweepReport] = []
    lock = threading.Lock()

    def run() -> None:
        while True:
            report = sweep(database, settings, no_publish, now)
            with lock:
                reports.append(report)
            if not report.stalled:
                return

    runners = [threading.Thread(target=run) for _ in range(2)]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join(timeout=60)
    assert sum(r.stalled for r in reports) == len(ids) == 30, reports
    assert max(r.stalled for r in reports) <= 5


def test_a_closed_thread_is_out_of_the_sweep(
    api: Api, database: Database, settings: Settings
) -> None:
    thread, ids = mailbox(api, 2, 3)
    api.ok("POST", f"/threads/{thread}/close")
    with database.engine.connect() as conn:
        closed = conn.scalars(select(Delivery.thread_closed_at).where(Delivery.id.in_(ids))).all()
    assert len(closed) == 6 and all(closed), closed
    assert sweep(database, settings, no_publish, later()).stalled == 0
    assert all(api.delivery(d)["stalled_at"] is None for d in ids)


def _seq_scans(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan] if plan.get("Node Type") == "Seq Scan" else []
    for child in plan.get("Plans", []):
        found += _seq_scans(child)
    return found


def _index_scans(plan: dict[str, Any], index: str) -> list[dict[str, Any]]:
    found = [plan] if plan.get("Index Name") == index else []
    for child in plan.get("Plans", []):
        found += _index_scans(child, index)
    return found


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_sweep_reads_none_of_the_closed_threads_rows(
    api: Api, database: Database, settings: Settings
) -> None:
    """The sweep's cost follows the rows it may act on, not the closed-thread history: with 300
    deliveries in a closed thread (stalled-looking, their webhook publishes unanswered), each of
    its two queries reads only the open thread's rows from its index (PostgreSQL's own count,
    ``EXPLAIN ANALYZE``)."""
    dead = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens: never notified
    closed, _ = mailbox(api, 10, 30, webhook_url=dead)
    api.ok("POST", f"/threads/{closed}/close")
    _, open_ids = mailbox(api, 3, 1, webhook_url=dead)

    now = later()
    with database.engine.connect() as conn:
        # Fresh statistics, as autovacuum would give a real table: the test database is emptied
        # between tests, and stale counts may tie the sweep's index with another partial one.
        conn.exec_driver_sql("ANALYZE deliveries")
        conn.commit()
    with database.engine.connect() as conn, conn.begin():
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")  # read through the indexes
        conn.exec_driver_sql("SET LOCAL enable_bitmapscan = off")
        # Each query through a partial index that leaves closed threads' rows out: the stall
        # batch's own, or (the planner's pick on a table this small) the caps' one, whose
        # predicate the stall query implies too.
        for build, indexes in (
            (stall_batch, ("ix_deliveries_stall", "ix_deliveries_caps")),
            (republish_batch, ("ix_deliveries_republish",)),
        ):
            compiled = build(now, settings).compile(dialect=conn.dialect)
            (plan,) = conn.exec_driver_sql(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + compiled.string, compiled.params
            ).scalar_one()
            scans = [scan for index in indexes for scan in _index_scans(plan["Plan"], index)]
            assert scans, f"none of {indexes} was used: {plan}"
            assert not _seq_scans(plan["Plan"]), f"a table was read whole: {plan}"
            read = sum(s["Actual Rows"] * s["Actual Loops"] for s in scans)
            assert read <= len(open_ids), f"{indexes}: read {read} rows for {len(open_ids)}"
        conn.rollback()


def _published_with_a_webhook(database: Database, ids: list[str], at: datetime) -> None:
    """Make ``ids`` look like webhook deliveries published once at ``at`` and never attempted
    (their recipients given a webhook nothing listens on), without any job for them anywhere:
    only the sweep under test publishes them."""
    with database.engine.begin() as conn:
        recipients = conn.scalars(
            select(Delivery.recipient_id).where(Delivery.id.in_(ids)).distinct()
        ).all()
        conn.execute(
            update(Agent)
            .where(Agent.id.in_(recipients))
            .values(webhook_url=f"http://127.0.0.1:{free_port()}/hook", webhook_secret=new_secret())
        )
        conn.execute(
            update(Delivery)
            .where(Delivery.id.in_(ids))
            .values(publish_count=1, last_published_at=at)
        )


def test_a_publish_younger_than_the_oldest_job_waiting_is_not_lost(
    api: Api, database: Database, settings: Settings
) -> None:
    """A publish is lost only once the broker's line has moved past it: while a job published
    before it still waits for a worker, its own job may be waiting too, however long ago it was
    published. (Before, every publish older than the publish-lost window was taken for lost, and
    a long backlog ended failed.)"""
    _, ids = mailbox(api, 2, 2)
    published = utcnow()
    _published_with_a_webhook(database, ids, published)
    now = published + timedelta(hours=1)  # twelve publish-lost windows later

    def waiting(since: datetime) -> Backlog:
        return Backlog({NOTIFY_QUEUE: Lane(5_000, since.timestamp())})

    jobs: list[Job] = []
    for _ in range(4):  # more runs than publishes: none may be spent, none failed
        report = sweep(
            database, settings, jobs.extend, now, backlog=lambda: waiting(published - HOUR)
        )
        assert report.republished == report.exhausted == 0, report
    assert jobs == []
    unreadable = sweep(database, settings, jobs.extend, now, backlog=lambda: None)
    assert unreadable.republished == unreadable.exhausted == 0 and jobs == []

    # The line moved past them: their jobs left it without a trace. Published again.
    report = sweep(database, settings, jobs.extend, now, backlog=lambda: waiting(now))
    assert report.republished == len(ids) == 4, report
    assert sorted(j.row_id for j in jobs) == sorted(ids)
    assert {(j.publish, j.trigger) for j in jobs} == {(2, "renotify")}
    # An empty broker holds nothing: the window alone decides, as before.
    jobs.clear()
    later_still = now + timedelta(hours=1)
    assert sweep(database, settings, jobs.extend, later_still, backlog=lambda: Backlog({}))
    assert {j.publish for j in jobs} == {3}


def test_the_embedded_dispatcher_reports_the_jobs_waiting_in_each_lane(settings: Settings) -> None:
    """The embedded default's lanes keep the publish time of each job waiting for a thread, as
    the broker's queues do: the sweep and /v1/stats read the same backlog in both run modes."""
    release = threading.Event()
    started = threading.Semaphore(0)

    def run(jobs: Sequence[Job], then: Any) -> list[Any]:
        started.release()
        release.wait(10)
        return []

    local = LocalDispatcher(settings, run, lambda publisher: None, workers=1, batch_size=1)
    local.start()
    try:
        before = time.time()
        local.publish([Job(f"dlv_{i}", 1) for i in range(3)])
        local.publish([Job("evt_alert", 1, alert=True), Job("dlv_r", 1, retry=True)])
        assert started.acquire(timeout=5)  # the notify lane's one thread holds the first job
        waiting = local.backlog()
        assert waiting.lanes[NOTIFY_QUEUE].depth == 2  # the other two wait for that thread
        oldest = waiting.oldest()
        assert oldest is not None and before <= oldest <= time.time()
        assert waiting.oldest_age(oldest + 7) == 7
        assert waiting.waiting_since() is not None
    finally:
        release.set()
        local.stop()
    time.sleep(0.05)
    assert local.backlog().lanes[NOTIFY_QUEUE].depth in (0, 2)  # stopped: cancelled or ran
