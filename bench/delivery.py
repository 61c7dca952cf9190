"""Delivery benchmark: webhook notifications per second through the real Celery worker, and
accepted → notified latency, each beside a bare httpx loop posting the same signed payloads; and
the same latency again while another receiver, one that answers in 2 s, has a backlog of 300
notifications queued (fairness: one slow receiver must not delay the others).

    .venv/bin/python -m bench.delivery [--backend sqlite|postgres|both] [--quick]

For each backend: a throwaway database and our own ``redis-server``; the real Inbots API
(uvicorn, broker mode) and the real worker (``celery -A workers worker --pool threads
--concurrency 8``) as subprocesses; a fast asyncio receiver (``bench.receiver``, its own process)
answering 204 on loopback, and a slow one (``--delay 2``) for the backlog. Throughput is the drain
of a pre-filled queue; latency is measured under a steady send rate, alone and behind the
backlog. The baseline is 8 threads of one httpx client posting the very bodies
the worker delivered, signed afresh with ``inbots.webhooks.signing``, to the same receiver. See
``bench/README.md``.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import func, select

from bench import samework_notify
from bench.broker import MODEL_MODULES, CeleryWorker, RedisServer, unresolved_foreign_keys
from bench.common import (
    checked_request,
    comparison,
    figure_table,
    fresh_workspace,
    load_average,
    log,
    run_info,
    run_main,
    title,
    write_result,
)
from bench.load import alternate, percentile, run_load
from bench.receiver import Arrival, ReceiverProcess
from bench.servers import REPO_ROOT, ServerProcess, free_port
from inbots.db.engine import Database
from inbots.dispatch.jobs import NOTIFY_BATCH_TASK, NOTIFY_QUEUE
from inbots.models.deliveries import Delivery, DeliveryAttempt
from inbots.webhooks import signing

BODY_FILL = "Build 4127 is green on staging; please review the migration notes and confirm. "


@dataclass(frozen=True)
class Plan:
    name: str
    rounds: int  # drain and baseline loop alternate this many times
    drain: int  # notifications pre-filled per drain round
    baseline_posts: int  # posts per baseline loop round (the drained bodies, cycled)
    steady_rate: float  # notifications (= messages, one recipient each) per second
    steady_seconds: float  # how long the steady sending lasts
    concurrency: int = 8  # worker threads, and baseline loop threads
    api_clients: int = 8  # senders pre-filling the queue (one thread each)
    recipients: int = 16  # webhook agents, each with its own URL on the receiver
    fanout: int = 8  # recipients per pre-filled message
    steady_clients: int = 4  # senders in the steady phase, one recipient per message
    backlog: int = 300  # notifications queued for the slow receiver before the fairness phase
    slow_seconds: float = 2.0  # how long the slow receiver takes to answer
    slow_recipients: int = 10  # webhook agents sharing the slow receiver's one URL

    @property
    def messages_per_client(self) -> int:
        return self.drain // (self.fanout * self.api_clients)

    @property
    def steady_per_client(self) -> int:
        return round(self.steady_rate * self.steady_seconds / self.steady_clients)


FULL = Plan(
    name="full", rounds=2, drain=512, baseline_posts=2048, steady_rate=10, steady_seconds=15
)
QUICK = replace(FULL, name="quick", rounds=1, drain=192, baseline_posts=768, steady_seconds=4)


# --- the world: senders, webhook recipients and their threads -----------------------------


@dataclass
class Recipient:
    username: str
    path: str  # its webhook URL on the receiver is receiver.url + path
    secret: str


@dataclass
class World:
    sender_keys: list[str]  # one sender per API client
    thread_ids: list[str]  # the sender's thread with `fanout` webhook recipients
    single_ids: list[str]  # the sender's thread with one webhook recipient
    recipients: dict[str, Recipient]  # by webhook path
    slow_thread_id: str = ""  # the first sender's thread with the slow receiver's agents


SLOW_PATH = "/hooks/slow"


def build_world(
    plan: Plan, api_url: str, operator_token: str, receiver_url: str, slow_url: str
) -> World:
    bearer = {"Authorization": f"Bearer {operator_token}"}
    with httpx.Client(base_url=api_url, timeout=60) as client:
        recipients = []
        for i in range(plan.recipients):
            path = f"/hooks/agent-{i:02d}"
            created = checked_request(
                client,
                "POST",
                "/v1/agents",
                201,
                json={"name": f"bench-hook-{i:02d}", "webhook_url": receiver_url + path},
                headers=bearer,
            )
            recipients.append(
                Recipient(created["username"], path, created["webhook"]["signing_secret"])
            )
        sender_keys, thread_ids, single_ids = [], [], []

        def open_thread(key: str, title: str, members: list[Recipient]) -> str:
            created: str = checked_request(
                client,
                "POST",
                "/v1/threads",
                201,
                json={"title": title, "participants": [r.username for r in members]},
                headers={"Authorization": f"Bearer {key}"},
            )["id"]
            return created

        for k in range(plan.api_clients):
            sender = checked_request(
                client,
                "POST",
                "/v1/agents",
                201,
                json={"name": f"bench-sender-{k:02d}"},
                headers=bearer,
            )
            members = [recipients[(k * 2 + j) % len(recipients)] for j in range(plan.fanout)]
            key = sender["api_key"]
            sender_keys.append(key)
            thread_ids.append(open_thread(key, f"Delivery benchmark, sender {k}", members))
            single = [recipients[k % len(recipients)]]
            single_ids.append(open_thread(key, f"Delivery benchmark, sender {k}, one", single))
        slow = []
        for i in range(plan.slow_recipients):
            created = checked_request(
                client,
                "POST",
                "/v1/agents",
                201,
                json={"name": f"bench-slow-{i:02d}", "webhook_url": slow_url + SLOW_PATH},
                headers=bearer,
            )
            slow.append(Recipient(created["username"], SLOW_PATH, ""))
        slow_thread = open_thread(sender_keys[0], "Delivery benchmark, the slow receiver", slow)
    return World(sender_keys, thread_ids, single_ids, {r.path: r for r in recipients}, slow_thread)


def body_for(client: int, seq: int) -> str:
    return f"Message {seq} from sender {client}. {BODY_FILL}"


def sender(
    world: World, thread_ids: list[str]
) -> Callable[[int, int], tuple[str, str, dict[str, Any]]]:
    """Client ``i`` posts as sender ``i`` to ``thread_ids[i]``."""
    headers = [{"Authorization": f"Bearer {key}"} for key in world.sender_keys]

    def send(client: int, seq: int) -> tuple[str, str, dict[str, Any]]:
        return (
            "POST",
            f"/v1/threads/{thread_ids[client]}/messages",
            {"json": {"body": body_for(client, seq)}, "headers": headers[client]},
        )

    return send


# --- one backend's processes ----------------------------------------------------------------


def jobs_in(raw: bytes) -> int:
    """How many notify jobs one queued Celery message carries."""
    message = json.loads(raw)
    if message["headers"].get("task") != NOTIFY_BATCH_TASK:
        return 1
    body = message["body"]
    if message["properties"].get("body_encoding") == "base64":
        body = base64.b64decode(body)
    return len(json.loads(body)[0][0])


@dataclass
class Rig:
    backend: str
    plan: Plan
    db: Database
    redis: RedisServer
    receiver: ReceiverProcess
    api: ServerProcess
    worker: CeleryWorker
    world: World
    slow: ReceiverProcess
    metrics_port: int
    errors: list[str] = field(default_factory=list)
    second: CeleryWorker | None = None  # a second worker process, for the two-worker drain
    # The same API with INBOTS_NOTIFY_BATCH_SIZE=1: publishes one task per notification.
    unbatched: ServerProcess | None = None
    url: str = ""  # the database, for the same-work floor (bench.samework_notify)

    def error(self, message: str) -> None:
        self.errors.append(message)
        log(f"  ERROR: {message}")

    def queued(self) -> int:
        """Notify jobs waiting on the broker (a ``delivery.notify_batch`` task carries several)."""
        client = self.redis.client()
        try:
            queued: list[bytes] = client.lrange(NOTIFY_QUEUE, 0, -1)  # type: ignore[assignment]
            return sum(jobs_in(raw) for raw in queued)
        finally:
            client.close()

    def tasks(self) -> int:
        """Tasks waiting on the broker's notify queue."""
        client = self.redis.client()
        try:
            return int(client.llen(NOTIFY_QUEUE))
        finally:
            client.close()

    def jobs(self) -> dict[str, float]:
        """The running worker's ``inbots_notify_jobs_total`` by outcome: the notify jobs the
        broker carried to it (since it started)."""
        from prometheus_client.parser import text_string_to_metric_families

        text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).text
        return {
            sample.labels["outcome"]: sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "inbots_notify_jobs_total"
        }

    def wait_notified(self, since: datetime, expected: int, timeout: float = 60) -> None:
        """Wait until the database shows ``expected`` deliveries accepted since ``since``, all
        notified (the stamp is written just after the receiver's answer)."""
        deadline = time.monotonic() + timeout
        while True:
            with self.db.engine.connect() as conn:
                total, notified = conn.execute(
                    select(func.count(), func.count(Delivery.notified_at)).where(
                        Delivery.accepted_at >= since
                    )
                ).one()
            if total == expected and notified == expected:
                return
            self.worker.check()
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{notified} of {total} deliveries notified after {timeout:.0f} s "
                    f"(expected {expected})"
                )
            time.sleep(0.1)

    def deliveries_since(self, since: datetime) -> list[tuple[str, datetime, datetime | None]]:
        with self.db.engine.connect() as conn:
            rows = conn.execute(
                select(Delivery.id, Delivery.accepted_at, Delivery.notified_at)
                .where(Delivery.accepted_at >= since)
                .order_by(Delivery.id)
            ).all()
        return [(r[0], r[1], r[2]) for r in rows]

    def attempts_since(self, since: datetime) -> list[tuple[str, str, int | None]]:
        with self.db.engine.connect() as conn:
            rows = conn.execute(
                select(
                    DeliveryAttempt.delivery_id, DeliveryAttempt.reason, DeliveryAttempt.duration_ms
                )
                .join(Delivery, Delivery.id == DeliveryAttempt.delivery_id)
                .where(Delivery.accepted_at >= since)
            ).all()
        return [(str(r[0]), r[1], r[2]) for r in rows]  # joined with its delivery: never None


