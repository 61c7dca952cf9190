"""Operator alerts in the embedded default: the operator's alert webhook (``/v1/operator/webhook``)
gets ``delivery.stalled``, ``delivery.failed``, ``agent.webhook_failing`` and
``approval.requested`` through the agents' event engine (signed, retried, logged), each once per
transition; the Prometheus rules shipped in docs/ name metrics a real scrape has."""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import standardwebhooks
import yaml
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from inbots.alerts.service import approval_requested
from inbots.config import Settings
from inbots.db.engine import Database
from inbots.db.uow import unit_of_work
from inbots.deliveries.renotify import sweep
from inbots.deliveries.retention import purge
from inbots.kit.clock import utcnow
from inbots.models.agents import Agent
from tests.conftest import ServerThread
from tests.helpers import Api, metric_samples, sample
from tests.receivers import FAST, Receiver, always, receiver
from tests.test_cli import assert_one_line_error, inbots, ok

ALERTS = [
    "delivery.stalled",
    "delivery.failed",
    "agent.webhook_failing",
    "approval.requested",
    "queue.backlog",
    "workers.down",
    "reservation.conflict",
]
RULES = Path(__file__).resolve().parents[1] / "docs" / "alerts" / "inbots.rules.yml"
# A delivery stalls after a second; the sweep runs every 0.3 s; three failures make a streak;
# alerts about one agent are paced half a second apart.
ALERTING = {
    **FAST,
    "stall_seconds": 1.0,
    "renotify_interval_seconds": 0.3,
    "alert_webhook_failures": 3,
    "alert_interval_seconds": 0.5,
}


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return dict(ALERTING)


def alert_hook(api: Api, hook: Receiver, events: list[str] | None = None) -> str:
    """Point the operator's alert webhook at ``hook``; returns its signing secret."""
    body: dict[str, Any] = {"url": hook.url}
    if events is not None:
        body["events"] = events
    made = api.ok("PUT", "/operator/webhook", json=body)
    assert made["signing_secret"].startswith("whsec_")
    return str(made["signing_secret"])


def alerts_of(
    hook: Receiver,
    secret: str,
    event_type: str,
    count: int,
    timeout: float = 10.0,
    **match: str,
) -> list[dict[str, Any]]:
    """The first ``count`` alerts of ``event_type`` at ``hook`` (with the fields in ``match``),
    each verified with ``secret`` by the reference ``standardwebhooks`` verifier."""
    deadline = time.monotonic() + timeout
    while True:
        with hook.lock:
            requests = list(hook.requests)
        found = []
        for request in requests:
            payload = standardwebhooks.Webhook(secret).verify(request.body, request.headers)
            assert request.headers["webhook-id"] == payload["event_id"]
            if payload["type"] == event_type and all(payload[k] == v for k, v in match.items()):
                found.append(payload)
        if len(found) >= count:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"expected {count} {event_type} alerts, got {found}")
        time.sleep(0.05)


# The webhook's configuration.


def test_the_operator_sets_shows_changes_and_removes_the_alert_webhook(api: Api) -> None:
    made = api.ok("PUT", "/operator/webhook", json={"url": "http://127.0.0.1:9/alerts"})
    assert made["url"] == "http://127.0.0.1:9/alerts"
    assert made["events"] == ALERTS
    assert re.fullmatch(r"whsec_[A-Za-z0-9+/=]+", made["signing_secret"])
    shown = api.ok("GET", "/operator/webhook")
    assert shown["signing_secret"] is None and shown["events"] == ALERTS
    # A later change keeps the secret (unshown) and, when events are omitted, the types.
    chosen = api.ok(
        "PUT",
        "/operator/webhook",
        json={"url": made["url"], "events": ["approval.requested", "delivery.failed"]},
    )
    assert chosen["events"] == ["delivery.failed", "approval.requested"]
    assert chosen["signing_secret"] is None
    moved = api.ok("PUT", "/operator/webhook", json={"url": "http://127.0.0.1:9/other"})
    assert moved["events"] == chosen["events"] and moved["url"].endswith("/other")
    assert (
        api.ok("PUT", "/operator/webhook", json={"url": moved["url"], "events": []})["events"] == []
    )
    api.ok("DELETE", "/operator/webhook", 204)
    api.ok("DELETE", "/operator/webhook", 204)  # idempotent
    assert api.call("GET", "/operator/webhook").status_code == 404
    # A new webhook after removal gets a new secret and every type again.
    again = api.ok("PUT", "/operator/webhook", json={"url": moved["url"]})
    assert again["signing_secret"] != made["signing_secret"] and again["events"] == ALERTS
    # The operator's alert webhook is not an agent webhook: agents' listings do not show it.
    assert all(a["username"] != "operator" for a in api.ok("GET", "/agents")["items"])


