"""HTTP API benchmark: sends per second and inbox-listing latency, each beside a bare baseline.

    .venv/bin/python -m bench.http_api [--backend sqlite|postgres|both] [--quick]

For each backend, the real Inbots server and a bare FastAPI baseline (``bench.baseline_app``) run
as uvicorn subprocesses on the same freshly migrated database, and the same client (N threads,
one httpx keep-alive connection each) drives both, alternating between them round by round.
Every figure is printed beside its baseline with the ratio Inbots / baseline. See
``bench/README.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, func, select, text

from bench import baseline_app
from bench.load import RunResult, percentile, run_load
from bench.seed import InboxSeed, analyze, seed_inbox, seed_items
from bench.servers import REPO_ROOT, ServerProcess
from inbots.config import Settings, load_settings
from inbots.db.engine import Database
from inbots.db.migrate import upgrade
from inbots.db.uow import unit_of_work
from inbots.deliveries.models import Delivery
from inbots.messages.models import Message
from inbots.workspaces.service import create_workspace

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
SEEDED_TABLES = ("agents", "threads", "participants", "messages", "deliveries")
READER_OWNER = "owner-reader"  # the baseline's counterpart of the measured agent
BODY_FILL = "Status update from the benchmark: the nightly build passed, numbers attached. "


@dataclass(frozen=True)
class Plan:
    name: str
    clients: int  # concurrent client threads (one connection each)
    rounds: int  # Inbots and baseline alternate this many times per figure
    send_warmup: int  # per client, per run
    send_per_client: int  # timed sends per client, per run
    list_warmup: int
    list_per_client: int  # timed listings per client, per run, at `clients` concurrency
    list_single: int  # timed listings per run with one client
    deliveries: int  # stored deliveries while listing
    reader_unacked: int  # the measured agent's unacknowledged deliveries among them
    reader_acked: int  # and its acknowledged ones
    recipients: tuple[int, ...] = (1, 5, 20)


FULL = Plan(
    name="full",
    clients=8,
    rounds=3,
    send_warmup=5,
    send_per_client=30,
    list_warmup=5,
    list_per_client=20,
    list_single=100,
    deliveries=100_000,
    reader_unacked=1_000,
    reader_acked=1_000,
)
QUICK = replace(
    FULL,
    name="quick",
    rounds=1,
    send_warmup=3,
    send_per_client=15,
    list_warmup=3,
    list_per_client=8,
    list_single=30,
    deliveries=20_000,
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- databases -----------------------------------------------------------------------------


@contextmanager
def fresh_database(backend: str, pg_admin_url: str) -> Iterator[str]:
    """A new, empty database for this run; removed afterwards."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="inbots-bench-") as tmp:
            yield f"sqlite:///{tmp}/inbots.db"
        return
    name = f"inbots_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(pg_admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield pg_admin_url.rsplit("/", 1)[0] + "/" + name
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


# --- the world: agents, threads and a large mailbox ----------------------------------------


@dataclass
class World:
    reader_key: str
    sender_keys: list[str]  # one sender per client
    threads: dict[int, list[str]]  # recipients -> one thread per client
    seed: InboxSeed


def _ok(client: httpx.Client, method: str, path: str, status: int, **kw: Any) -> Any:
    response = client.request(method, path, **kw)
    if response.status_code != status:
        raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:500]}")
    return response.json()


def build_world(
    plan: Plan, inbots_url: str, operator_token: str, db: Database, workspace_id: str
) -> World:
    """Agents and send threads through the API; the large mailbox by bulk insert."""
    bearer = {"Authorization": f"Bearer {operator_token}"}
    with httpx.Client(base_url=inbots_url, timeout=60) as client:

        def register(name: str) -> dict[str, Any]:
            created: dict[str, Any] = _ok(
                client, "POST", "/v1/agents", 201, json={"name": name}, headers=bearer
            )
            return created

        reader = register("bench-reader")
        senders = [register(f"bench-sender-{i:02d}") for i in range(plan.clients)]
        recipients = [register(f"bench-rcpt-{i:02d}") for i in range(max(plan.recipients))]
        threads: dict[int, list[str]] = {}
        for n in plan.recipients:
            threads[n] = [
                _ok(
                    client,
                    "POST",
                    "/v1/threads",
                    201,
                    json={
                        "title": f"Benchmark thread, {n} recipients",
                        "participants": [r["username"] for r in recipients[:n]],
                    },
                    headers={"Authorization": f"Bearer {sender['api_key']}"},
                )["id"]
                for sender in senders
            ]

    started = time.perf_counter()
    seed = seed_inbox(
        db.engine,
        workspace_id=workspace_id,
        reader_id=reader["id"],
        deliveries=plan.deliveries,
        reader_unacked=plan.reader_unacked,
        reader_acked=plan.reader_acked,
    )
    seed_items(db.engine, rows=plan.deliveries, owner=READER_OWNER, owned=plan.reader_unacked)
    analyze(db.engine, [*SEEDED_TABLES, "bench_items"])
    log(
        f"  seeded {seed.deliveries:,} deliveries ({seed.messages:,} messages, "
        f"{seed.threads:,} threads) and {plan.deliveries:,} baseline rows "
        f"in {time.perf_counter() - started:.1f} s"
    )
    return World(
        reader_key=reader["api_key"],
        sender_keys=[s["api_key"] for s in senders],
        threads=threads,
        seed=seed,
    )