def check_phase(
    rig: Rig,
    phase: str,
    arrivals: Sequence[Arrival],
    deliveries: Sequence[tuple[str, datetime, datetime | None]],
    attempts: Sequence[tuple[str, str, int | None]],
) -> dict[str, Any]:
    """Every delivery of the phase was notified once, by one successful attempt, with a
    notification that verifies against its recipient's secret."""
    wanted = {d[0] for d in deliveries}
    seen = Counter(a.webhook_id for a in arrivals)
    duplicates = sum(n - 1 for n in seen.values() if n > 1)
    missing = len(wanted - set(seen))
    unexpected = len(set(seen) - wanted)
    bad_signatures = 0
    for a in arrivals:
        recipient = rig.world.recipients.get(a.path)
        headers = {
            "webhook-id": a.webhook_id or "",
            "webhook-timestamp": a.timestamp or "",
            "webhook-signature": a.signature or "",
        }
        try:
            assert recipient is not None, f"unknown path {a.path}"
            parsed = signing.verify(a.body, headers, recipient.secret)
            assert parsed["delivery_id"] == a.webhook_id, "delivery_id differs from webhook-id"
            assert parsed["recipient"] == recipient.username, "sent to the wrong webhook"
        except (AssertionError, signing.VerificationError, ValueError) as exc:
            bad_signatures += 1
            if bad_signatures <= 3:
                rig.error(f"{phase}: notification {a.webhook_id} does not verify: {exc}")
    reasons = Counter(reason for _, reason, _ in attempts)
    per_delivery = Counter(d for d, _, _ in attempts)
    unnotified = sum(1 for d in deliveries if d[2] is None)
    if missing or unexpected or unnotified:
        rig.error(
            f"{phase}: {missing} deliveries never reached the receiver, {unexpected} unexpected "
            f"webhook-ids, {unnotified} not stamped notified"
        )
    if set(reasons) - {"ok"} or any(n != 1 for n in per_delivery.values()):
        rig.error(f"{phase}: attempts other than one 'ok' per delivery: {dict(reasons)}")
    return {
        "deliveries": len(deliveries),
        "arrivals": len(arrivals),
        "duplicates": duplicates,
        "missing": missing,
        "bad_signatures": bad_signatures,
        "attempts": dict(reasons),
        "body_bytes_mean": round(statistics.fmean(len(a.body) for a in arrivals), 1)
        if arrivals
        else None,
    }


