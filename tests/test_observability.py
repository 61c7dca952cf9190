"""What the operator reads off the service: ``GET /v1/stats`` and ``/metrics``, checked against a
workspace whose every delivery state the test made itself (real receivers on loopback, the
embedded dispatcher and renotify timer)."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import free_port
from tests.helpers import Api, Caller, Samples, metric_samples, sample
from tests.processes import ROOT, clean_env, procfile, venv_path
from tests.receivers import always, receiver

SECRET_BODY = "the launch code is zebra-7f3a-quartz, tell no one"


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return {
        "retry_schedule": "0.05",  # two attempts, then failed
        "retry_jitter": 0,
        "webhook_timeout_seconds": 2,
        "stall_seconds": 0.8,
        "renotify_interval_seconds": 0.2,
        "new_agent_grace_seconds": 0.01,
    }


@dataclass
class Scene:
    secrets: list[str]  # every key, token and signing secret the test saw
    ids: list[str]  # message, thread, then the three deliveries
    ghost: str  # the delivery that stalls


def wait_until(check: Any, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def state_counts(api: Api) -> dict[str, int]:
    stats = api.ok("GET", "/stats")
    return {k: v for k, v in stats["deliveries"].items() if v}


@pytest.fixture
def scene(api: Api) -> Iterator[Scene]:
    """Five agents, three threads, three deliveries: one acknowledged, one failed, one stalled."""
    with receiver(always(204)) as ok_hook, receiver(always(500)) as bad_hook:
        poller = api.agent("poller")
        hooked_made = api.ok(
            "POST", "/agents", 201, json={"name": "hooked", "webhook_url": ok_hook.url}
        )
        broken_made = api.ok(
            "POST", "/agents", 201, json={"name": "broken", "webhook_url": bad_hook.url}
        )
        api.agent("ghost")
        gone = api.agent("gone")
        api.ok("POST", "/agents/gone/archive")

        work = poller.open_thread("Work", ["hooked", "broken", "ghost"])
        sent = poller.send(work["id"], SECRET_BODY, summary="short")
        by_recipient = {d["recipient"]: d["id"] for d in sent["deliveries"]}
        hooked = Caller(api.client, hooked_made["api_key"], "hooked")
        wait_until(lambda: api.delivery(by_recipient["hooked"])["state"] == "notified")
        hooked.ok("POST", "/acks", json={"ids": [by_recipient["hooked"]]})

        pending = poller.open_thread("Pending", ["ghost"])
        poller.ok("POST", f"/threads/{pending['id']}/close-request", 202)
        done = poller.open_thread("Done", ["ghost"])
        api.ok("POST", f"/threads/{done['id']}/close")

        wait_until(
            lambda: state_counts(api) == {"acknowledged": 1, "failed": 1, "stalled": 1, "total": 3}
        )
        yield Scene(
            secrets=[
                api.token,
                poller.token,
                gone.token,
                hooked_made["api_key"],
                broken_made["api_key"],
                hooked_made["webhook"]["signing_secret"],
                broken_made["webhook"]["signing_secret"],
            ],
            ids=[sent["message"]["id"], work["id"], *by_recipient.values()],
            ghost=by_recipient["ghost"],
        )


def test_stats_count_what_the_workspace_holds(api: Api, other_api: Api, scene: Scene) -> None:
    stats = api.ok("GET", "/stats")
    assert stats["deliveries"] == {
        "acknowledged": 1,
        "working": 0,
        "fetched": 0,
        "delivered": 0,
        "failed": 1,
        "rejected": 0,
        "expired": 0,
        "held": 0,
        "stalled": 1,
        "notified": 0,
        "accepted": 0,
        "total": 3,
    }
    assert stats["agents"] == {"total": 4, "active": 2, "never_connected": 2, "archived": 1}
    assert stats["threads"] == {"open": 1, "close_requested": 1, "closed": 1}
    assert stats["failed_last_hour"] == 1
    assert stats["attempts_failed_last_hour"] == 2
    assert stats["oldest_stalled_seconds"] >= 0.8
    assert stats["oldest_unnotified_seconds"] is None  # the failed one is owed nothing more
    # Each state count is what the listing of that state returns.
    for state in ("acknowledged", "failed", "stalled"):
        listed = api.ok("GET", "/deliveries", params={"state": state})["items"]
        assert len(listed) == stats["deliveries"][state]
    # Another workspace on the same server sees none of it.
    theirs = other_api.ok("GET", "/stats")
    assert theirs["deliveries"]["total"] == 0 and theirs["agents"]["total"] == 0


def test_stats_are_for_the_operator_only(api: Api) -> None:
    agent = api.agent("nosy")
    response = agent.get("/stats")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert api.client.get("/v1/stats").status_code == 401


def scrape(client: httpx.Client, **kw: Any) -> tuple[str, Samples]:
    response = client.get("/metrics", **kw)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return response.text, metric_samples(response.text)


def test_metrics_match_what_happened(alone: None, api: Api, request: pytest.FixtureRequest) -> None:
    # Event counters live in this (test) process and add up across tests: compare the change.
    _, before = scrape(api.client)
    scene: Scene = request.getfixturevalue("scene")
    text, after = scrape(api.client)

    def grew(name: str, **labels: str) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    assert grew("inbots_messages_accepted_total") == 1
    assert grew("inbots_deliveries_created_total") == 3
    assert grew("inbots_webhook_attempts_total", outcome="ok", status_class="2xx") == 1
    assert grew("inbots_webhook_attempts_total", outcome="http_500", status_class="5xx") == 2
    assert grew("inbots_webhook_attempt_duration_seconds_count") == 3
    assert grew("inbots_notify_latency_seconds_count") == 1
    assert grew("inbots_deliveries_failed_total", why="attempts_exhausted") == 1
    assert grew("inbots_renotify_runs_total") >= 1
    # One stall for the ghost's delivery; under load the hooked one can also stall between its
    # notification and its ack (0.8 s). Each stall is counted once and keeps its stamp.
    stamped = [d for d in scene.ids[2:] if api.delivery(d)["stalled_at"] is not None]
    assert scene.ghost in stamped
    assert grew("inbots_renotify_actions_total", action="stalled") == len(stamped)
    assert grew("inbots_publish_failures_total") == 0
    # Gauges come from the database: exact.
    for state, count in {"acknowledged": 1, "failed": 1, "stalled": 1, "accepted": 0}.items():
        assert sample(after, "inbots_deliveries", state=state) == count
    assert sample(after, "inbots_deliveries_stalled") == 1
    assert sample(after, "inbots_agents", status="active") == 2
    assert sample(after, "inbots_agents", status="never_connected") == 2
    assert sample(after, "inbots_oldest_stalled_seconds") >= 0.8
    assert sample(after, "inbots_oldest_unnotified_seconds") == 0
    assert sample(after, "inbots_database_up") == 1
    # Counts only: no key, token, secret, body or id.
    for needle in [*scene.secrets, *scene.ids, SECRET_BODY, "zebra-7f3a"]:
        assert needle not in text


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize("settings_overrides", [{"metrics_token": "scrape-me-please"}])
def test_metrics_token_guards_the_endpoint(api: Api) -> None:
    refused = api.client.get("/metrics")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    wrong = api.client.get("/metrics", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    _, samples = scrape(api.client, headers={"Authorization": "Bearer scrape-me-please"})
    assert sample(samples, "inbots_database_up") == 1


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize("settings_overrides", [{"environment": "production"}])
def test_metrics_are_closed_in_production_without_their_token(api: Api) -> None:
    refused = api.client.get("/metrics")
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error["code"] == "forbidden"
    assert (
        "INBOTS_METRICS_TOKEN" in error["message"] and "INBOTS_METRICS_PUBLIC" in error["message"]
    )
    assert api.client.get("/metrics", headers=api.headers).status_code == 403  # no token opens it


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize(
    "settings_overrides", [{"environment": "production", "metrics_token": "scrape-me-please"}]
)
def test_metrics_in_production_answer_their_token(api: Api) -> None:
    assert api.client.get("/metrics").status_code == 401
    _, samples = scrape(api.client, headers={"Authorization": "Bearer scrape-me-please"})
    assert sample(samples, "inbots_database_up") == 1


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize(
    "settings_overrides", [{"environment": "production", "metrics_public": True}]
)
def test_metrics_in_production_open_when_made_public(api: Api) -> None:
    _, samples = scrape(api.client)
    assert sample(samples, "inbots_database_up") == 1


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"INBOTS_ENVIRONMENT": "production"}, "/metrics: closed in production"),
        ({"INBOTS_ENVIRONMENT": "production", "INBOTS_METRICS_PUBLIC": "true"}, "open to anyone"),
        (
            {"INBOTS_ENVIRONMENT": "production", "INBOTS_METRICS_TOKEN": "t0k"},
            "wants Authorization",
        ),
        ({}, "open to anyone who can reach it (development)"),
    ],
)
def test_inbots_check_says_who_may_read_metrics(
    tmp_path: Path, settings: dict[str, str], says: str
) -> None:
    done = subprocess.run(
        ["inbots", "check"],
        env=venv_path(clean_env(tmp_path, **settings)),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert says in done.stdout, done.stdout


def test_metrics_cannot_be_both_public_and_guarded(tmp_path: Path) -> None:
    env = clean_env(tmp_path, INBOTS_METRICS_PUBLIC="true", INBOTS_METRICS_TOKEN="t0k")
    done = subprocess.run(
        ["inbots", "check"], env=venv_path(env), cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.startswith("inbots: bad setting INBOTS_METRICS_PUBLIC"), done.stderr


@pytest.mark.parametrize(
    "settings_overrides",
    [{"retry_schedule": "30", "webhook_timeout_seconds": 1, "publish_lost_seconds": 60}],
)
def test_a_notification_is_owed_until_its_thread_closes(api: Api) -> None:
    """The oldest owed notification is one the sweep would still publish: a webhook waiting for
    its retry counts; once the thread is closed it is owed nothing."""
    with receiver(always(503)) as hook:
        api.ok("POST", "/agents", 201, json={"name": "down", "webhook_url": hook.url})
        sender = api.agent("sender")
        thread = sender.open_thread("Owed", ["down"])
        delivery_id = sender.send(thread["id"], "ping")["deliveries"][0]["id"]
        hook.wait_for(1)
        wait_until(lambda: len(api.delivery(delivery_id)["attempts"]) == 1)
        owed = api.ok("GET", "/stats")["oldest_unnotified_seconds"]
        assert owed is not None and owed >= 0
        _, samples = scrape(api.client)
        assert sample(samples, "inbots_oldest_unnotified_seconds") >= owed

        api.ok("POST", f"/threads/{thread['id']}/close")
        assert api.ok("GET", "/stats")["oldest_unnotified_seconds"] is None
        _, samples = scrape(api.client)
        assert sample(samples, "inbots_oldest_unnotified_seconds") == 0


def test_procfile_web_with_several_workers_counts_every_process(tmp_path: Path) -> None:
    """The Procfile's ``release`` then ``web`` lines, run as a process manager would: uvicorn
    with 3 worker processes behind one port. Sends spread over the processes (a new connection
    each), and every scrape, whichever process answers it, counts all of them."""
    token = "ops_" + secrets.token_urlsafe(32)
    port = free_port()
    env = venv_path(
        clean_env(
            tmp_path,
            INBOTS_DATABASE_URL=f"sqlite:///{tmp_path / 'inbots.db'}",
            INBOTS_OPERATOR_TOKEN=token,
            INBOTS_SESSION_SECRET=secrets.token_hex(16),
            PORT=str(port),
            WEB_CONCURRENCY="3",
            TMPDIR=str(tmp_path),  # where inbots web makes its temporary metrics directory
        )
    )
    lines = procfile()
    subprocess.run(["sh", "-c", lines["release"]], env=env, cwd=ROOT, check=True, timeout=60)
    with (tmp_path / "web.log").open("wb") as log:
        web = subprocess.Popen(
            ["sh", "-c", lines["web"]],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(f"{url}/readyz"), timeout=60)
        with Api(url, token) as api:
            sender = api.agent("sender")
            api.agent("reader")
            thread = sender.open_thread("Spread", ["reader"])["id"]
        sent = 12
        for i in range(sent):  # a new connection each: the kernel spreads them over the workers
            answer = httpx.post(
                f"{url}/v1/threads/{thread}/messages",
                json={"body": f"message {i}"},
                headers=sender.headers,
                timeout=30,
            )
            assert answer.status_code == 201, answer.text
        seen = set()
        for _ in range(20):
            samples = metric_samples(httpx.get(f"{url}/metrics", timeout=30).text)
            seen.add(sample(samples, "inbots_messages_accepted_total"))
        assert seen == {float(sent)}, f"scrapes disagreed: {sorted(seen)}"
    finally:
        os.killpg(web.pid, signal.SIGTERM)
        try:
            web.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(web.pid, signal.SIGKILL)
            web.wait()
    assert web.returncode == 0, (tmp_path / "web.log").read_text()
    assert list(tmp_path.glob("inbots-metrics-*")) == [], "web left its metrics directory"


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