def check_inbox(inbots_url: str, world: World, plan: Plan) -> None:
    """The seeded mailbox reads as intended through the API."""
    with httpx.Client(base_url=inbots_url, timeout=60) as client:
        inbox = _ok(
            client,
            "GET",
            "/v1/inbox",
            200,
            headers={"Authorization": f"Bearer {world.reader_key}"},
        )
    page = min(Settings.model_fields["list_default"].default, plan.reader_unacked)
    if inbox["waiting"] != plan.reader_unacked or inbox["returned"] != page:
        raise RuntimeError(
            f"seeded inbox reads wrong: waiting={inbox['waiting']} returned={inbox['returned']}, "
            f"expected waiting={plan.reader_unacked}"
        )


def check_fanout(db: Database, world: World) -> dict[int, int]:
    """Every message sent in a thread with N recipients produced N deliveries; returns the
    messages stored per N."""
    stored: dict[int, int] = {}
    with db.engine.connect() as conn:
        for n, thread_ids in world.threads.items():
            messages = conn.scalar(
                select(func.count()).select_from(Message).where(Message.thread_id.in_(thread_ids))
            )
            deliveries = conn.scalar(
                select(func.count()).select_from(Delivery).where(Delivery.thread_id.in_(thread_ids))
            )
            if deliveries != n * (messages or 0):
                raise RuntimeError(
                    f"fan-out broken: {messages} messages to {n} recipients stored "
                    f"{deliveries} deliveries"
                )
            stored[n] = messages or 0
    return stored


# --- measuring -----------------------------------------------------------------------------


def body_for(client: int, seq: int) -> str:
    return f"Message {seq} from client {client}. {BODY_FILL}"


def alternate(
    rounds: int, inbots: Callable[[], RunResult], baseline: Callable[[], RunResult]
) -> tuple[list[RunResult], list[RunResult]]:
    """Run both ``rounds`` times, alternating which goes first, so drift hits both alike."""
    ours: list[RunResult] = []
    theirs: list[RunResult] = []
    for r in range(rounds):
        if r % 2 == 0:
            ours.append(inbots())
            theirs.append(baseline())
        else:
            theirs.append(baseline())
            ours.append(inbots())
    return ours, theirs


def run_summary(run: RunResult) -> dict[str, Any]:
    return {
        "clients": run.clients,
        "requests": run.requests,
        "seconds": round(run.seconds, 4),
        "per_second": round(run.per_second, 2),
        "steady_requests": run.steady_requests,
        "steady_seconds": round(run.steady_seconds, 4),
        "wall_per_second": round(run.wall_per_second, 2),
        "p50_ms": round(percentile(run.latencies_ms, 50), 3),
        "p99_ms": round(percentile(run.latencies_ms, 99), 3),
        "errors": run.errors,
        "error_samples": run.error_samples,
    }


def throughput_figure(
    key: str, label: str, ours: list[RunResult], theirs: list[RunResult]
) -> dict[str, Any]:
    mine = statistics.median(r.per_second for r in ours)
    base = statistics.median(r.per_second for r in theirs)
    return {
        "key": key,
        "label": label,
        "unit": "msg/s",
        "higher_is_better": True,
        "inbots": mine,
        "baseline": base,
        "ratio": mine / base if base else None,
        "round_ratios": [
            a.per_second / b.per_second if b.per_second else None
            for a, b in zip(ours, theirs, strict=True)
        ],
        "inbots_runs": [run_summary(r) for r in ours],
        "baseline_runs": [run_summary(r) for r in theirs],
    }


def latency_figures(
    key: str, label: str, ours: list[RunResult], theirs: list[RunResult]
) -> list[dict[str, Any]]:
    pooled_ours = [x for r in ours for x in r.latencies_ms]
    pooled_theirs = [x for r in theirs for x in r.latencies_ms]
    figures = []
    for p in (50, 99):
        mine = percentile(pooled_ours, p)
        base = percentile(pooled_theirs, p)
        figures.append(
            {
                "key": f"{key}_p{p}",
                "label": f"{label}, p{p}",
                "unit": "ms",
                "higher_is_better": False,
                "inbots": mine,
                "baseline": base,
                "ratio": mine / base if base else None,
                "round_ratios": [
                    percentile(a.latencies_ms, p) / percentile(b.latencies_ms, p)
                    for a, b in zip(ours, theirs, strict=True)
                ],
                "inbots_runs": [run_summary(r) for r in ours],
                "baseline_runs": [run_summary(r) for r in theirs],
            }
        )
    return figures


