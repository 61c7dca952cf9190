"""A backlog is not a failure, and a hung broker holds no request (production shape: a private
Redis, real Celery workers, the test server in broker mode, receivers on loopback).

- Jobs waiting in the broker for a worker are never taken for lost, however long the workers are
  away: the renotify sweep runs all along (a worker of its own) and republishes nothing, and once
  a mail worker starts every delivery is notified on its first publish. The backlog shows as
  backlog: its depth and the oldest job's wait in ``/v1/stats``, ``/metrics``, ``inbots stats``
  and the dashboard.
- Redis frozen (SIGSTOP: the kernel still takes the bytes, nothing answers) while an agent sends:
  each send answers fast, ``/healthz`` and ``/readyz`` stay 200, and every message is notified
  once Redis runs again.
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import time
from typing import Any

import httpx
import pytest

from inbots.cli import views
from tests.celery_harness import (  # noqa: F401  (fixtures)
    FAST,
    CeleryHarness,
    RedisBroker,
    SharedRedis,
    celery_fixture,
    hooked_agent,
    missing,
    redis_broker_fixture,
    settings_overrides_fixture,
    timings_fixture,
    wait_state,
    wait_until,
)
from tests.helpers import Api, Samples, metric_samples, sample
from tests.receivers import always, receiver

# A whole retry sequence is 0.1 × 1.2 + 2 × 0.5 = 1.12 s: a publish may be taken for lost after
# 1.5 s, and three publishes are spent in 4.5 s.
SHORT = {
    **FAST,
    "retry_schedule": "0.1",
    "webhook_timeout_seconds": 0.5,
    "publish_lost_seconds": 1.5,
    "renotify_interval_seconds": 0.5,
}
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def scrape(base_url: str) -> Samples:
    return metric_samples(httpx.get(base_url + "/metrics", timeout=5).text)


def _dashboard_overview(api: Api) -> str:
    with httpx.Client(base_url=api.base_url, timeout=30) as page:
        csrf = CSRF.search(page.get("/login").text)
        assert csrf
        signed = page.post("/login", data={"token": api.token, "csrf": csrf.group(1)})
        assert signed.status_code == 303, signed.text
        return page.get("/").text


@pytest.mark.slow
@pytest.mark.parametrize("timings", [SHORT], ids=["short"])
def test_jobs_waiting_for_a_worker_are_never_taken_for_lost(
    api: Api, celery: CeleryHarness, redis_broker: RedisBroker | SharedRedis
) -> None:
    celery.worker(queues="sweep")  # the sweep runs; nobody takes mail
    with receiver(always(200)) as hook:
        names = [f"reader{i}" for i in range(5)]
        for name in names:
            hooked_agent(api, name, hook.url)
        sender = api.agent("sender")
        thread = sender.open_thread("Waiting its turn", names)["id"]
        ids = [
            d["id"] for i in range(20) for d in sender.send(thread, f"message {i}")["deliveries"]
        ]
        # Five publish-lost windows, the real sweep running all along, one run after another
        # (each waited for): under the old rule each delivery was republished twice and then
        # failed by the third run after its first window.
        sent_by = time.time()
        swept: list[float] = []
        deadline = time.monotonic() + 5 * 1.5
        while time.monotonic() < deadline or len(swept) < 4:
            before = api.ok("GET", "/stats")["last_sweep_at"]
            celery.renotify()
            wait_until(
                lambda before=before: api.ok("GET", "/stats")["last_sweep_at"] != before,
                20,
                "a renotify run",
                0.1,
                celery.errors,
            )
            swept.append(time.time())
            time.sleep(0.3)
        waited = [api.delivery(d) for d in ids]
        stats = api.ok("GET", "/stats")
        metrics = scrape(api.base_url)
        page = _dashboard_overview(api)

        # Runs past the third window, when every one of these publishes looked lost by age.
        assert len([t for t in swept if t > sent_by + 3 * 1.5]) >= 2, swept
        for detail in waited:
            assert detail["publish_count"] == 1 and detail["failed_at"] is None, detail
            assert detail["state"] == "accepted", detail
        queue = stats["queue"]
        assert queue["queues"]["notify"] == queue["depth"] == 20, queue  # a task per message
        assert queue["oldest_age_seconds"] >= 5 * 1.5, queue
        assert sample(metrics, "inbots_notify_queue_depth", queue="notify") == 20
        assert sample(metrics, "inbots_notify_queue_oldest_age_seconds") >= 5 * 1.5
        line = views.queue_line(queue).plain
        assert line.startswith("20 waiting (notify 20), oldest waiting"), line
        card = page[page.index('id="stat-queue"') :]
        assert ">20<" in card[: card.index("</div>\n  </div>")]

        # Workers come back: everything goes out on its first publish, none failed.
        celery.worker(queues="notify,notify-retry,alerts")
        celery.wait_for(hook, len(ids), timeout=60)
        # Each is recorded just after its receiver answered.
        done = [wait_state(api, d, "notified", 20, celery) for d in ids]
    for detail in done:
        assert detail["state"] == "notified" and detail["failed_at"] is None, detail
        assert [(a["publish"], a["trigger"], a["reason"]) for a in detail["attempts"]] == [
            (1, "publish", "ok")
        ], detail
    assert sorted(r.headers["webhook-id"] for r in hook.requests) == sorted(ids)


def _frozen(broker: RedisBroker) -> Any:
    """SIGSTOP and SIGCONT for the test's own redis-server (never the shared one)."""
    assert broker.proc is not None
    pid = broker.proc.pid

    class Freeze:
        def __enter__(self) -> None:
            os.kill(pid, signal.SIGSTOP)

        def __exit__(self, *_: object) -> None:
            os.kill(pid, signal.SIGCONT)

    return Freeze()