def arrival_rates(times: Sequence[float]) -> dict[str, float]:
    """Notifications per second from the receiver's arrival times: first to last, and over the
    middle 80 % (start-up and tail left out)."""
    t = sorted(times)
    n = len(t)
    if n < 2 or t[-1] <= t[0]:
        return {"per_second": 0.0, "middle_per_second": 0.0, "seconds": 0.0}
    a, b = n // 10, n - 1 - n // 10
    middle = (b - a) / (t[b] - t[a]) if t[b] > t[a] else 0.0
    return {
        "per_second": (n - 1) / (t[-1] - t[0]),
        "middle_per_second": middle,
        "seconds": t[-1] - t[0],
    }


# --- Inbots: drain a pre-filled queue ------------------------------------------------------


def drain_round(rig: Rig, workers: int = 1, api: ServerProcess | None = None) -> dict[str, Any]:
    """Pre-fill the broker with the worker stopped, then start it and time the drain. The worker
    is left running (idle), for the steady phase or until the next pre-fill stops it. With
    ``workers=2`` a second worker process drains beside it (and is stopped after)."""
    plan = rig.plan
    second = rig.second if workers == 2 else None
    rig.worker.stop()
    if rig.second is not None:
        rig.second.stop()
    rig.receiver.reset()
    since = datetime.now(UTC)
    if rig.queued():
        raise RuntimeError(f"{rig.queued()} jobs already queued before the pre-fill")
    started = time.perf_counter()
    sent = run_load(
        (api or rig.api).url,
        sender(rig.world, rig.world.thread_ids),
        clients=plan.api_clients,
        per_client=plan.messages_per_client,
        warmup=0,
        expect=201,
    )
    prefill = time.perf_counter() - started
    expected = sent.requests * plan.fanout
    if sent.errors:
        rig.error(f"pre-fill: {sent.errors} sends failed, e.g. {sent.error_samples[:2]}")
    queued, tasks = rig.queued(), rig.tasks()
    if queued != expected:
        rig.error(f"pre-fill: {queued} jobs queued for {expected} webhook deliveries")
    rig.worker.start()
    if second is not None:
        second.start()

    def alive() -> None:
        rig.worker.check()
        if second is not None:
            second.check()

    rig.receiver.wait_for(expected, timeout=max(60, expected / 10), alive=alive)
    rig.wait_notified(since, expected)
    if second is not None:
        second.stop()
    arrivals = rig.receiver.arrivals()
    times = [a.at for a in arrivals]  # the worker stays up, idle, until the next pre-fill
    rates = arrival_rates(times)
    check = check_phase(
        rig, "drain", arrivals, rig.deliveries_since(since), rig.attempts_since(since)
    )
    durations = [float(d) for _, _, d in rig.attempts_since(since) if d is not None]
    return {
        **rates,
        "notifications": len(arrivals),
        "prefill_messages": sent.requests,
        "prefill_tasks": tasks,
        "prefill_seconds": round(prefill, 2),
        "worker_start_to_first_s": round(min(times) - rig.worker.started_at, 3) if times else None,
        "attempt_ms_p50": percentile(durations, 50),
        "attempt_ms_p99": percentile(durations, 99),
        "check": check,
        "_arrivals": arrivals,
    }


# --- the same-work floor: the same backlog drained by bench.samework_notify ---------------