def test_an_agent_key_is_refused_and_bad_input_stores_nothing(api: Api) -> None:
    agent = api.agent("nosy")
    for method, path in (
        ("PUT", "/operator/webhook"),
        ("GET", "/operator/webhook"),
        ("DELETE", "/operator/webhook"),
        ("POST", "/operator/webhook/rotate"),
    ):
        body = {"url": "http://127.0.0.1:9/x"} if method == "PUT" else None
        response = agent.call(method, path, json=body)
        assert response.status_code == 403, (path, response.text)
        assert response.json()["error"]["code"] == "forbidden"
    for wrong in (["delivery.lost"], ["delivery.failed", "message.created"]):
        response = api.call(
            "PUT", "/operator/webhook", json={"url": "http://127.0.0.1:9/x", "events": wrong}
        )
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["field"] == "events"
        assert all(t in error["message"] for t in ALERTS), error["message"]
    response = api.call("PUT", "/operator/webhook", json={"url": "ftp://example.com/x"})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "webhook_url_rejected"
    response = api.call("PUT", "/operator/webhook", json={"url": "http://x", "event": []})
    assert response.status_code == 422 and response.json()["error"]["code"] == "unknown_field"
    response = api.call("PUT", "/operator/webhook", json={"url": "http://x", "events": "all"})
    assert response.status_code == 422
    assert api.call("GET", "/operator/webhook").status_code == 404  # nothing was stored
    rotated = api.call("POST", "/operator/webhook/rotate")
    assert rotated.status_code == 404 and rotated.json()["error"]["code"] == "not_found"


def test_the_alerts_commands_set_show_rotate_and_turn_off(api: Api) -> None:
    url = "http://127.0.0.1:9/alerts"
    made = ok(api, "alerts", "set", url, "--events", "delivery.failed,approval.requested")
    secret = api.ok("POST", "/operator/webhook/rotate")["signing_secret"]  # the CLI saw the 1st
    assert "whsec_" in made.stdout and "not shown again" in made.stdout
    shown = inbots(api, "alerts", "show", "--json").json()
    assert shown == {
        "url": url,
        "events": ["delivery.failed", "approval.requested"],
        "signing_secret": None,
        "previous_secret_expires_at": shown["previous_secret_expires_at"],
    }
    human = ok(api, "alerts", "show").stdout
    assert url in human and "delivery.failed, approval.requested" in human
    assert "whsec_" not in human
    rotated = ok(api, "alerts", "rotate").stdout
    assert "whsec_" in rotated and secret not in rotated
    assert "off" in ok(api, "alerts", "off").stdout
    assert api.call("GET", "/operator/webhook").status_code == 404
    assert_one_line_error(inbots(api, "alerts", "show"), 1, "not_found", "404")
    assert_one_line_error(inbots(api, "alerts", "set", url, "--events", "nope"), 1, "422")
    agent = api.agent("nosy")
    refused = inbots(api, "alerts", "show", INBOTS_OPERATOR_TOKEN=agent.token)
    assert_one_line_error(refused, 4, "agent key", "ops_")  # 4: auth, refused before any request


# The alerts.