@pytest.mark.slow
def test_a_hung_redis_holds_no_send_and_no_health_check(
    api: Api, celery: CeleryHarness, redis_broker: RedisBroker | SharedRedis
) -> None:
    """Redis stops answering (SIGSTOP) while an agent sends ten messages: each send waits on it
    at most once for a short bound, and then not at all (the breaker); ``/healthz`` and
    ``/readyz`` answer at once (the broker ``down``); once Redis runs again the jobs the web
    process held are published, and all ten are notified. (Before: each send took 3 to 6 s.)"""
    if not isinstance(redis_broker, RedisBroker):
        missing("this test freezes Redis: it needs a redis-server binary of its own")
    celery.worker()
    with receiver(always(200)) as hook:
        hooked_agent(api, "reader", hook.url)
        sender = api.agent("sender")
        thread = sender.open_thread("Through the freeze", ["reader"])["id"]
        first = sender.send(thread, "before")["deliveries"][0]["id"]
        celery.wait_for(hook, 1)

        took: list[float] = []
        sent: list[str] = []
        with _frozen(redis_broker):
            for i in range(10):
                began = time.monotonic()
                sent.append(sender.send(thread, f"frozen {i}")["deliveries"][0]["id"])
                took.append(time.monotonic() - began)
            began = time.monotonic()
            health = httpx.get(f"{api.base_url}/healthz", timeout=10)
            between = time.monotonic()
            ready = httpx.get(f"{api.base_url}/readyz", timeout=10)
            checks = max(between - began, time.monotonic() - between)
            stats = api.ok("GET", "/stats")
            frozen_for = sum(took) + checks
        thawed = time.monotonic()
        assert statistics.median(took) < 0.2, took
        # The first may wait out the 0.5 s bound; none waits for Redis again (a loaded machine
        # may still stretch one request: before the breaker, every send took 3 to 6 s).
        assert max(took) < 3.0 and sum(1 for t in took if t > 1.0) <= 1, took
        assert health.status_code == 200 and ready.status_code == 200, ready.text
        # Each check answers without waiting for Redis (the probe's bound is 1 s; a CI run under
        # load took 1.4 s for the two together, so each is timed on its own).
        assert ready.json()["broker"] == "down" and checks < 1.0, (ready.json(), checks)
        assert stats["broker"] == "down" and stats["queue"] is None, stats
        wait_until(
            lambda: all(api.delivery(d)["state"] == "notified" for d in sent),
            20,
            "all ten to be notified after SIGCONT",
            0.1,
            celery.errors,
        )
        notified_in = time.monotonic() - thawed
        time.sleep(0.3)
        ids = [r.headers["webhook-id"] for r in hook.requests]
    # Published by the web process as soon as Redis answered, long before a sweep would take
    # them for lost (the publish-lost window is FAST's 6 s, and the freeze lasted about as long
    # as the sends above).
    assert notified_in < 5, (notified_in, frozen_for)
    assert sorted(ids) == sorted([first, *sent]), "a notification was lost or doubled"
