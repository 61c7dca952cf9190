"""A real Celery deployment for tests: a private Redis, worker and beat subprocesses, and the
test API server in broker mode.

Each test gets its own ``redis-server`` on a free loopback port (no persistence), so nothing is
shared with other test runs or sessions and a test may stop and restart "the broker" at will.
Without a ``redis-server`` binary (or with ``INBOTS_TEST_REDIS_SERVER=shared``) the tests fall
back to the shared Redis (``INBOTS_TEST_REDIS_URL``, default ``redis://127.0.0.1:6379/15``;
never flushed) for everything except the tests that stop Redis. Outside CI an unreachable Redis
skips; with ``CI=true`` nothing is skipped: a missing Redis fails the test.

Every subprocess (redis-server, workers, beats) runs in its own process group, is SIGKILLed at
teardown, and dies with the test process even if that is killed outright (PR_SET_PDEATHSIG).

The test server is the conftest ``server`` fixture: ``settings_overrides`` here adds
``broker_url``, so ``create_app`` publishes to Celery instead of running the local dispatcher.
Workers and beat get the very same settings through ``INBOTS_*`` variables.

Test modules import the fixtures they use from here::

    from tests.celery_harness import (  # noqa: F401  (fixtures: celery, redis_broker, ...)
        celery_fixture,
        redis_broker_fixture,
        settings_overrides_fixture,
        timings_fixture,
    )
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis

from inbots.config import Settings
from inbots.dispatch.jobs import NOTIFY_BATCH_TASK, NOTIFY_QUEUE
from tests.conftest import IN_CI, free_port, worker_index
from tests.helpers import Api
from tests.receivers import Received, Receiver

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[1]
# One Redis db number per xdist worker (15, 14, …), so workers never take each other's tasks.
SHARED_REDIS_URL = os.environ.get(
    "INBOTS_TEST_REDIS_URL", f"redis://127.0.0.1:6379/{15 - worker_index() % 8}"
)

# Short timings that keep the whole retry sequence to about 1.5 s (5.7 s when every try times
# out), so the publish-lost window may be as short as 6 s.
FAST: dict[str, object] = {
    "retry_schedule": "0.2,0.4,0.8",
    "retry_jitter": 0.2,
    "webhook_timeout_seconds": 1.0,
    "publish_lost_seconds": 6.0,
    "renotify_interval_seconds": 1.0,
}

# The settings a worker or beat process must share with the test server.
SHARED_SETTINGS = (
    "database_url",
    "broker_url",
    "webhook_allow_private",
    "webhook_timeout_seconds",
    "retry_schedule",
    "retry_jitter",
    "publish_attempts",
    "publish_lost_seconds",
    "stall_seconds",
    "alert_webhook_failures",
    "alert_interval_seconds",
    "backlog_alert_seconds",
    "workers_down_seconds",
    "renotify_interval_seconds",
    "renotify_batch_size",
    "webhook_max_in_flight_per_url",
    "webhook_claim_margin_seconds",
    "broker_visibility_timeout_seconds",
    "sqlite_busy_timeout_seconds",
    "summary_shown",
    "cap_per_recipient",
    "cap_per_pair",
    "rate_limit_per_minute",
    "rate_limit_burst",
    "ttl_min_seconds",
    "retention_days",
    "retention_batch_size",
)


# Run a command so that it dies with the test process even if that is killed outright (no
# finalizers): the child asks Linux for SIGKILL on its parent's death, then execs the command.
_GUARD = (
    "import ctypes, os, signal, sys\n"
    "if sys.platform.startswith('linux'):\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
    "    if os.getppid() != int(sys.argv[1]):\n"
    "        sys.exit(1)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def guarded(cmd: list[str]) -> list[str]:
    return [sys.executable, "-c", _GUARD, str(os.getpid()), *cmd]


def missing(reason: str) -> None:
    """Skip outside CI; with ``CI=true`` these tests must run, so fail instead."""
    if IN_CI:
        pytest.fail(reason + " (CI=true: the Celery tests must run)")
    pytest.skip(reason)


def wait_until(
    probe: Callable[[], T | None],
    timeout: float,
    what: str,
    interval: float = 0.05,
    details: Callable[[], str] | None = None,
) -> T:
    """Call ``probe`` until it returns something truthy; fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            extra = f"\n{details()}" if details else ""
            raise AssertionError(f"timed out after {timeout:.1f} s waiting for {what}{extra}")
        time.sleep(interval)