def test_a_stalled_delivery_alerts_once_signed_with_both_secrets_after_a_rotate(
    api: Api,
) -> None:
    with receiver(always(204)) as hook:
        first = alert_hook(api, hook, ["delivery.stalled"])
        rotated = api.ok("POST", "/operator/webhook/rotate")
        second = rotated["signing_secret"]
        assert second.startswith("whsec_") and second != first
        assert rotated["previous_secret_expires_at"].endswith("Z")
        assert api.ok("GET", "/operator/webhook")["signing_secret"] is None
        api.agent("idle")  # no webhook: nothing moves its mail
        sender = api.agent("sender")
        thread = sender.open_thread("Waiting", ["idle"])
        sent = sender.send(thread["id"], "Please look", summary="Look")
        (alert,) = alerts_of(hook, second, "delivery.stalled", 1)
        alerts_of(hook, first, "delivery.stalled", 1)  # the previous secret signs too
        time.sleep(1.5)  # five more sweeps: the stall is not alerted again
        with hook.lock:
            assert len(hook.requests) == 1, [r.json() for r in hook.requests]
    delivery = sent["deliveries"][0]
    assert alert["delivery_id"] == delivery["id"]
    assert alert["message_id"] == sent["message"]["id"]
    assert alert["thread_id"] == thread["id"]
    assert alert["recipient"] == "idle" and alert["state"] == "stalled"
    assert alert["at"].endswith("Z") and alert["created_at"].endswith("Z")
    assert "no progress since" in alert["reason"]
    assert api.delivery(delivery["id"])["stalled_at"]
    # The operator's event log has it, with its attempt.
    listed = api.ok("GET", "/events", params={"type": "delivery.stalled"})["items"]
    assert [(e["id"], e["recipient"], e["actor"], e["thread_id"]) for e in listed] == [
        (alert["event_id"], "operator", "idle", None)
    ]
    # ... and what it is about, as its notification said it (an agent's event has none).
    about = listed[0]["alert"]
    assert (about["delivery_id"], about["message_id"], about["thread_id"]) == (
        delivery["id"],
        sent["message"]["id"],
        thread["id"],
    )
    assert about["reason"] == alert["reason"]
    detail = api.ok("GET", f"/events/{alert['event_id']}")
    assert [a["reason"] for a in detail["attempts"]] == ["ok"]


def test_alerts_go_only_to_the_types_chosen_and_never_to_agents(api: Api) -> None:
    with receiver(always(200)) as hook:
        alert_hook(api, hook, ["approval.requested"])  # no delivery.stalled
        api.agent("idle")
        sender = api.agent("sender")
        thread = sender.open_thread("Quiet", ["idle", "operator"])
        sent = sender.send(thread["id"], "to the operator too")
        time.sleep(2.0)  # stalled by now
        assert all(api.delivery(d["id"])["stalled_at"] for d in sent["deliveries"])
        assert hook.requests == []  # nor message.created for the operator's own mail
    assert api.ok("GET", "/events", params={"type": "delivery.stalled"})["items"] == []


def failing_then(behaviours: dict[int, int]) -> Any:
    """A receiver answering request n with ``behaviours.get(n, 500)``."""
    return lambda n: (behaviours.get(n, 500), b"answer")


def failures_of(database: Database, username: str) -> int:
    with unit_of_work(database, readonly=True) as uow:
        return int(
            uow.session.scalars(
                select(Agent.webhook_failures).where(Agent.username == username)
            ).one()
        )


