"""Retention (agents-and-governance.md §3): closed threads whose ``closed_at`` is older than
``INBOTS_RETENTION_DAYS`` are deleted with their messages, deliveries, events and attempts, in
short batches, by the sweep or ``inbots purge`` — and nothing else is."""

from __future__ import annotations

import json
import subprocess
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select, update

from inbots.config import Settings
from inbots.db.engine import Database
from inbots.db.uow import unit_of_work
from inbots.deliveries.retention import purge
from inbots.kit.clock import utcnow
from inbots.models.deliveries import Delivery, DeliveryAttempt
from inbots.models.events import Event
from inbots.models.messages import Message
from inbots.models.threads import Participant, Thread
from tests.helpers import Api, Caller
from tests.processes import clean_env, inbots_executable
from tests.receivers import always, receiver

MODELS: dict[str, Any] = {
    "threads": Thread,
    "participants": Participant,
    "messages": Message,
    "deliveries": Delivery,
    "events": Event,
    "attempts": DeliveryAttempt,
}


def census(database: Database) -> dict[str, int]:
    with unit_of_work(database, readonly=True) as uow:
        return {
            name: uow.session.scalar(select(func.count()).select_from(model)) or 0
            for name, model in MODELS.items()
        }


def of_threads(database: Database, ids: list[str]) -> dict[str, int]:
    """How many rows of each table belong to these threads."""
    with unit_of_work(database, readonly=True) as uow:
        deliveries = select(Delivery.id).where(Delivery.thread_id.in_(ids))
        events = select(Event.id).where(Event.thread_id.in_(ids))

        def count(model: Any, *where: Any) -> int:
            return uow.session.scalar(select(func.count()).select_from(model).where(*where)) or 0

        return {
            "threads": count(Thread, Thread.id.in_(ids)),
            "participants": count(Participant, Participant.thread_id.in_(ids)),
            "messages": count(Message, Message.thread_id.in_(ids)),
            "deliveries": count(Delivery, Delivery.thread_id.in_(ids)),
            "events": count(Event, Event.thread_id.in_(ids)),
            "attempts": count(
                DeliveryAttempt,
                DeliveryAttempt.delivery_id.in_(deliveries) | DeliveryAttempt.event_id.in_(events),
            ),
        }


def backdate(database: Database, thread_id: str, days: float) -> None:
    """Pretend the thread was closed ``days`` ago."""
    with unit_of_work(database) as uow:
        uow.session.execute(
            update(Thread)
            .where(Thread.id == thread_id)
            .values(closed_at=utcnow() - timedelta(days=days))
        )


def busy_thread(api: Api, alice: Caller, bob: Caller, title: str, messages: int = 3) -> str:
    """A thread with messages, an acknowledgement (an event) and webhook attempts."""
    thread = alice.open_thread(title, ["bob", "hooked"])["id"]
    for n in range(messages):
        alice.send(thread, f"{title} {n}")
    mine = [i for i in bob.inbox(limit=200)["items"] if i["thread_id"] == thread]
    first = mine[0]["delivery_id"]
    bob.ok("POST", "/acks", json={"ids": [first], "outcome": "done"})
    return thread


def world(api: Api, hook_url: str) -> tuple[Caller, Caller]:
    api.ok("POST", "/agents", 201, json={"name": "hooked", "webhook_url": hook_url})
    return api.agent("alice"), api.agent("bob")


@pytest.mark.parametrize("settings_overrides", [{"retention_batch_size": 2}])
def test_retention_deletes_exactly_the_closed_threads_past_the_window(
    api: Api, database: Database, settings: Settings
) -> None:
    with receiver(always(200)) as hook:
        alice, bob = world(api, hook.url)
        old = [busy_thread(api, alice, bob, f"old {n}") for n in range(5)]
        recent = busy_thread(api, alice, bob, "closed yesterday")
        still_open = busy_thread(api, alice, bob, "open for a long time")
        pending = busy_thread(api, alice, bob, "close requested")
        hook.wait_for(8 * 3, 15)  # every delivery notified: attempts exist
        time.sleep(0.3)
        for thread in [*old, recent]:
            api.ok("POST", f"/threads/{thread}/close")
        alice.ok("POST", f"/threads/{pending}/close-request", 202)
        for thread in old:
            backdate(database, thread, 31)
        backdate(database, recent, 29)
        with unit_of_work(database) as uow:  # old activity does not matter, only the close
            uow.session.execute(
                update(Thread)
                .where(Thread.id.in_([still_open, pending]))
                .values(last_activity_at=utcnow() - timedelta(days=400))
            )

        before = census(database)
        doomed = of_threads(database, old)
        assert doomed["attempts"] > 0 and doomed["events"] > 0 and doomed["messages"] == 15

        dry = purge(database, settings, days=30, dry_run=True)
        assert (dry.threads, dry.messages, dry.deliveries, dry.events, dry.attempts) == (
            5,
            doomed["messages"],
            doomed["deliveries"],
            doomed["events"],
            doomed["attempts"],
        )
        assert census(database) == before  # a dry run deletes nothing

        transactions: list[float] = []
        engine = database.engine

        def began(conn: Any) -> None:
            conn.info["began"] = time.monotonic()

        def committed(conn: Any) -> None:
            transactions.append(time.monotonic() - conn.info.pop("began", time.monotonic()))

        event.listen(engine, "begin", began)
        event.listen(engine, "commit", committed)
        try:
            report = purge(database, settings, days=30)
        finally:
            event.remove(engine, "begin", began)
            event.remove(engine, "commit", committed)

    assert report.threads == 5
    assert report.batches == 3  # 2 + 2 + 1 threads, each batch its own transaction
    assert max(transactions) < 2.0, transactions
    after = census(database)
    assert {name: before[name] - after[name] for name in before} == doomed
    assert of_threads(database, old) == dict.fromkeys(MODELS, 0)
    for thread in (recent, still_open, pending):
        assert of_threads(database, [thread])["threads"] == 1
        assert api.ok("GET", f"/threads/{thread}")["id"] == thread
    assert purge(database, settings, days=30).threads == 0  # nothing left to do
    assert purge(database, settings).threads == 0  # retention_days 0: keep forever


