"""``/healthz`` and ``/readyz``: ready means this process can serve, which needs the database and
not the broker (a send is stored whatever the broker does, and the renotify sweep publishes it
later). The broker's state is still reported: in ``/readyz``, ``/v1/stats`` and ``/metrics``."""

from __future__ import annotations

import socket
import time

import anyio
import anyio.to_thread
import httpx
import pytest
import redis

from inbots.app import create_app
from inbots.config import Settings
from inbots.db.engine import Database
from tests.celery_harness import SHARED_REDIS_URL
from tests.helpers import Api, metric_samples, sample

pytestmark = pytest.mark.parametrize("backend", ["sqlite"])  # the broker is what varies here

# A port bound and never listened on: it refuses connections for as long as this module runs,
# and no other test (a private redis-server on a free port) can take it meanwhile.
_CLOSED = socket.socket()
_CLOSED.bind(("127.0.0.1", 0))
CLOSED_BROKER = f"redis://127.0.0.1:{_CLOSED.getsockname()[1]}/0"


@pytest.mark.parametrize("settings_overrides", [{"broker_url": CLOSED_BROKER}])
def test_readyz_stays_ready_while_the_broker_is_down(api: Api) -> None:
    sender = api.agent("sender")
    api.agent("reader")
    thread = sender.open_thread("Broker down", ["reader"])["id"]
    began = time.monotonic()
    sent = sender.send(thread, "stored all the same")
    assert sent["deliveries"][0]["state"] == "accepted"

    ready = api.client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ready", "database": "up", "broker": "down"}
    assert time.monotonic() - began < 5

    assert api.ok("GET", "/stats")["broker"] == "down"
    samples = metric_samples(api.client.get("/metrics").text)
    assert ("inbots_broker_up", ()) in samples
    assert sample(samples, "inbots_broker_up") == 0
    assert sample(samples, "inbots_database_up") == 1


def _shared_redis() -> str:
    try:
        with redis.Redis.from_url(SHARED_REDIS_URL, socket_connect_timeout=1) as client:
            client.ping()
    except redis.RedisError:
        pytest.skip(f"Redis not reachable at {SHARED_REDIS_URL}")
    return SHARED_REDIS_URL


@pytest.mark.parametrize("settings_overrides", [{"broker_url": SHARED_REDIS_URL}])
def test_readyz_reports_a_broker_that_answers(api: Api) -> None:
    _shared_redis()
    ready = api.client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ready", "database": "up", "broker": "up"}
    assert api.ok("GET", "/stats")["broker"] == "up"
    samples = metric_samples(api.client.get("/metrics").text)
    assert sample(samples, "inbots_broker_up") == 1


def test_the_embedded_default_has_no_broker_to_report(api: Api) -> None:
    ready = api.client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ready", "database": "up", "broker": "embedded"}
    stats = api.ok("GET", "/stats")
    assert stats["broker"] == "embedded"
    # The embedded default's own lanes: nothing waits for a thread here.
    assert stats["queue"] == {
        "depth": 0,
        "oldest_age_seconds": None,
        "queues": {"notify": 0, "notify-retry": 0, "alerts": 0},
    }, stats
    samples = metric_samples(api.client.get("/metrics").text)
    assert ("inbots_broker_up", ()) not in samples
    assert sample(samples, "inbots_notify_queue_depth", queue="notify") == 0
    assert ("inbots_notify_queue_oldest_age_seconds", ()) in samples


def test_healthz_answers_while_the_process_is_up(api: Api) -> None:
    assert api.client.get("/healthz").json() == {"status": "ok"}


def test_health_checks_answer_head_as_get_without_a_body(api: Api) -> None:
    """Load balancers and uptime checks often probe with HEAD: the same status, no body."""
    for path in ("/healthz", "/readyz"):
        head = api.client.head(path)
        assert head.status_code == 200, (path, head.status_code)
        assert head.content == b""
        assert head.headers["content-type"] == "application/json"


def test_openapi_names_each_operation_once(api: Api) -> None:
    """HEAD on the health checks is served but not documented: /openapi.json keeps one
    operation per health path, and every operationId is unique (a duplicate breaks generators)."""
    spec = api.client.get("/openapi.json").json()
    assert set(spec["paths"]["/healthz"]) == {"get"}
    assert set(spec["paths"]["/readyz"]) == {"get"}
    ids = [op["operationId"] for path in spec["paths"].values() for op in path.values()]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


def test_health_checks_never_queue_behind_requests_that_fill_the_thread_pool(
    settings: Settings, database: Database
) -> None:
    """Every thread that sync routes share is taken (sends stuck on a hung broker or database
    once did this): ``/healthz`` answers on the event loop and ``/readyz`` on threads of its own,
    at once. (Before, both queued behind the sends: 8 to 14 s, and /readyz said the database did
    not answer.)"""
    app = create_app(settings, database)

    async def checks() -> tuple[httpx.Response, httpx.Response]:
        limiter = anyio.to_thread.current_default_thread_limiter()
        holders = [object() for _ in range(int(limiter.total_tokens))]
        for holder in holders:
            await limiter.acquire_on_behalf_of(holder)
        try:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://inbots") as client:
                with anyio.fail_after(20):  # queued behind the holders, they would never answer
                    return await client.get("/healthz"), await client.get("/readyz")
        finally:
            for holder in holders:
                limiter.release_on_behalf_of(holder)

    health, ready = anyio.run(checks)
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert ready.status_code == 200, ready.text
    assert ready.json()["database"] == "up"
