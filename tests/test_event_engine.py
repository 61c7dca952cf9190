"""Events in the one delivery engine, part by part: the renotify sweep republishes an event's lost
publish and leaves alone what nobody subscribed to, and an event waits in its URL's line with the
deliveries (one cap, one line per URL, oldest first).

As in ``test_fair_dispatch``: the test server publishes to a private Redis that no worker
consumes (every publish is "lost"), and the test makes each notify run itself
(``inbots.deliveries.notify.notify``, as the Celery task and the embedded dispatcher call it),
with real receivers on loopback.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import standardwebhooks
from prometheus_client import REGISTRY
from sqlalchemy import select

from inbots.config import Settings
from inbots.db.engine import Database
from inbots.deliveries.attempt import Engine, make_client
from inbots.deliveries.notify import notify
from inbots.deliveries.renotify import sweep
from inbots.dispatch.jobs import Job
from inbots.dispatch.limiter import LocalLimiter, url_key
from inbots.kit.clock import utcnow
from inbots.models.events import Event
from tests.celery_harness import (  # noqa: F401  (fixtures: a broker nobody consumes)
    FAST,
    redis_broker_fixture,
    settings_overrides_fixture,
    timings_fixture,
)
from tests.helpers import Api, Caller
from tests.receivers import always, receiver


@pytest.fixture
def engine(database: Database, settings: Settings) -> Iterator[Engine]:
    """The worker's parts, in this process, with a cap of one request in flight per URL."""
    made = Engine(database, settings, make_client(settings), LocalLimiter(1, 30.0))
    yield made
    made.client.close()


def hooked(api: Api, url: str, events: list[str]) -> tuple[Caller, str]:
    name = f"lead-{uuid.uuid4().hex[:8]}"
    agent = api.agent(name)
    secret = agent.ok("PUT", "/me/webhook", json={"url": url, "webhook_events": events})
    return agent, secret["signing_secret"]


def acknowledged_event(api: Api, lead: Caller) -> tuple[str, str]:
    """A worker acknowledges a message ``lead`` sent; returns (event id, delivery id)."""
    name = f"worker-{uuid.uuid4().hex[:8]}"
    worker = api.agent(name)
    thread = lead.open_thread("Delegated", [name])["id"]
    sent = lead.send(thread, "do it")
    worker.ok("POST", "/acks", json={"ids": [sent["message"]["id"]], "outcome": "done"})
    (event,) = api.ok("GET", "/events", params={"agent": lead.name})["items"]
    return event["id"], sent["deliveries"][0]["id"]


def event_row(database: Database, event_id: str) -> Any:
    with database.engine.connect() as conn:
        return conn.execute(select(Event).where(Event.id == event_id)).one()


def test_the_sweep_republishes_a_lost_event_publish(
    api: Api, database: Database, settings: Settings, engine: Engine
) -> None:
    """The event's first publish never reached a worker. A sweep past the publish-lost window
    publishes it again (trigger renotify); that job notifies. After the publishes run out, the
    sweep stamps it failed, as it does a delivery."""
    with receiver(always(200)) as hook:
        lead, secret = hooked(api, hook.url, ["message.acknowledged"])
        event_id, _ = acknowledged_event(api, lead)
        assert event_row(database, event_id).publish_count == 1

        published: list[Job] = []
        soon = utcnow() + timedelta(seconds=settings.publish_lost_seconds + 1)
        report = sweep(database, settings, published.extend, soon, limiter=engine.limiter)
        assert report.republished >= 1
        assert Job(event_id, 2, "renotify") in published
        assert notify(engine, Job(event_id, 2, "renotify")).outcome == "notified"
        (request,) = hook.wait_for(1)
    payload = standardwebhooks.Webhook(secret).verify(request.body, request.headers)
    assert payload["event_id"] == event_id and request.headers["webhook-id"] == event_id
    detail = api.ok("GET", f"/events/{event_id}")
    assert detail["state"] == "notified" and detail["publish_count"] == 2
    assert [(a["publish"], a["trigger"], a["reason"]) for a in detail["attempts"]] == [
        (2, "renotify", "ok")
    ]


@pytest.mark.parametrize("timings", [{**FAST, "publish_attempts": 2}])
def test_an_event_whose_publishes_run_out_is_failed_by_the_sweep(
    api: Api, database: Database, settings: Settings
) -> None:
    lead, _ = hooked(api, "http://127.0.0.1:9/hook", ["message.acknowledged"])
    event_id, _ = acknowledged_event(api, lead)
    published: list[Job] = []
    before = counted()
    for hours in (1, 2):
        sweep(database, settings, published.extend, utcnow() + timedelta(hours=hours))
    assert Job(event_id, 2, "renotify") in published
    detail = api.ok("GET", f"/events/{event_id}")
    assert detail["state"] == "failed" and detail["failure_reason"] == (
        "publish attempts exhausted"
    )
    # The sweep gave up one row, an event: no failed delivery to count (the sweep is in this
    # process, so are its counters).
    after = counted()
    assert after["exhausted"] == before["exhausted"] + 1, (before, after)
    assert after["failed_deliveries"] == before["failed_deliveries"], (before, after)