@pytest.mark.parametrize(
    "settings_overrides", [{"retention_days": 1, "renotify_interval_seconds": 0.2}]
)
def test_the_sweep_applies_retention(api: Api, database: Database) -> None:
    alice, _ = api.agent("alice"), api.agent("bob")
    gone = alice.open_thread("Old", ["bob"])["id"]
    kept = alice.open_thread("Recent", ["bob"])["id"]
    for thread in (gone, kept):
        alice.send(thread, "hello")
        api.ok("POST", f"/threads/{thread}/close")
    backdate(database, gone, 2)
    deadline = time.monotonic() + 10
    while of_threads(database, [gone])["threads"]:
        assert time.monotonic() < deadline, "the sweep did not apply retention"
        time.sleep(0.1)
    assert of_threads(database, [gone]) == dict.fromkeys(MODELS, 0)
    assert of_threads(database, [kept])["messages"] == 1


def test_inbots_purge_through_the_cli(
    api: Api, database: Database, settings: Settings, tmp_path: Path
) -> None:
    alice, _ = api.agent("alice"), api.agent("bob")
    gone = alice.open_thread("Old", ["bob"])["id"]
    kept = alice.open_thread("Recent", ["bob"])["id"]
    for thread in (gone, kept):
        alice.send(thread, "hello")
        api.ok("POST", f"/threads/{thread}/close")
    backdate(database, gone, 10)
    backdate(database, kept, 1)
    env = clean_env(tmp_path, INBOTS_DATABASE_URL=settings.database_url)

    def purge_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [inbots_executable(), "purge", *args],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )

    empty = subprocess.run(  # a database nobody migrated: one line saying what to do
        [inbots_executable(), "purge", "--dry-run", "--days", "1"],
        env={**env, "INBOTS_DATABASE_URL": f"sqlite:///{tmp_path / 'empty.db'}"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert empty.returncode == 1, empty
    assert empty.stderr.count("\n") == 1 and "inbots db upgrade" in empty.stderr, empty.stderr
    assert not (tmp_path / "empty.db").exists()  # refused before an empty file was made

    off = purge_cli("--dry-run")  # retention off: nothing goes, and the note says how to purge
    assert off.returncode == 0, off
    assert off.stdout.strip() == "Would delete nothing: retention is off.", off.stdout
    assert "INBOTS_RETENTION_DAYS" in off.stderr and "--days" in off.stderr
    off_json = json.loads(purge_cli("--output", "json").stdout)
    assert off_json["days"] == 0 and off_json["closed_before"] is None
    assert (off_json["dry_run"], off_json["threads"], off_json["messages"]) == (False, 0, 0)
    assert of_threads(database, [gone])["threads"] == 1  # nothing deleted

    dry = purge_cli("--dry-run", "--days", "5", "--output", "json")
    assert dry.returncode == 0, dry.stderr
    counted = json.loads(dry.stdout)
    assert counted["dry_run"] is True
    assert (counted["threads"], counted["messages"], counted["deliveries"]) == (1, 1, 1)
    assert of_threads(database, [gone])["threads"] == 1

    done = purge_cli("--days", "5")
    assert done.returncode == 0, done.stderr
    assert "Deleted 1 threads" in done.stdout and "1 messages" in done.stdout
    assert of_threads(database, [gone]) == dict.fromkeys(MODELS, 0)
    assert of_threads(database, [kept])["messages"] == 1

    by_setting = subprocess.run(
        [inbots_executable(), "purge", "--dry-run"],
        env={**env, "INBOTS_RETENTION_DAYS": "0.5"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert by_setting.returncode == 0 and "Would delete 1 threads" in by_setting.stdout
