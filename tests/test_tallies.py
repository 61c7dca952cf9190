"""The operator's counts by state read the open rows and the acknowledged tally
(:mod:`inbots.deliveries.tallies`); they must always equal a count of every row by its state."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select, update

from inbots.db.engine import Database
from inbots.db.uow import unit_of_work
from inbots.deliveries import tallies
from inbots.deliveries.retention import purge
from inbots.deliveries.state import STATES
from inbots.deliveries.state_sql import state_sql
from inbots.kit.clock import utcnow
from inbots.models.deliveries import Delivery
from inbots.models.threads import Thread
from tests.helpers import Api, Caller, metric_samples, sample
from tests.processes import inbots_executable


def counted_row_by_row(database: Database, workspace_id: str | None) -> dict[str, int]:
    """What the counts were before the tally: the state of every delivery, grouped."""
    state = state_sql(Delivery).label("state")
    stmt = select(state, func.count()).group_by(state)
    if workspace_id is not None:
        stmt = stmt.where(Delivery.workspace_id == workspace_id)
    with database.engine.connect() as conn:
        rows = conn.execute(stmt).all()
    counts = dict.fromkeys(STATES, 0) | {name: int(n) for name, n in rows}
    return counts | {"total": sum(counts.values())}


def workspace_of(database: Database, delivery_id: str) -> str:
    with database.engine.connect() as conn:
        found = conn.execute(select(Delivery.workspace_id).where(Delivery.id == delivery_id))
        return str(found.scalar_one())


def assert_exact(api: Api, database: Database, workspace_id: str) -> dict[str, int]:
    counts: dict[str, int] = api.ok("GET", "/stats")["deliveries"]
    assert counts == counted_row_by_row(database, workspace_id)
    return counts


def test_the_counts_stay_exact_through_acknowledgements_and_purges(
    api: Api, other_api: Api, database: Database, settings: Any
) -> None:
    readers = [api.agent(f"reader-{i}") for i in range(4)]
    sender = api.agent("sender")
    thread = sender.open_thread("Counted", [r.name for r in readers])
    closing = sender.open_thread("To be purged", [r.name for r in readers[:2]])
    sent = [sender.send(thread["id"], f"job {n}") for n in range(6)]
    purged_sent = [sender.send(closing["id"], f"old {n}") for n in range(3)]
    elsewhere = other_api.agent("elsewhere")
    other_api.agent("peer")
    elsewhere.send(elsewhere.open_thread("Other", ["peer"])["id"], "not ours")
    ws = workspace_of(database, sent[0]["deliveries"][0]["id"])
    assert assert_exact(api, database, ws)["acknowledged"] == 0

    def mine(reader: Caller, messages: list[dict[str, Any]]) -> list[str]:
        return [d["id"] for m in messages for d in m["deliveries"] if d["recipient"] == reader.name]

    # By delivery id, some twice (the second time "already"), and by message id.
    first = readers[0].ok("POST", "/acks", json={"ids": mine(readers[0], sent[:3])})
    assert len(first["acknowledged"]) == 3
    again = readers[0].ok("POST", "/acks", json={"ids": mine(readers[0], sent[:4])})
    assert len(again["acknowledged"]) == 1 and len(again["already"]) == 3
    by_message = [m["message"]["id"] for m in sent[:2]]
    assert len(readers[1].ok("POST", "/acks", json={"ids": by_message})["acknowledged"]) == 2
    # Read and acknowledge in one call; and the mail of the thread that will be purged.
    readers[2].ok("GET", f"/messages/{sent[0]['message']['id']}", params={"ack": "done"})
    for reader in readers[:2]:
        reader.ok("POST", "/acks", json={"ids": mine(reader, purged_sent[:2])})
    assert assert_exact(api, database, ws)["acknowledged"] == 4 + 2 + 1 + 4

    # Many agents at once (on PostgreSQL their acknowledgements run side by side).
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(
            pool.map(
                lambda r: r.ok("POST", "/acks", json={"ids": mine(r, sent)}),
                readers,
            )
        )
    assert assert_exact(api, database, ws)["acknowledged"] == 4 * 6 + 4

    # Retention deletes the closed thread with its 4 acknowledged and 2 open deliveries.
    api.ok("POST", f"/threads/{closing['id']}/close")
    with unit_of_work(database) as uow:
        uow.session.execute(
            update(Thread)
            .where(Thread.id == closing["id"])
            .values(closed_at=utcnow() - timedelta(days=40))
        )
    report = purge(database, settings, days=30)
    assert report.deliveries == 6
    counts = assert_exact(api, database, ws)
    assert counts["acknowledged"] == 4 * 6 and counts["total"] == 4 * 6

    # /metrics counts every workspace: the other one's delivery is still waiting.
    everywhere = counted_row_by_row(database, None)
    assert everywhere["total"] == 4 * 6 + 1
    samples = metric_samples(api.client.get("/metrics").text)
    for state in STATES:
        assert sample(samples, "inbots_deliveries", state=state) == everywhere[state], state


def test_recount_rebuilds_the_tally_from_the_rows(api: Api, database: Database) -> None:
    reader = api.agent("reader")
    sender = api.agent("sender")
    thread = sender.open_thread("Recount", ["reader"])
    ids = [sender.send(thread["id"], f"n {n}")["deliveries"][0]["id"] for n in range(3)]
    ws = workspace_of(database, ids[0])
    reader.ok("POST", "/acks", json={"ids": ids[:2]})
    with unit_of_work(database) as uow:  # a bulk load that bypassed the tally
        uow.session.execute(
            update(Delivery).where(Delivery.id == ids[2]).values(acknowledged_at=utcnow())
        )
    assert api.ok("GET", "/stats")["deliveries"]["acknowledged"] == 2
    with unit_of_work(database) as uow:
        tallies.recount(uow.session)
    assert assert_exact(api, database, ws)["acknowledged"] == 3


def test_inbots_db_recount_repairs_the_tally(api: Api, database: Database, db_url: str) -> None:
    api.agent("reader")
    sender = api.agent("sender")
    thread = sender.open_thread("Recount", ["reader"])
    ids = [sender.send(thread["id"], f"n {n}")["deliveries"][0]["id"] for n in range(2)]
    ws = workspace_of(database, ids[0])
    with unit_of_work(database) as uow:  # acknowledged behind the tally's back
        uow.session.execute(
            update(Delivery).where(Delivery.id.in_(ids)).values(acknowledged_at=utcnow())
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("INBOTS_")}
    done = subprocess.run(
        [inbots_executable(), "db", "recount"],
        env=env | {"INBOTS_DATABASE_URL": db_url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2 acknowledged deliveries counted."
    assert assert_exact(api, database, ws)["acknowledged"] == 2


def test_failed_attempts_of_the_last_hour_read_only_the_window(
    api: Api, database: Database
) -> None:
    """``attempts_failed_last_hour`` counts the workspace's failed attempts since an hour ago,
    and PostgreSQL reads them through ``ix_delivery_attempts_started_at``: the window, not the
    whole attempt log (which grows with every notification ever sent)."""
    from datetime import timedelta

    from sqlalchemy import insert

    from inbots.deliveries.attempts import attempt_values
    from inbots.kit.clock import utcnow
    from inbots.models.deliveries import DeliveryAttempt
    from inbots.stats.service import attempts_failed_since

    sender, reader = api.agent("sender"), api.agent("reader")
    thread = sender.open_thread("Attempts", [reader.name])["id"]
    delivery = sender.send(thread, "hello")["deliveries"][0]["id"]
    now = utcnow()
    rows = [  # (minutes ago, reason): two failures inside the hour, one outside, one success
        (5, "timeout"),
        (50, "http_500"),
        (70, "timeout"),
        (10, "ok"),
    ]
    with database.engine.begin() as conn:
        for n, (minutes, reason) in enumerate(rows, start=1):
            conn.execute(
                insert(DeliveryAttempt),
                attempt_values(
                    delivery,
                    number=n,
                    publish=1,
                    trigger="publish",
                    url="http://127.0.0.1:9/hook",
                    started_at=now - timedelta(minutes=minutes),
                    duration_ms=1,
                    status_code=None,
                    reason=reason,
                    response_excerpt=None,
                ),
            )
    assert api.ok("GET", "/stats")["attempts_failed_last_hour"] == 2
    if database.engine.dialect.name != "postgresql":
        return
    with database.engine.connect() as conn:
        (workspace_id,) = conn.execute(
            select(Delivery.workspace_id).where(Delivery.id == delivery)
        ).one()
    query = attempts_failed_since(workspace_id, now - timedelta(hours=1))
    with database.engine.connect() as conn, conn.begin():
        # A table of a few rows: scans and the loop over the workspace's deliveries priced out,
        # so that the plan shows whether the window can be read by itself (it could not before
        # 0021: every plan read the whole log, or every delivery of the workspace).
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        conn.exec_driver_sql("SET LOCAL enable_nestloop = off")
        compiled = query.compile(dialect=conn.dialect)
        (plan,) = conn.exec_driver_sql(
            "EXPLAIN (FORMAT JSON) " + compiled.string, compiled.params
        ).scalar_one()
        assert "ix_delivery_attempts_started_at" in str(plan), plan
        conn.rollback()