def test_a_failed_delivery_and_a_failing_webhook_streak_alert_once_each(
    api: Api, database: Database
) -> None:
    # Four attempts a message (the first and three retries). Message 1: four failures (the
    # streak reaches 3: one alert; the fourth adds none) and the delivery fails. Message 2: the
    # fifth request fails, the sixth succeeds: the streak resets. Message 3: fails four times
    # again: a new streak, a new alert.
    with receiver(always(204)) as ops, receiver(failing_then({6: 200})) as agent_hook:
        secret = alert_hook(api, ops, ["delivery.failed", "agent.webhook_failing"])
        flaky = api.agent("flaky")
        flaky.ok("PUT", "/me/webhook", json={"url": agent_hook.url})
        sender = api.agent("sender")
        thread = sender.open_thread("Flaky", ["flaky"])["id"]
        first = sender.send(thread, "one")["deliveries"][0]["id"]
        (failing,) = alerts_of(ops, secret, "agent.webhook_failing", 1)
        (failed,) = alerts_of(ops, secret, "delivery.failed", 1)
        agent_hook.wait_for(4)
        assert failures_of(database, "flaky") == 4
        second = sender.send(thread, "two")["deliveries"][0]["id"]
        agent_hook.wait_for(6)
        deadline = time.monotonic() + 10
        while api.delivery(second)["notified_at"] is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert failures_of(database, "flaky") == 0
        third = sender.send(thread, "three")["deliveries"][0]["id"]
        streaks = alerts_of(ops, secret, "agent.webhook_failing", 2)
        failures = alerts_of(ops, secret, "delivery.failed", 2)
        agent_hook.wait_for(10)
        time.sleep(0.5)
        with ops.lock:
            kinds = sorted(json.loads(r.body)["type"] for r in ops.requests)
        scrape = metric_samples(httpx.get(api.base_url + "/metrics", timeout=5).text)
    assert kinds == ["agent.webhook_failing"] * 2 + ["delivery.failed"] * 2
    assert failing["agent"] == "flaky" and failing["failures"] == 3
    assert failing["url"] == agent_hook.url and failing["last_reason"] == "http_500"
    assert failing["last_status_code"] == 500
    assert streaks[1]["failures"] == 3 and streaks[1]["event_id"] != failing["event_id"]
    assert failed["delivery_id"] == first and failed["recipient"] == "flaky"
    assert failed["state"] == "failed"
    assert failed["reason"] == "webhook attempts exhausted (4; last: http_500)"
    assert failures[1]["delivery_id"] == third
    assert api.delivery(first)["failed_at"] and api.delivery(third)["failed_at"]
    assert failures_of(database, "flaky") == 4
    assert sample(scrape, "inbots_agents_webhook_failing") == 1
    assert sample(scrape, "inbots_alerts_raised_total", type="agent.webhook_failing") >= 2
    assert sample(scrape, "inbots_alert_notifications_total", result="notified") >= 4


def test_an_alert_webhook_that_fails_is_retried_and_logged(api: Api) -> None:
    with receiver(failing_then({2: 200})) as hook:
        secret = alert_hook(api, hook, ["delivery.stalled"])
        api.agent("idle")
        sender = api.agent("sender")
        sender.send(sender.open_thread("Retry", ["idle"])["id"], "hi")
        hook.wait_for(2)
        (alert,) = alerts_of(hook, secret, "delivery.stalled", 2)[1:]
    deadline = time.monotonic() + 5
    while True:
        detail = api.ok("GET", f"/events/{alert['event_id']}")
        if detail["state"] == "notified" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert [(a["trigger"], a["reason"]) for a in detail["attempts"]] == [
        ("publish", "http_500"),
        ("retry", "ok"),
    ]
    # An alert webhook's failures are not an agent's: no webhook_failing about the operator.
    assert failures_of_operator(api) == 0


def failures_of_operator(api: Api) -> int:
    listed = api.ok("GET", "/events", params={"type": "agent.webhook_failing"})["items"]
    return len(listed)


def test_approval_requested_reaches_the_alert_webhook_after_the_commit(
    api: Api, database: Database, server: ServerThread
) -> None:
    with receiver(always(200)) as hook:
        secret = alert_hook(api, hook, ["approval.requested"])  # not its mail's stall
        writer = api.agent("writer")
        thread = writer.open_thread("Gate", ["operator"])
        sent = writer.send(thread["id"], "Deploy to production", summary="Deploy " + "x" * 150)
        assert api.ok("GET", "/events", params={"type": "approval.requested"})["items"] == []
        with unit_of_work(database) as uow:
            ws = uow.session.scalars(
                select(Agent.workspace_id).where(Agent.username == "writer")
            ).one()

        def request_approval(summary: str) -> None:
            with unit_of_work(database, server.app.state.dispatch) as uow:
                approval_requested(
                    uow,
                    ws,
                    sent["message"]["id"],
                    thread_id=thread["id"],
                    sender="writer",
                    kind="task",
                    priority="urgent",
                    summary=summary,
                )
                if summary == "rolled back":
                    raise RuntimeError("rollback")

        # A unit that rolls back raises nothing.
        with pytest.raises(RuntimeError):
            request_approval("rolled back")
        request_approval("Deploy " + "x" * 150)
        (alert,) = alerts_of(hook, secret, "approval.requested", 1)
        time.sleep(0.3)
        with hook.lock:
            assert [json.loads(r.body)["type"] for r in hook.requests] == ["approval.requested"]
    assert alert["message_id"] == sent["message"]["id"]
    assert alert["thread_id"] == thread["id"]
    assert (alert["sender"], alert["kind"], alert["priority"]) == ("writer", "task", "urgent")
    assert len(alert["summary"]) == 120 and alert["summary"].endswith("…")
    listed = api.ok("GET", "/events", params={"type": "approval.requested"})["items"]
    assert [(e["actor"], e["recipient"]) for e in listed] == [("writer", "operator")]