def counted() -> dict[str, float]:
    def value(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    return {
        "exhausted": value("inbots_renotify_actions_total", action="exhausted"),
        "failed_deliveries": value("inbots_deliveries_failed_total", why="publish_exhausted"),
    }


def test_the_sweep_publishes_nothing_nobody_subscribed_to(
    api: Api, database: Database, settings: Settings
) -> None:
    """A message.created delivery to an agent whose webhook does not receive it is never
    published, and an event whose agent has since unsubscribed is not republished."""
    lead, _ = hooked(api, "http://127.0.0.1:9/hook", ["message.acknowledged"])
    event_id, _ = acknowledged_event(api, lead)  # published once: lead receives it
    other = f"quiet-{uuid.uuid4().hex[:8]}"
    quiet = api.agent(other)
    quiet.ok(
        "PUT",
        "/me/webhook",
        json={"url": "http://127.0.0.1:9/q", "webhook_events": ["thread.closed"]},
    )
    thread = lead.open_thread("To the quiet one", [other])["id"]
    delivery_id = lead.send(thread, "no push")["deliveries"][0]["id"]
    assert api.delivery(delivery_id)["publish_count"] == 0
    lead.ok("PUT", "/me/webhook", json={"url": "http://127.0.0.1:9/hook", "webhook_events": []})

    published: list[Job] = []
    sweep(database, settings, published.extend, utcnow() + timedelta(hours=1))
    ours = {job.row_id for job in published} & {event_id, delivery_id}
    assert ours == set(), published
    assert event_row(database, event_id).publish_count == 1
    assert api.delivery(delivery_id)["publish_count"] == 0


def test_an_event_waits_in_its_urls_line_behind_a_delivery(
    api: Api, database: Database, settings: Settings, engine: Engine
) -> None:
    """Deliveries and events to one URL share its in-flight cap and its line: with the only slot
    taken, a delivery and then an event park; each released slot wakes the oldest of the line,
    whichever kind it is; the event keeps its place and is notified in its turn."""
    with receiver(always(200)) as hook:
        lead, _ = hooked(api, hook.url, ["message.created", "message.acknowledged"])
        sender = api.agent(f"sender-{uuid.uuid4().hex[:8]}")
        thread = sender.open_thread("To lead", [lead.name])["id"]
        delivery_id = sender.send(thread, "for lead")["deliveries"][0]["id"]
        event_id, _ = acknowledged_event(api, lead)

        key = url_key(hook.url)
        lease = engine.limiter.acquire(key)
        assert lease
        assert notify(engine, Job(delivery_id, 1)).outcome == "parked"
        assert notify(engine, Job(event_id, 1)).outcome == "parked"
        parked = event_row(database, event_id)
        assert parked.parked_key == key and parked.parked_at is not None

        engine.limiter.release(key, lease)
        published: list[Job] = []
        later = utcnow() + timedelta(seconds=1)
        sweep(database, settings, published.extend, later, limiter=engine.limiter)
        ours = [job for job in published if job.row_id in (delivery_id, event_id)]
        assert ours == [Job(delivery_id, 1)]  # one slot: the oldest of the line
        done = notify(engine, ours[0])
        assert done.outcome == "notified" and done.wake == (Job(event_id, 1),)
        assert notify(engine, done.wake[0]).outcome == "notified"
        requests = hook.wait_for(2)
    assert [r.headers["webhook-id"] for r in requests] == [delivery_id, event_id]
    assert event_row(database, event_id).parked_key is None


def _index_scans(plan: dict[str, Any], index: str) -> list[dict[str, Any]]:
    found = [plan] if plan.get("Index Name") == index else []
    for child in plan.get("Plans", []):
        found += _index_scans(child, index)
    return found


@pytest.mark.parametrize("backend", ["postgres"])
def test_the_sweep_and_the_long_poll_read_events_through_their_partial_indexes(
    api: Api, database: Database, settings: Settings
) -> None:
    """The sweep's republish batch of events reads ``ix_events_republish`` and the long-poll's
    receipts ``ix_events_unshown`` (PostgreSQL's own plans): their cost follows the rows they
    may act on, not the events table."""
    from inbots.deliveries.outbox import EVENT
    from inbots.deliveries.receipts import _unshown
    from inbots.deliveries.renotify import republish_batch

    lead, _ = hooked(api, "http://127.0.0.1:9/hook", ["message.acknowledged"])
    acknowledged_event(api, lead)
    caller = type("Who", (), {"agent_id": "ag_someone"})()
    unshown = select(Event.id).where(*_unshown(caller)).limit(1)  # type: ignore[arg-type]
    queries = (
        (republish_batch(utcnow() + timedelta(hours=1), settings, EVENT), "ix_events_republish"),
        (unshown, "ix_events_unshown"),
    )
    with database.engine.connect() as conn, conn.begin():
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        conn.exec_driver_sql("SET LOCAL enable_bitmapscan = off")
        for query, index in queries:
            compiled = query.compile(
                dialect=conn.dialect, compile_kwargs={"render_postcompile": True}
            )
            (plan,) = conn.exec_driver_sql(
                "EXPLAIN (FORMAT JSON) " + compiled.string, compiled.params
            ).scalar_one()
            assert _index_scans(plan["Plan"], index), f"{index} was not used: {plan}"
        conn.rollback()