def floor_round(rig: Rig) -> dict[str, Any]:
    """Pre-fill exactly as :func:`drain_round` does (the worker stopped), then empty the broker's
    notify queue (the floor reads the database, not the broker) and drain the same backlog with
    the same-work floor (``python -m bench.samework_notify``, one process, as many threads as
    the worker, a batch the size of a message's fan-out), timed the same way from arrivals."""
    plan = rig.plan
    rig.worker.stop()
    if rig.second is not None:
        rig.second.stop()
    rig.receiver.reset()
    since = datetime.now(UTC)
    if rig.queued():
        raise RuntimeError(f"{rig.queued()} jobs already queued before the pre-fill")
    sent = run_load(
        rig.api.url,
        sender(rig.world, rig.world.thread_ids),
        clients=plan.api_clients,
        per_client=plan.messages_per_client,
        warmup=0,
        expect=201,
    )
    expected = sent.requests * plan.fanout
    if sent.errors:
        rig.error(f"floor pre-fill: {sent.errors} sends failed, e.g. {sent.error_samples[:2]}")
    client = rig.redis.client()
    try:
        client.delete(NOTIFY_QUEUE)
    finally:
        client.close()
    cmd = [
        sys.executable,
        "-m",
        "bench.samework_notify",
        "--database-url",
        rig.url,
        "--threads",
        str(plan.concurrency),
        "--batch",
        str(plan.fanout),
    ]
    started = time.time()
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:

        def alive() -> None:
            if proc.poll() is not None and proc.returncode != 0:
                raise RuntimeError(f"samework_notify exited {proc.returncode}")

        rig.receiver.wait_for(expected, timeout=max(60, expected / 10), alive=alive)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    if proc.returncode != 0:
        rig.error(f"samework_notify exited {proc.returncode}: {err.decode()[-500:]}")
    rig.wait_notified(since, expected)
    arrivals = rig.receiver.arrivals()
    times = [a.at for a in arrivals]
    check = check_phase(
        rig, "floor drain", arrivals, rig.deliveries_since(since), rig.attempts_since(since)
    )
    return {
        **arrival_rates(times),
        "notifications": len(arrivals),
        "floor_reported": int(out.decode().strip() or 0),
        "start_to_first_s": round(min(times) - started, 3) if times else None,
        "check": check,
    }


def measure_samework(rig: Rig) -> dict[str, Any]:
    """Drains by the worker and by the same-work floor, alternating; ``notify_samework`` is the
    worker's rate over the floor's (medians over the rounds)."""
    drains: list[dict[str, Any]] = []
    floors: list[dict[str, Any]] = []

    def drain() -> dict[str, Any]:
        d = drain_round(rig)
        del d["_arrivals"]
        drains.append(d)
        log(f"  drain beside the floor: {d['notifications']} at {d['per_second']:.1f}/s")
        return d

    def floor() -> dict[str, Any]:
        f = floor_round(rig)
        floors.append(f)
        log(f"  same-work floor drain: {f['notifications']} at {f['per_second']:.1f}/s")
        return f

    alternate(rig.plan.rounds, drain, floor)
    figure = comparison(
        "notify_samework",
        "notify/s, same-work floor",
        "/s",
        inbots=statistics.median(d["per_second"] for d in drains),
        baseline=statistics.median(f["per_second"] for f in floors),
        round_ratios=[
            _ratio(d["per_second"], f["per_second"]) for d, f in zip(drains, floors, strict=True)
        ],
        higher_is_better=True,
    )
    return {"figure": figure, "drains": drains, "floors": floors}


# --- Inbots: latency under a steady send rate ----------------------------------------------