def measure_listing(
    plan: Plan, inbots: ServerProcess, baseline: ServerProcess, world: World
) -> list[dict[str, Any]]:
    auth = {"headers": {"Authorization": f"Bearer {world.reader_key}"}}
    base = {"params": {"owner": READER_OWNER}}
    figures = []
    for clients, per_client in ((1, plan.list_single), (plan.clients, plan.list_per_client)):

        def ours(clients: int = clients, per_client: int = per_client) -> RunResult:
            return run_load(
                inbots.url,
                lambda _c, _s: ("GET", "/v1/inbox", auth),
                clients=clients,
                per_client=per_client,
                warmup=plan.list_warmup,
                expect=200,
            )

        def theirs(clients: int = clients, per_client: int = per_client) -> RunResult:
            return run_load(
                baseline.url,
                lambda _c, _s: ("GET", "/items", base),
                clients=clients,
                per_client=per_client,
                warmup=plan.list_warmup,
                expect=200,
            )

        started = time.perf_counter()
        a, b = alternate(plan.rounds, ours, theirs)
        noun = "client" if clients == 1 else "clients"
        figures += latency_figures(f"inbox_c{clients}", f"inbox, {clients} {noun}", a, b)
        log(f"  inbox listing, {clients} {noun}: {time.perf_counter() - started:.1f} s")
    return figures


def measure_sends(
    plan: Plan, inbots: ServerProcess, baseline: ServerProcess, world: World
) -> list[dict[str, Any]]:
    figures = []
    for n in plan.recipients:
        thread_ids = world.threads[n]
        headers = [{"Authorization": f"Bearer {key}"} for key in world.sender_keys]

        def send(
            client: int,
            seq: int,
            thread_ids: list[str] = thread_ids,
            headers: list[dict[str, str]] = headers,
        ) -> tuple[str, str, dict[str, Any]]:
            return (
                "POST",
                f"/v1/threads/{thread_ids[client]}/messages",
                {"json": {"body": body_for(client, seq)}, "headers": headers[client]},
            )

        def insert(client: int, seq: int) -> tuple[str, str, dict[str, Any]]:
            return ("POST", "/insert", {"json": {"body": body_for(client, seq)}})

        def ours(send: Callable[..., Any] = send) -> RunResult:
            return run_load(
                inbots.url,
                send,
                clients=plan.clients,
                per_client=plan.send_per_client,
                warmup=plan.send_warmup,
                expect=201,
            )

        def theirs() -> RunResult:
            return run_load(
                baseline.url,
                insert,
                clients=plan.clients,
                per_client=plan.send_per_client,
                warmup=plan.send_warmup,
                expect=201,
            )

        started = time.perf_counter()
        a, b = alternate(plan.rounds, ours, theirs)
        noun = "recipient" if n == 1 else "recipients"
        figures.append(throughput_figure(f"send_{n}", f"send, {n} {noun}", a, b))
        log(f"  sends, {n} {noun}: {time.perf_counter() - started:.1f} s")
    return figures


# --- one backend ---------------------------------------------------------------------------