def test_a_held_send_tells_the_alert_webhook_once_and_a_flowing_one_does_not(api: Api) -> None:
    """The gate and the alerts together: a send the policy holds raises ``approval.requested``
    (once, with the message's own fields); a send it lets through raises nothing."""
    with receiver(always(200)) as hook:
        secret = alert_hook(api, hook, ["approval.requested"])
        api.ok("PUT", "/policy", json={"approval": {"kinds": ["task"]}})
        writer = api.agent("writer")
        api.agent("reader")
        thread = writer.open_thread("Gate", ["reader"])
        writer.send(thread["id"], "just a note")  # kind note: not held
        held = writer.send(thread["id"], "Deploy it", kind="task", priority="urgent")
        assert held["held"] is True
        (alert,) = alerts_of(hook, secret, "approval.requested", 1)
        time.sleep(0.5)
        with hook.lock:
            assert len(hook.requests) == 1, "one alert for the one held message"
    assert alert["message_id"] == held["message"]["id"]
    assert (alert["thread_id"], alert["sender"]) == (thread["id"], "writer")
    assert (alert["kind"], alert["priority"]) == ("task", "urgent")


def test_alerts_are_purged_by_their_age_with_their_attempts(
    api: Api, database: Database, settings: Settings
) -> None:
    with receiver(always(204)) as hook:
        secret = alert_hook(api, hook, ["delivery.stalled"])
        api.agent("idle")
        sender = api.agent("sender")
        sender.send(sender.open_thread("Old", ["idle"])["id"], "hi")
        (alert,) = alerts_of(hook, secret, "delivery.stalled", 1)
        deadline = time.monotonic() + 5
        while api.ok("GET", f"/events/{alert['event_id']}")["state"] != "notified":
            assert time.monotonic() < deadline
            time.sleep(0.05)
    # Inside the window nothing goes; past it, the alert and its attempt do (its thread, open,
    # stays).
    assert purge(database, settings, days=1).events == 0
    later = utcnow() + timedelta(days=2)
    counted = purge(database, settings, days=1, dry_run=True, now=later)
    assert (counted.events, counted.attempts, counted.threads) == (1, 1, 0)
    done = purge(database, settings, days=1, now=later)
    assert (done.events, done.attempts, done.threads) == (1, 1, 0)
    assert api.call("GET", f"/events/{alert['event_id']}").status_code == 404


# The Prometheus rules.


def test_the_shipped_alert_rules_parse_and_name_metrics_a_scrape_has(api: Api) -> None:
    rules = yaml.safe_load(RULES.read_text())
    exprs = [
        (rule["alert"], rule["expr"])
        for group in rules["groups"]
        for rule in group["rules"]
        if "alert" in rule
    ]
    names = {name for name, _ in exprs}
    assert {
        "InbotsDeliveriesStalled",
        "InbotsDeliveriesFailed",
        "InbotsAgentWebhookFailing",
        "InbotsApprovalsPending",
    } <= names, names
    for rule in (r for g in rules["groups"] for r in g["rules"]):
        assert rule["labels"]["severity"] and rule["annotations"]["summary"], rule
    scrape = httpx.get(api.base_url + "/metrics", timeout=5).text
    exposed: set[str] = set()
    for family in text_string_to_metric_families(scrape):
        # A labelled counter not yet counted has no sample, but its family is exposed.
        exposed |= {family.name, *(s.name for s in family.samples)}
        if family.type == "counter":
            exposed.add(family.name + "_total")
    for name, expr in exprs:
        metrics = set(re.findall(r"\binbots_[a-z_]+", str(expr)))
        assert metrics, (name, expr)
        missing = metrics - exposed
        assert not missing, f"{name} names metrics /metrics does not have: {missing}"