# Redis --------------------------------------------------------------------------------------


class RedisBroker:
    """A ``redis-server`` of our own on a loopback port, which tests may stop and restart."""

    stoppable = True

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def client(self, db: int = 0) -> redis.Redis:
        return redis.Redis.from_url(self.url(db), socket_timeout=3, socket_connect_timeout=3)

    def ping(self) -> bool:
        try:
            with self.client() as c:
                return bool(c.ping())
        except redis.RedisError:
            return False

    def start(self) -> None:
        assert self.proc is None, "already running"
        self.starts += 1
        log = open(self.workdir / f"redis-{self.starts}.log", "wb")  # noqa: SIM115
        cmd = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--dir",
            str(self.workdir),
        ]
        self.proc = subprocess.Popen(
            guarded(cmd), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + 10
        while not self.ping():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                text = (self.workdir / f"redis-{self.starts}.log").read_text(errors="replace")
                self.proc = None
                raise RuntimeError(f"redis-server did not start on {self.port}:\n{text[-2000:]}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop the server at once (SIGKILL: nothing is saved, clients see the socket close)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None


class SharedRedis:
    """The shared Redis (no ``redis-server`` binary here): never stopped, never flushed."""

    stoppable = False

    def __init__(self, url: str) -> None:
        self._url = url

    def url(self, db: int | None = None) -> str:
        if db is None:
            return self._url
        return self._url.rsplit("/", 1)[0] + f"/{db}"

    def client(self, db: int | None = None) -> redis.Redis:
        return redis.Redis.from_url(self.url(db), socket_timeout=3, socket_connect_timeout=3)

    def ping(self) -> bool:
        try:
            with self.client() as c:
                return bool(c.ping())
        except redis.RedisError:
            return False

    def start(self) -> None:
        missing("this test stops Redis and needs a redis-server binary of its own")

    def stop(self) -> None:
        missing("this test stops Redis and needs a redis-server binary of its own")


def redis_binary() -> str | None:
    """``INBOTS_TEST_REDIS_SERVER``: the redis-server to run, or ``shared`` to use the shared
    Redis (``INBOTS_TEST_REDIS_URL``) instead; by default the one on ``PATH``."""
    chosen = os.environ.get("INBOTS_TEST_REDIS_SERVER")
    if chosen == "shared":
        return None
    return chosen or shutil.which("redis-server")


@pytest.fixture(name="redis_broker")
def redis_broker_fixture(tmp_path: Path) -> Iterator[RedisBroker | SharedRedis]:
    """This test's broker: a fresh private redis-server, or the shared one as a fallback."""
    binary = redis_binary()
    if binary is None:
        shared = SharedRedis(SHARED_REDIS_URL)
        if not shared.ping():
            missing(f"no redis-server binary and Redis not reachable at {SHARED_REDIS_URL}")
        yield shared
        return
    workdir = tmp_path / "redis"
    workdir.mkdir()
    broker = RedisBroker(binary, workdir)
    for _ in range(3):  # the free port may be taken in between: try another
        try:
            broker.start()
            break
        except RuntimeError:
            broker.port = free_port()
    else:
        missing("could not start a private redis-server")
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(name="timings")
def timings_fixture() -> dict[str, object]:
    """Delivery timings of the test; parametrize ``timings`` directly to change them."""
    return dict(FAST)


@pytest.fixture(name="settings_overrides")
def settings_overrides_fixture(
    timings: dict[str, object], redis_broker: RedisBroker | SharedRedis
) -> dict[str, object]:
    """Broker mode: the test server publishes to Celery on this test's Redis."""
    return {**timings, "broker_url": redis_broker.url()}


# Celery processes ---------------------------------------------------------------------------


def celery_command() -> list[str]:
    binary = Path(sys.executable).parent / "celery"
    if binary.exists():
        return [str(binary)]
    return [sys.executable, "-m", "celery"]


def settings_env(settings: Settings, **changes: object) -> dict[str, str]:
    """The environment of a subprocess that must run with ``settings`` (plus ``changes``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INBOTS_")}
    values = {name: getattr(settings, name) for name in SHARED_SETTINGS}
    values.update(changes)
    for name, value in values.items():
        if isinstance(value, tuple | list):
            text = ",".join(repr(float(v)) for v in value)
        elif isinstance(value, bool):
            text = "true" if value else "false"
        else:
            text = str(value)
        env[f"INBOTS_{name.upper()}"] = text
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


class CeleryProcess:
    """One ``celery worker`` or ``celery beat`` in its own process group."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], workdir: Path) -> None:
        self.name = name
        self.args = args
        self.env = env
        self.workdir = workdir
        self.log_path = workdir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready_marker = ""

    def start(self, ready_marker: str) -> CeleryProcess:
        """Spawn the process; :meth:`ready` waits until it says ``ready_marker``."""
        self.ready_marker = ready_marker
        log = open(self.log_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            guarded([*celery_command(), "-A", "workers", *self.args]),
            cwd=self.workdir,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        return self

    def ready(self, timeout: float = 30) -> CeleryProcess:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while self.ready_marker not in self.log():
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited at start:\n{self.tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"{self.name} not ready after {timeout} s:\n{self.tail()}")
            time.sleep(0.05)
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, chars: int = 4000) -> str:
        return f"--- {self.name} log (tail) ---\n{self.log()[-chars:]}"

    def kill(self) -> None:
        """SIGKILL the whole process group: no warm shutdown, nothing acknowledged."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


class CeleryHarness:
    """Starts workers and beats against the test's database and broker; stops them all."""

    def __init__(self, settings: Settings, broker: RedisBroker | SharedRedis, workdir: Path):
        self.settings = settings
        self.broker = broker
        self.workdir = workdir
        self.processes: list[CeleryProcess] = []
        self._client: Any = None

    def env(self, **changes: object) -> dict[str, str]:
        return settings_env(self.settings, **changes)

    def worker(
        self,
        queues: str = "notify,notify-retry,alerts,sweep",
        concurrency: int = 8,
        wait: bool = True,
        **changes: object,
    ) -> CeleryProcess:
        """Start ``celery -A workers worker`` (threads pool); ``wait``: until it is ready."""
        name = f"worker-{len(self.processes) + 1}"
        args = [
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            str(concurrency),
            "-Q",
            queues,
            "-n",
            f"{name}-{uuid.uuid4().hex[:8]}@%h",
            "--without-mingle",
            "--without-gossip",
            "--without-heartbeat",
            "--loglevel",
            "INFO",
        ]
        process = CeleryProcess(name, args, self.env(**changes), self.workdir)
        self.processes.append(process)
        process.start(" ready.")
        return process.ready() if wait else process

    def beat(self, wait: bool = True, **changes: object) -> CeleryProcess:
        """Start ``celery -A workers beat`` (the renotify schedule)."""
        name = f"beat-{len(self.processes) + 1}"
        args = [
            "beat",
            "--schedule",
            str(self.workdir / f"{name}-schedule"),
            "--pidfile",
            str(self.workdir / f"{name}.pid"),
            "--loglevel",
            "INFO",
        ]
        process = CeleryProcess(name, args, self.env(**changes), self.workdir)
        self.processes.append(process)
        process.start("beat: Starting...")
        return process.ready() if wait else process

    def client(self) -> Any:
        """A Celery client (no worker code) on the test's broker, for sending tasks by name."""
        if self._client is None:
            from celery import Celery

            from inbots.dispatch.publisher import celery_config

            self._client = Celery("inbots-tests")
            self._client.conf.update(celery_config(self.settings))
        return self._client

    def renotify(self) -> None:
        """Ask the workers for one renotify run (the ``delivery.renotify`` task)."""
        from inbots.dispatch.jobs import RENOTIFY_TASK, SWEEP_QUEUE

        self.client().send_task(RENOTIFY_TASK, queue=SWEEP_QUEUE)

    def logs(self) -> str:
        return "\n".join(p.tail() for p in self.processes)

    def errors(self, limit: int = 3000) -> str:
        """The first error reports in the workers' and beats' logs (for failure messages)."""
        found = []
        for process in self.processes:
            text = process.log()
            at = text.find("ERROR/")
            if at >= 0:
                found.append(f"--- {process.name}: first error ---\n{text[at : at + limit]}")
        return "\n".join(found) or "(no errors in the Celery logs)"

    def wait_for(self, hook: Receiver, count: int, timeout: float = 10.0) -> list[Received]:
        """``hook.wait_for`` that shows the Celery logs' errors when it fails."""
        try:
            return hook.wait_for(count, timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.errors()}") from None

    def close(self) -> None:
        """Teardown: SIGKILL every process group (the test is over; nothing to finish)."""
        for process in reversed(self.processes):
            process.kill()
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()


@pytest.fixture(name="celery")
def celery_fixture(
    settings: Settings, redis_broker: RedisBroker | SharedRedis, tmp_path: Path
) -> Iterator[CeleryHarness]:
    """Workers and beats for this test (started by the test); all stopped at teardown."""
    workdir = tmp_path / "celery"
    workdir.mkdir()
    harness = CeleryHarness(settings, redis_broker, workdir)
    try:
        yield harness
    finally:
        harness.close()


# Scenario helpers ---------------------------------------------------------------------------


def queued_jobs(
    broker: RedisBroker | SharedRedis, wanted: set[str], take: bool = False
) -> dict[str, list[Any]]:
    """The notify jobs waiting in the ``notify`` queue, by delivery id: [(publish, trigger)]
    (a ``delivery.notify_batch`` task carries several). ``take``: and remove them all from the
    queue, in the same transaction (the broker loses them, as a flushed Redis would)."""
    client = broker.client()
    found: dict[str, list[Any]] = {}
    if take:
        pipe = client.pipeline(transaction=True)
        pipe.lrange(NOTIFY_QUEUE, 0, -1)
        pipe.delete(NOTIFY_QUEUE)
        queued = pipe.execute()[0]
    else:
        queued = client.lrange(NOTIFY_QUEUE, 0, -1)
    for raw in queued:
        message = json.loads(raw)
        body = message["body"]
        if message["properties"].get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
        batch = message["headers"]["task"] == NOTIFY_BATCH_TASK
        for job in args[0] if batch else [args]:
            if job[0] in wanted:
                found.setdefault(job[0], []).append((job[1], job[2]))
    return {k: sorted(v) for k, v in found.items()}


def hooked_agent(api: Api, name: str, url: str) -> dict[str, Any]:
    """Register an agent with a webhook; returns the registration answer."""
    return api.ok("POST", "/agents", 201, json={"name": name, "webhook_url": url})


def wait_state(
    api: Api,
    delivery_id: str,
    states: str | tuple[str, ...],
    timeout: float,
    celery: CeleryHarness | None = None,
) -> dict[str, Any]:
    """Poll the operator API until the delivery is in one of ``states``; return its detail."""
    wanted = (states,) if isinstance(states, str) else states
    last: dict[str, Any] = {}

    def probe() -> dict[str, Any] | None:
        nonlocal last
        last = api.delivery(delivery_id)
        return last if last["state"] in wanted else None

    def details() -> str:
        return f"last receipt: {last}\n{celery.errors() if celery else ''}"

    return wait_until(probe, timeout, f"{delivery_id} to be {'/'.join(wanted)}", 0.05, details)


def ok_attempts_per_publish(detail: dict[str, Any]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for attempt in detail["attempts"]:
        if attempt["reason"] == "ok":
            counts[attempt["publish"]] = counts.get(attempt["publish"], 0) + 1
    return counts


def assert_at_most_one_ok_per_publish(detail: dict[str, Any]) -> None:
    """Exactly-once-ish: never two successful notifications for one publish."""
    doubled = {p: n for p, n in ok_attempts_per_publish(detail).items() if n > 1}
    assert not doubled, f"{detail['id']}: more than one ok attempt for publish {doubled}: {detail}"