class Pacer:
    """Schedules request ``i`` (in the order the clients take them) at
    ``start + (i // burst) / rate``; the clock starts with the first request."""

    def __init__(self, rate: float, burst: int = 1) -> None:
        self.rate = rate
        self.burst = burst
        self.start: float | None = None
        self.lock = threading.Lock()
        self.late = 0  # requests that started more than 50 ms after their slot

    def wait(self, i: int) -> float:
        with self.lock:
            if self.start is None:
                self.start = time.perf_counter()
        slot = self.start + (i // self.burst) / self.rate
        delay = slot - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        elif delay < -0.05:
            with self.lock:
                self.late += 1
        return slot


def steady_phase(rig: Rig, backlog: Callable[[], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Messages to one webhook recipient each, sent at a steady rate with the worker running;
    the latency of each delivery is ``notified_at - accepted_at`` as the database stores them.
    ``backlog``: run after the warm-up, before the measured sends (its answer is kept)."""
    plan = rig.plan
    single = sender(rig.world, rig.world.single_ids)
    rig.worker.start()
    # Warm-up, not counted: the worker is up, connected and has delivered before the clock starts.
    rig.receiver.reset()
    warm = run_load(
        rig.api.url, single, clients=plan.steady_clients, per_client=2, warmup=0, expect=201
    )
    rig.receiver.wait_for(warm.requests, timeout=60, alive=rig.worker.check)
    rig.receiver.reset()
    queued = backlog() if backlog is not None else None

    clients = plan.steady_clients
    pacer = Pacer(plan.steady_rate)

    def paced(client: int, seq: int) -> tuple[str, str, dict[str, Any]]:
        pacer.wait(seq * clients + client)
        return single(client, seq)

    since = datetime.now(UTC)
    sent = run_load(
        rig.api.url,
        paced,
        clients=clients,
        per_client=plan.steady_per_client,
        warmup=0,
        expect=201,
    )
    expected = sent.requests
    if sent.errors:
        rig.error(f"steady sends: {sent.errors} failed, e.g. {sent.error_samples[:2]}")
    rig.receiver.wait_for(expected, timeout=60, alive=rig.worker.check)
    rig.wait_notified(since, expected)
    arrivals = rig.receiver.arrivals()
    deliveries = rig.deliveries_since(since)
    attempts = rig.attempts_since(since)
    jobs = rig.jobs()
    if queued is not None:
        queued["slow_answered"] = rig.slow.count()
    rig.worker.stop()
    check = check_phase(
        rig, "steady" if queued is None else "behind backlog", arrivals, deliveries, attempts
    )
    arrived = {a.webhook_id: a.at for a in arrivals}
    latencies = [(n - a).total_seconds() * 1000 for _, a, n in deliveries if n is not None]
    to_receiver = [(arrived[d] - a.timestamp()) * 1000 for d, a, _ in deliveries if d in arrived]
    durations = [float(d) for _, _, d in attempts if d is not None]
    return {
        "notifications": len(latencies),
        "rate_per_second": plan.steady_rate,
        "sending_seconds": round(sent.seconds, 2),
        "late_sends": pacer.late,
        "send_p50_ms": percentile(sent.latencies_ms, 50),
        "latencies_ms": latencies,
        "accepted_to_receiver": _latency_summary(to_receiver),
        "attempt_ms_p50": percentile(durations, 50),
        "attempt_ms_p99": percentile(durations, 99),
        "jobs": jobs,
        **({"backlog": queued} if queued is not None else {}),
        "check": check,
        "_arrivals": arrivals,
    }


# --- fairness: the steady phase again, behind a slow receiver's backlog --------------------


def behind_backlog(rig: Rig) -> dict[str, Any]:
    """The steady phase again, after ``plan.backlog`` notifications were queued for the slow
    receiver (one URL, so at most ``INBOTS_WEBHOOK_MAX_IN_FLIGHT_PER_URL`` in flight): measured
    once every backlog job has run once and the notify queue is empty, so the backlog waits
    (parked) in the database, and while it drains."""
    plan, world = rig.plan, rig.world

    def queue_backlog() -> dict[str, Any]:
        rig.slow.reset()
        headers = {"Authorization": f"Bearer {world.sender_keys[0]}"}
        started = time.perf_counter()
        with httpx.Client(base_url=rig.api.url, timeout=60) as client:
            for i in range(plan.backlog // plan.slow_recipients):
                checked_request(
                    client,
                    "POST",
                    f"/v1/threads/{world.slow_thread_id}/messages",
                    201,
                    json={"body": body_for(0, i)},
                    headers=headers,
                )
        sent = time.perf_counter() - started
        deadline = started + 30
        while True:
            ran = sum(rig.jobs().values())
            settled = ran >= plan.backlog and rig.queued() == 0
            if settled or time.perf_counter() > deadline:
                break
            time.sleep(0.1)
        if not settled:
            rig.error("behind backlog: the backlog's first jobs had not all run after 30 s")
        return {
            "deliveries": plan.backlog,
            "slow_seconds": plan.slow_seconds,
            "queued_seconds": round(sent, 2),
            "settled_seconds": round(time.perf_counter() - started, 2),
            "settled": settled,
            "jobs_at_settle": rig.jobs(),
        }

    return steady_phase(rig, backlog=queue_backlog)


# --- the baseline: a bare httpx loop ---------------------------------------------------------


@dataclass
class Job:
    path: str
    webhook_id: str
    body: bytes
    secret: str


def baseline_jobs(rig: Rig, arrivals: Sequence[Arrival], count: int) -> list[Job]:
    """The notifications the worker delivered (same paths, ids and bytes), in arrival order,
    repeated as needed to make ``count``."""
    ordered = sorted(arrivals, key=lambda a: a.at)
    jobs = [
        Job(a.path, a.webhook_id or "", a.body, rig.world.recipients[a.path].secret)
        for a in ordered
    ]
    return list(itertools.islice(itertools.cycle(jobs), count))


def post_loop(
    rig: Rig,
    jobs: Sequence[Job],
    *,
    threads: int,
    pacer: Pacer | None = None,
    warmup: int = 2,
) -> dict[str, Any]:
    """``threads`` threads share one httpx transport set up like the worker's
    (``inbots.deliveries.attempt.make_client``: same timeout, no redirects, no proxies, same
    pool; ``bench.samework_notify.send``) and POST the jobs to the receiver, each signed just
    before it is sent. After a short
    warm-up the receiver is cleared and all threads are released together. Latency per request:
    from just before signing (paced: from the request's slot) to the answer."""
    client = samework_notify.make_client()
    base = rig.receiver.url
    taken = itertools.count()
    ready = threading.Barrier(threads + 1)
    go = threading.Barrier(threads + 1)
    lock = threading.Lock()
    latencies: list[float] = []
    errors: list[str] = []

    def post(job: Job) -> None:
        signed = signing.headers_for([job.secret], job.webhook_id, job.body)
        status = samework_notify.send(client, base + job.path, job.body, signed)
        if not 200 <= status < 300:
            raise RuntimeError(f"receiver answered {status}")

    def work() -> None:
        mine: list[float] = []
        bad: list[str] = []
        try:
            for i in range(warmup):
                post(jobs[i % len(jobs)])
        except Exception as exc:
            bad.append(f"warm-up: {type(exc).__name__}: {exc}")
        finally:
            ready.wait()
        go.wait()
        while (i := next(taken)) < len(jobs):
            started = pacer.wait(i) if pacer else time.perf_counter()
            try:
                post(jobs[i])
            except Exception as exc:
                bad.append(f"{type(exc).__name__}: {exc}")
                continue
            mine.append((time.perf_counter() - started) * 1000)
        with lock:
            latencies.extend(mine)
            errors.extend(bad)

    pool = [
        threading.Thread(target=work, name=f"bench-loop-{n}", daemon=True) for n in range(threads)
    ]
    try:
        for t in pool:
            t.start()
        ready.wait()
        rig.receiver.reset()  # warm-up requests are not counted
        go.wait()
        for t in pool:
            t.join()
    finally:
        client.close()
    if errors:
        rig.error(f"baseline loop: {len(errors)} requests failed, e.g. {errors[:2]}")
    arrivals = rig.receiver.arrivals()
    if len(arrivals) != len(jobs) - len(errors):
        rig.error(f"baseline loop: {len(arrivals)} arrivals for {len(jobs)} requests")
    return {
        **arrival_rates([a.at for a in arrivals]),
        "notifications": len(arrivals),
        "latencies_ms": latencies,
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "late_sends": pacer.late if pacer else None,
        "errors": len(errors),
    }


# --- figures ---------------------------------------------------------------------------------


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _latency_summary(values: Sequence[float]) -> dict[str, Any]:
    return {
        "count": len(values),
        "p50_ms": percentile(list(values), 50),
        "p90_ms": percentile(list(values), 90),
        "p99_ms": percentile(list(values), 99),
        "max_ms": max(values) if values else None,
        "mean_ms": statistics.fmean(values) if values else None,
    }


def figures(
    drains: list[dict[str, Any]],
    loops: list[dict[str, Any]],
    steady: dict[str, Any],
    paced: dict[str, Any],
) -> list[dict[str, Any]]:
    mine = statistics.median(d["per_second"] for d in drains)
    base = statistics.median(b["per_second"] for b in loops)
    rows = [
        comparison(
            "notify_per_second",
            "notifications/s (drain)",
            "/s",
            inbots=mine,
            baseline=base,
            round_ratios=[
                _ratio(d["per_second"], b["per_second"]) for d, b in zip(drains, loops, strict=True)
            ],
            higher_is_better=True,
        )
    ]
    for p in (50, 99):
        rows.append(
            comparison(
                f"accepted_to_notified_p{p}",
                f"accepted->notified, p{p}",
                "ms",
                inbots=percentile(steady["latencies_ms"], p),
                baseline=percentile(paced["latencies_ms"], p),
                round_ratios=[],
                higher_is_better=False,
            )
        )
    return rows


# --- one backend ---------------------------------------------------------------------------


def measure(rig: Rig) -> dict[str, Any]:
    plan = rig.plan
    drains: list[dict[str, Any]] = []
    loops: list[dict[str, Any]] = []

    def drain() -> dict[str, Any]:
        started = time.perf_counter()
        d = drain_round(rig)
        drains.append(d)
        log(
            f"  drain {len(drains)}: {d['notifications']} notifications at {d['per_second']:.1f}/s "
            f"(pre-fill {d['prefill_seconds']:.1f} s, worker start to first arrival "
            f"{d['worker_start_to_first_s']:.1f} s; {time.perf_counter() - started:.1f} s in all)"
        )
        return d

    def loop() -> dict[str, Any]:
        # The bodies the worker delivered in the latest drain, to the same paths.
        jobs = baseline_jobs(rig, drains[-1]["_arrivals"], plan.baseline_posts)
        b = post_loop(rig, jobs, threads=plan.concurrency)
        loops.append(b)
        log(f"  baseline loop {len(loops)}: {b['notifications']} posts at {b['per_second']:.0f}/s")
        return b

    alternate(plan.rounds, drain, loop)

    # Horizontal scaling: the same drain with a second worker process beside the first.
    two = drain_round(rig, workers=2)
    one = statistics.mean(d["per_second"] for d in drains)
    del two["_arrivals"]
    two_workers = {
        **two,
        "one_worker_per_second": one,
        "ratio": two["per_second"] / one if one else None,
    }
    log(
        f"  drain with two workers: {two['notifications']} notifications at "
        f"{two['per_second']:.1f}/s ({two_workers['ratio']:.2f} x one worker's {one:.1f}/s)"
    )

    # Batching: the same drain pre-filled through an API that publishes one task per
    # notification, beside one pre-filled with batches (a message's 8 webhooks: one task).
    batching: dict[str, Any] | None = None
    if rig.unbatched is not None:
        single = drain_round(rig, api=rig.unbatched)
        batched = drain_round(rig)
        for d in (single, batched):
            del d["_arrivals"]
        batching = {
            "one_per_task": single,
            "batched": batched,
            "ratio": batched["per_second"] / single["per_second"] if single["per_second"] else None,
        }
        log(
            f"  drain, batched vs one task per notification: {batched['per_second']:.1f}/s "
            f"({batched['prefill_tasks']} tasks) vs {single['per_second']:.1f}/s "
            f"({single['prefill_tasks']} tasks): {batching['ratio']:.2f} x"
        )

    # The worker against the same-work floor: before the steady and fairness phases, which
    # leave the slow receiver's backlog in the database and on the broker.
    samework = None
    if rig.backend == "postgres":  # the floor speaks psycopg only (SQLite: not yet)
        started = time.perf_counter()
        samework = measure_samework(rig)
        log(f"  drains vs the same-work floor: {time.perf_counter() - started:.1f} s")

    started = time.perf_counter()
    steady = steady_phase(rig)
    log(
        f"  steady: {steady['notifications']} notifications at {plan.steady_rate:g}/s, "
        f"accepted->notified p50 {percentile(steady['latencies_ms'], 50):.1f} ms "
        f"({time.perf_counter() - started:.1f} s)"
    )
    jobs = baseline_jobs(rig, steady["_arrivals"], steady["notifications"])
    paced = post_loop(rig, jobs, threads=plan.concurrency, pacer=Pacer(plan.steady_rate))
    log(f"  baseline paced: {paced['notifications']} posts, p50 {paced['p50_ms']:.2f} ms")
    started = time.perf_counter()
    behind = behind_backlog(rig)
    log(
        f"  behind a backlog of {plan.backlog} for a {plan.slow_seconds:g} s receiver: "
        f"{behind['notifications']} notifications, accepted->notified p50 "
        f"{percentile(behind['latencies_ms'], 50):.1f} ms, jobs {behind['jobs']} "
        f"({time.perf_counter() - started:.1f} s)"
    )
    fairness = fairness_summary(plan, steady, behind)
    rows = figures(drains, loops, steady, paced)
    if samework is not None:
        rows.append(samework["figure"])
    for d in drains:
        del d["_arrivals"]
    del steady["_arrivals"]
    del behind["_arrivals"]
    for b in loops:
        b["latency"] = _latency_summary(b.pop("latencies_ms"))
    steady["latency"] = _latency_summary(steady.pop("latencies_ms"))
    paced["latency"] = _latency_summary(paced.pop("latencies_ms"))
    behind["latency"] = _latency_summary(behind.pop("latencies_ms"))
    return {
        "figures": rows,
        "drains": drains,
        "loops": loops,
        "steady": steady,
        "paced": paced,
        "behind_backlog": behind,
        "fairness": fairness,
        "two_workers": two_workers,
        "batching": batching,
        # The worker against the same-work floor (bench.samework_notify), PostgreSQL only.
        "samework": samework,
        "notify_samework": samework["figure"]["ratio"] if samework else None,
    }


def fairness_summary(plan: Plan, alone: dict[str, Any], behind: dict[str, Any]) -> dict[str, Any]:
    """The healthy receiver's latency alone and behind the backlog, side by side, and the jobs
    the broker carried per notification in the backlog phase."""
    backlog = behind["backlog"]
    jobs = sum(behind["jobs"].values())
    # Every delivery that had a job in the phase: the backlog, the measured ones, the warm-up
    # (two messages per steady client).
    deliveries = backlog["deliveries"] + behind["notifications"] + 2 * plan.steady_clients
    return {
        "percentiles_ms": {
            f"p{p}": {
                "alone": percentile(alone["latencies_ms"], p),
                "behind_backlog": percentile(behind["latencies_ms"], p),
            }
            for p in (50, 90, 99)
        },
        "jobs": jobs,
        "jobs_by_outcome": behind["jobs"],
        "deliveries_with_jobs": deliveries,
        "jobs_per_delivery": jobs / deliveries if deliveries else None,
        "slow_answered": backlog["slow_answered"],
        "backlog_settled_seconds": backlog["settled_seconds"],
    }


def run_backend(backend: str, plan: Plan, pg_admin_url: str) -> dict[str, Any]:
    log(f"[{backend}] preparing ({plan.name} run)")
    started = time.perf_counter()
    load_before = os.getloadavg()
    with fresh_workspace(backend, pg_admin_url) as workspace, ExitStack() as stack:
        url, db = workspace.url, workspace.db

        redis = RedisServer()
        stack.callback(redis.stop)
        redis.start()
        receiver = ReceiverProcess(free_port())
        stack.callback(receiver.stop)
        receiver.start(REPO_ROOT)
        slow = ReceiverProcess(free_port(), delay=plan.slow_seconds)
        stack.callback(slow.stop)
        slow.start(REPO_ROOT)
        metrics_port = free_port()
        env = {
            "INBOTS_DATABASE_URL": url,
            "INBOTS_BROKER_URL": redis.url,
            "INBOTS_WEBHOOK_ALLOW_PRIVATE": "true",
            "INBOTS_LOG_LEVEL": "WARNING",
            "INBOTS_WORKER_METRICS_PORT": str(metrics_port),
            # The send rate limit on, above what the workload reaches (its steady phase sends
            # 10 messages a second from one agent, past the default 120 a minute): every send
            # is still checked, none is refused.
            "INBOTS_RATE_LIMIT_PER_MINUTE": "1000000",
            "INBOTS_RATE_LIMIT_BURST": "1000000",
        }
        api = ServerProcess("inbots", "inbots.app:create_app", env)
        stack.callback(api.stop)
        api.start()
        # Workaround, not a fix: a worker that imports only `workers` cannot resolve every
        # model's foreign keys and fails each notification before sending it (see README).
        unresolved = unresolved_foreign_keys(env)
        if unresolved:
            log(
                f"  WORKAROUND: a bare `celery -A workers` cannot resolve {', '.join(unresolved)};"
                " starting the worker with --include of every model module"
            )
        worker = CeleryWorker(env, plan.concurrency, MODEL_MODULES if unresolved else ())
        stack.callback(worker.close)
        second = CeleryWorker(
            {**env, "INBOTS_WORKER_METRICS_PORT": str(free_port())},
            plan.concurrency,
            worker.include,
        )
        stack.callback(second.close)
        world = build_world(plan, api.url, workspace.token, receiver.url, slow.url)
        rig = Rig(backend, plan, db, redis, receiver, api, worker, world, slow, metrics_port)
        rig.second = second
        rig.url = url
        unbatched = ServerProcess(
            "inbots-unbatched",
            "inbots.app:create_app",
            {**env, "INBOTS_NOTIFY_BATCH_SIZE": "1"},
        )
        stack.callback(unbatched.stop)
        unbatched.start()
        rig.unbatched = unbatched
        try:
            measured = measure(rig)
        except Exception:
            log(f"[{backend}] worker log:\n{worker.log_tail()}")
            log(f"[{backend}] inbots server log:\n{api.log_tail()}")
            raise
        if rig.errors:
            log(f"[{backend}] worker log:\n{worker.log_tail()}")
            log(f"[{backend}] inbots server log:\n{api.log_tail()}")

    result = {
        **run_info("delivery", backend, plan, load_before),
        "worker_command": " ".join(["celery", *worker.args()]),
        "worker_workaround": {"unresolved_foreign_keys": unresolved, "include": worker.include},
        "errors": rig.errors,
        "seconds": round(time.perf_counter() - started, 1),
        **measured,
    }
    write_result(result)
    return result


# --- report --------------------------------------------------------------------------------


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.1f}" if unit == "/s" else f"{value:,.2f}"


def render(result: dict[str, Any]) -> str:
    plan = result["plan"]
    steady = result["steady"]
    drains, loops = result["drains"], result["loops"]
    lines = [
        title("delivery benchmark", result),
        f"  celery worker, threads pool x {plan['concurrency']}; {plan['recipients']} webhook "
        "agents, one URL each, on one loopback receiver (204);",
        f"  drains of {plan['drain']:,} pre-filled notifications, {plan['rounds']} round(s); "
        f"latency over {steady['notifications']:,} notifications at {plan['steady_rate']:g}/s;",
        f"  {load_average(result)}",
        "",
        *figure_table(
            result["figures"], _number, widths=(26, 5, 10), fmt=".3g", empty="", single=False
        ),
    ]
    per_second = result["figures"][0]["inbots"]
    thread_ms = plan["concurrency"] / per_second * 1000 if per_second else float("nan")
    loop_p50 = statistics.median(b["p50_ms"] for b in loops)
    loop_p99 = statistics.median(b["p99_ms"] for b in loops)
    post_p50 = statistics.median(d["attempt_ms_p50"] for d in drains)
    post_p99 = statistics.median(d["attempt_ms_p99"] for d in drains)
    to_receiver = steady["accepted_to_receiver"]
    lines += [
        "",
        "  Baseline: a bare httpx loop, same concurrency, posting the same bodies, signed afresh,",
        "  to the same receiver. notifications/s: receiver arrivals, first to last (higher is",
        "  better). accepted->notified: notified_at - accepted_at from the database; baseline:",
        "  slot to answer at the same steady rate (lower is better). 'same-work floor'",
        "  (PostgreSQL): the same backlog drained by bench.samework_notify (claim with SKIP",
        "  LOCKED, sign, POST, record: psycopg, one process); target >= 0.5.",
        "",
        f"  Per request, flat out: bare loop p50 {loop_p50:.2f} / p99 {loop_p99:.2f} ms; the "
        f"worker's POST (attempt duration_ms,",
        f"  whole ms) during the drains p50 {post_p50:.0f} / p99 {post_p99:.0f} ms. A worker "
        f"thread spends ~{thread_ms:.0f} ms per notification.",
        f"  Steady phase: accepted->receiver arrival p50 {to_receiver['p50_ms']:.1f} / p99 "
        f"{to_receiver['p99_ms']:.1f} ms; API send p50 {steady['send_p50_ms']:.1f} ms.",
    ]
    two = result.get("two_workers")
    if two and two.get("ratio"):
        lines.append(
            f"  Two worker processes: the same drain at {two['per_second']:.1f}/s, "
            f"{two['ratio']:.2f} x one worker's {two['one_worker_per_second']:.1f}/s."
        )
    batching = result.get("batching")
    if batching and batching.get("ratio"):
        one, many = batching["one_per_task"], batching["batched"]
        lines.append(
            f"  Batching: the same drain published in batches ({many['prefill_tasks']} tasks) at "
            f"{many['per_second']:.1f}/s, {batching['ratio']:.2f} x one task per notification "
            f"({one['prefill_tasks']} tasks) at {one['per_second']:.1f}/s."
        )
    if per_second and plan["steady_rate"] > per_second / 2:
        lines.append(
            f"  NOTE: {plan['steady_rate']:g}/s is more than half the drain rate: latency includes "
            "queueing."
        )
    workaround = result["worker_workaround"]
    if workaround["include"]:
        lines += [
            "  NOTE: workaround, the worker ran with --include of every model module: a bare",
            "  `celery -A workers` cannot resolve "
            + ", ".join(workaround["unresolved_foreign_keys"][:1])
            + f" (and {len(workaround['unresolved_foreign_keys']) - 1} more); see README.",
        ]
    lines += render_fairness(result)
    if result["errors"]:
        lines.append(f"  WARNING: {len(result['errors'])} problems; see the JSON file.")
    return "\n".join(lines)


def render_fairness(result: dict[str, Any]) -> list[str]:
    plan, fair = result["plan"], result.get("fairness")
    if not fair:
        return []
    lines = [
        "",
        f"  Fairness: the same steady phase ({plan['steady_rate']:g}/s), alone and while a "
        f"receiver that answers in {plan['slow_seconds']:g} s",
        f"  has {plan['backlog']} notifications queued (one URL, at most 4 in flight):",
        "",
        f"  {'accepted->notified':<26}{'unit':>5}{'alone':>10}{'behind':>10}{'behind/alone':>14}",
    ]
    for name, pair in fair["percentiles_ms"].items():
        alone, behind = pair["alone"], pair["behind_backlog"]
        ratio = f"{behind / alone:.2f}" if alone else "n/a"
        lines.append(f"  {name:<26}{'ms':>5}{alone:>10.2f}{behind:>10.2f}{ratio:>14}")
    outcomes = ", ".join(f"{k} {v:.0f}" for k, v in sorted(fair["jobs_by_outcome"].items()))
    lines += [
        "",
        f"  Jobs the broker carried in that phase: {fair['jobs']:.0f} for "
        f"{fair['deliveries_with_jobs']} deliveries ({fair['jobs_per_delivery']:.2f} each; "
        f"{outcomes}).",
        f"  The slow receiver answered {fair['slow_answered']} meanwhile; the backlog's first jobs "
        f"had all run {fair['backlog_settled_seconds']:.1f} s after its first send.",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    # SIGTERM unwinds like Ctrl-C, so every subprocess and the database are cleaned up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return run_main(
        argv,
        prog="python -m bench.delivery",
        description=__doc__,
        quick_help="a small run, to check it works",
        plans=(FULL, QUICK),
        run_backend=run_backend,
        render=render,
    )


if __name__ == "__main__":
    sys.exit(main())