def test_an_alert_that_fails_is_not_counted_as_a_failed_delivery(alone: None, api: Api) -> None:
    """``inbots_deliveries_failed_total`` counts deliveries (new mail): an alert whose webhook
    attempts run out is counted by ``inbots_alert_notifications_total{result="failed"}``, and
    the rule for failed deliveries does not fire for it."""

    def scrape() -> Any:
        return metric_samples(httpx.get(api.base_url + "/metrics", timeout=5).text)

    before = scrape()
    with receiver(always(500)) as hook:
        alert_hook(api, hook, ["delivery.stalled"])
        api.agent("idle")
        sender = api.agent("sender")
        sender.send(sender.open_thread("Stalls", ["idle"])["id"], "hi")
        hook.wait_for(4)  # the publish and the three retries of the schedule
        deadline = time.monotonic() + 10
        while sample(scrape(), "inbots_alert_notifications_total", result="failed") == sample(
            before, "inbots_alert_notifications_total", result="failed"
        ):
            assert time.monotonic() < deadline, "the alert never failed"
            time.sleep(0.05)
    after = scrape()
    for why in ("attempts_exhausted", "gone", "publish_exhausted"):
        assert sample(after, "inbots_deliveries_failed_total", why=why) == sample(
            before, "inbots_deliveries_failed_total", why=why
        ), why


PACED = {**FAST, "alert_interval_seconds": 60.0, "renotify_batch_size": 10}


@pytest.mark.parametrize("settings_overrides", [PACED])
def test_stall_alerts_are_paced_one_per_agent_per_interval_with_counts(
    api: Api, database: Database, settings: Settings
) -> None:
    """A backlog of stalls makes a few alerts, not one each: 25 deliveries to one agent and 3 to
    another stall over three sweeps (ten a sweep). Each agent's first stall alerts at once, with
    the count of that sweep; the rest of the interval is counted, and told in one alert when the
    interval ends. (Before: 28 alerts.)"""
    with receiver(always(204)) as hook:
        alert_hook(api, hook, ["delivery.stalled"])
        for name in ("busy", "quiet"):
            api.agent(name)  # no webhook: nothing moves their mail
        sender = api.agent("sender")
        busy = sender.open_thread("Much", ["busy"])["id"]
        quiet = sender.open_thread("Little", ["quiet"])["id"]
        ids = [sender.send(busy, f"m{i}")["deliveries"][0]["id"] for i in range(25)]
        ids += [sender.send(quiet, f"q{i}")["deliveries"][0]["id"] for i in range(3)]
        start = utcnow() + timedelta(hours=1)  # everything stalls
        published: list[Any] = []
        for step in range(4):  # 10 + 10 + 8 stalls, then none: within one interval
            sweep(database, settings, published.extend, start + timedelta(seconds=step))
        early = api.ok("GET", "/events", params={"type": "delivery.stalled"})["items"]
        sweep(database, settings, published.extend, start + timedelta(seconds=61))
        again = sweep(database, settings, published.extend, start + timedelta(seconds=62))
        paced = api.ok("GET", "/events", params={"type": "delivery.stalled"})["items"]
    assert all(api.delivery(d)["stalled_at"] for d in ids)
    assert again.stalled == 0
    about = {e["alert"]["recipient"]: e["alert"] for e in early}
    assert len(early) == 2 and sorted(about) == ["busy", "quiet"], early
    # The sweep stamps the oldest first: busy's ten, then its next ten and quiet's first...
    assert about["busy"]["count"] == 10 and len(about["busy"]["delivery_ids"]) == 10
    assert about["quiet"]["count"] in (1, 2, 3)
    later = [e["alert"] for e in paced if e["id"] not in {x["id"] for x in early}]
    told = {a["recipient"]: a["count"] for a in later}
    assert told["busy"] == 15, later  # the 15 counted since, in one alert
    assert told.get("quiet", 0) == 3 - about["quiet"]["count"], later
    assert sum(a["count"] for a in [*about.values(), *later]) == 28
    listed = next(a for a in later if a["recipient"] == "busy")
    assert len(listed["delivery_ids"]) == 10 and set(listed["delivery_ids"]) <= set(ids)
    assert listed["since"] and listed["reason"].startswith("not acknowledged")
    assert {job.alert for job in published} == {True}  # on the alerts' own lane