def git_revision() -> str:
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_backend(backend: str, plan: Plan, pg_admin_url: str) -> dict[str, Any]:
    log(f"[{backend}] preparing ({plan.name} run)")
    started = time.perf_counter()
    load_before = os.getloadavg()
    with fresh_database(backend, pg_admin_url) as url, ExitStack() as stack:
        settings = load_settings(database_url=url)
        upgrade(settings)
        db = Database(settings)
        stack.callback(db.dispose)
        with unit_of_work(db) as uow:
            seeded = create_workspace(uow, "bench")
        assert seeded.minted_token
        baseline_app.metadata.create_all(db.engine)

        inbots = ServerProcess(
            "inbots",
            "inbots.api.app:create_app",
            {
                "INBOTS_DATABASE_URL": url,
                "INBOTS_LOG_LEVEL": "WARNING",
                # The seeded mail is hours old: without this the embedded sweep would stamp it
                # stalled, 500 rows a run, while the figures are measured.
                "INBOTS_STALL_SECONDS": str(30 * 24 * 3600),
            },
        )
        stack.callback(inbots.stop)
        inbots.start()
        world = build_world(plan, inbots.url, seeded.minted_token, db, seeded.workspace_id)
        db.engine.dispose()  # the bench process holds no connection while measuring
        baseline = ServerProcess(
            "baseline", "bench.baseline_app:create_app", {baseline_app.URL_ENV: url}
        )
        stack.callback(baseline.stop)
        baseline.start()
        check_inbox(inbots.url, world, plan)

        # Listing first, while exactly the seeded deliveries are stored; sends add more.
        listing = measure_listing(plan, inbots, baseline, world)
        figures = measure_sends(plan, inbots, baseline, world) + listing
        stored = check_fanout(db, world)
        errors = sum(r["errors"] for f in figures for r in f["inbots_runs"] + f["baseline_runs"])
        if errors:
            log(f"[{backend}] inbots server log:\n{inbots.log_tail()}")
            log(f"[{backend}] baseline server log:\n{baseline.log_tail()}")

    result = {
        "benchmark": "http_api",
        "backend": backend,
        "plan": asdict(plan),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "revision": git_revision(),
        "python": platform.python_version(),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        },
        "seed": asdict(world.seed),
        "messages_stored_by_sends": {str(k): v for k, v in stored.items()},
        "errors": errors,
        "seconds": round(time.perf_counter() - started, 1),
        "figures": figures,
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"http_api-{backend}.json"
    path.write_text(json.dumps(_finite(result), indent=2) + "\n")
    log(f"[{backend}] done in {result['seconds']} s; wrote {path.relative_to(REPO_ROOT)}")
    return result


def _finite(value: Any) -> Any:
    """NaN (a percentile of no answers) becomes null, so the file stays valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


# --- report --------------------------------------------------------------------------------

BASELINES = {
    "send": "an endpoint doing one INSERT",
    "inbox": "an endpoint selecting 50 rows by an indexed key",
}


def _number(value: float, unit: str) -> str:
    return f"{value:,.0f}" if unit == "msg/s" else f"{value:,.2f}"


def render(result: dict[str, Any]) -> str:
    plan = result["plan"]
    seed = result["seed"]
    machine = result["machine"]
    lines = [
        f"Inbots HTTP API benchmark: {result['backend']}, {plan['name']} run, "
        f"revision {result['revision']}",
        f"  {plan['clients']} concurrent clients (and 1, for the inbox), {plan['rounds']} "
        f"alternating round(s) per figure;",
        f"  {seed['deliveries']:,} deliveries stored, the reader has "
        f"{seed['reader_unacked']:,} unacknowledged; load average "
        f"{machine['loadavg_before'][0]:.2f} -> {machine['loadavg_after'][0]:.2f} "
        f"on {machine['cpus']} CPUs",
        "",
        f"  {'figure':<28}{'unit':>6}{'Inbots':>11}{'baseline':>11}{'Inbots/base':>13}"
        f"  {'per round':<s}",
    ]
    for f in result["figures"]:
        rounds = [r for r in f["round_ratios"] if r is not None and math.isfinite(r)]
        spread = f"{min(rounds):.2f}-{max(rounds):.2f}" if rounds else "n/a"
        if len(rounds) == 1:
            spread = f"{rounds[0]:.2f}"
        ratio = f"{f['ratio']:.2f}" if f["ratio"] is not None else "n/a"
        lines.append(
            f"  {f['label']:<28}{f['unit']:>6}{_number(f['inbots'], f['unit']):>11}"
            f"{_number(f['baseline'], f['unit']):>11}{ratio:>13}  {spread}"
        )
    lines += [
        "",
        f"  Baselines (bare FastAPI, same database): sends vs {BASELINES['send']},",
        f"  inbox vs {BASELINES['inbox']}.",
        "  msg/s: higher is better, a ratio below 1 means Inbots is slower. ms: lower is better,",
        "  a ratio above 1 means Inbots is slower. 'per round': the ratio in each round.",
    ]
    if result["errors"]:
        lines.append(f"  WARNING: {result['errors']} requests failed; see the JSON file.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.http_api",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="a small run, to check it works")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("INBOTS_BENCH_POSTGRES_URL", DEFAULT_PG_ADMIN),
        help="an admin connection used to create and drop a throwaway database "
        "[INBOTS_BENCH_POSTGRES_URL]",
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    backends = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    started = time.perf_counter()
    results = []
    failed = False
    for backend in backends:
        try:
            results.append(run_backend(backend, plan, args.postgres_url))
        except Exception as exc:  # report it, and still run (and print) the other backend
            failed = True
            log(f"[{backend}] FAILED: {type(exc).__name__}: {exc}")
    log(f"total {time.perf_counter() - started:.1f} s")
    if results:
        print("\n\n".join(render(r) for r in results), flush=True)
    return 1 if failed or any(r["errors"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
