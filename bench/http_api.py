"""HTTP API benchmark: sends per second and inbox-listing latency, each beside a bare baseline.

    .venv/bin/python -m bench.http_api [--backend sqlite|postgres|both] [--quick]

For each backend, the real Inbots server and a bare FastAPI baseline (``bench.baseline_app``) run
as uvicorn subprocesses on the same freshly migrated database, and the same client (N threads,
one httpx keep-alive connection each) drives both, alternating between them round by round.
Every figure is printed beside its baseline with the ratio Inbots / baseline. See
``bench/README.md``.

The caps and the send rate limit have their own figure (``send_caps_N``): the same send workload
against two Inbots servers on the same database, one with the caps and the rate limit on
(``GOVERNED``: set above what the workload reaches, so every send is checked and none refused)
and one with them off (``UNGOVERNED``), alternating round by round; the ratio on / off is the
check's cost (the spec asks that it stay within 10 %).

The same-work floor (``bench.samework_app``: the same statements in the same transactions, by hand
with psycopg or sqlite3) has two figures, ``send_5_samework`` and ``inbox_c1_p50_samework``,
each alternating Inbots and the floor round by round.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, replace
from typing import Any

import httpx
from sqlalchemy import func, select

from bench import baseline_app, samework_app
from bench.common import (
    SEEDED_TABLES,
    STALL_SECONDS,
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
from bench.load import RunResult, alternate, percentile, run_load, run_summary
from bench.seed import InboxSeed, analyze, seed_inbox, seed_items
from bench.servers import ServerProcess
from inbots.config import Settings
from inbots.db.engine import Database
from inbots.models.deliveries import Delivery
from inbots.models.messages import Message

# Caps and the rate limit on, above what the workload reaches (every send is checked: its
# token bucket and its recipients' ledger rows are updated, none is refused), and off.
GOVERNED = {
    "INBOTS_CAP_PER_RECIPIENT": "20000",
    "INBOTS_CAP_PER_PAIR": "20000",
    "INBOTS_RATE_LIMIT_PER_MINUTE": "1000000",
    "INBOTS_RATE_LIMIT_BURST": "1000000",
}
UNGOVERNED = {
    "INBOTS_CAP_PER_RECIPIENT": "0",
    "INBOTS_CAP_PER_PAIR": "0",
    "INBOTS_RATE_LIMIT_PER_MINUTE": "0",
}
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
    # Caps on/off alternate this many times per figure: the two sides differ by a few per cent,
    # less than one round's noise on a shared machine (an A/A run of two identical servers
    # spreads 0.86-1.07 round by round), so this figure gets more rounds.
    governance_rounds: int = 10


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
    governance_rounds=2,
    send_warmup=3,
    send_per_client=15,
    list_warmup=3,
    list_per_client=8,
    list_single=30,
    deliveries=20_000,
)


# --- the world: agents, threads and a large mailbox ----------------------------------------


@dataclass
class World:
    reader_key: str
    sender_keys: list[str]  # one sender per client
    threads: dict[int, list[str]]  # recipients -> one thread per client
    seed: InboxSeed


def build_world(
    plan: Plan, inbots_url: str, operator_token: str, db: Database, workspace_id: str
) -> World:
    """Agents and send threads through the API; the large mailbox by bulk insert."""
    bearer = {"Authorization": f"Bearer {operator_token}"}
    with httpx.Client(base_url=inbots_url, timeout=60) as client:

        def register(name: str) -> dict[str, Any]:
            created: dict[str, Any] = checked_request(
                client, "POST", "/v1/agents", 201, json={"name": name}, headers=bearer
            )
            return created

        reader = register("bench-reader")
        senders = [register(f"bench-sender-{i:02d}") for i in range(plan.clients)]
        recipients = [register(f"bench-rcpt-{i:02d}") for i in range(max(plan.recipients))]
        threads: dict[int, list[str]] = {}
        for n in plan.recipients:
            threads[n] = [
                checked_request(
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
        inbox = checked_request(
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


def throughput_figure(
    key: str, label: str, ours: list[RunResult], theirs: list[RunResult]
) -> dict[str, Any]:
    mine = statistics.median(r.per_second for r in ours)
    base = statistics.median(r.per_second for r in theirs)
    return {
        **comparison(
            key,
            label,
            "msg/s",
            inbots=mine,
            baseline=base,
            round_ratios=[
                a.per_second / b.per_second if b.per_second else None
                for a, b in zip(ours, theirs, strict=True)
            ],
            higher_is_better=True,
        ),
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
                **comparison(
                    f"{key}_p{p}",
                    f"{label}, p{p}",
                    "ms",
                    inbots=mine,
                    baseline=base,
                    round_ratios=[
                        percentile(a.latencies_ms, p) / percentile(b.latencies_ms, p)
                        for a, b in zip(ours, theirs, strict=True)
                    ],
                    higher_is_better=False,
                ),
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


def measure_samework(
    plan: Plan, inbots: ServerProcess, floor: ServerProcess, world: World
) -> list[dict[str, Any]]:
    """Inbots beside the same-work floor (``bench.samework_app``): the same requests, the same
    agents and threads, alternating round by round. Sends to 5 recipients with ``plan.clients``
    clients (``send_5_samework``, Inbots / floor throughput) and the inbox page with one client
    (``inbox_c1_p50_samework``, Inbots / floor p50)."""
    n = 5
    thread_ids = world.threads[n]
    headers = [{"Authorization": f"Bearer {key}"} for key in world.sender_keys]

    def send(client: int, seq: int) -> tuple[str, str, dict[str, Any]]:
        return (
            "POST",
            f"/v1/threads/{thread_ids[client]}/messages",
            {"json": {"body": body_for(client, seq)}, "headers": headers[client]},
        )

    def sends(server: ServerProcess) -> RunResult:
        return run_load(
            server.url,
            send,
            clients=plan.clients,
            per_client=plan.send_per_client,
            warmup=plan.send_warmup,
            expect=201,
        )

    auth = {"headers": {"Authorization": f"Bearer {world.reader_key}"}}

    def listings(server: ServerProcess) -> RunResult:
        return run_load(
            server.url,
            lambda _c, _s: ("GET", "/v1/inbox", auth),
            clients=1,
            per_client=plan.list_single,
            warmup=plan.list_warmup,
            expect=200,
        )

    started = time.perf_counter()
    a, b = alternate(plan.rounds, lambda: listings(inbots), lambda: listings(floor))
    p50 = latency_figures("inbox_c1", "inbox, 1 client, same work", a, b)[0]
    p50["key"] = "inbox_c1_p50_samework"
    log(f"  inbox listing, 1 client, vs the same-work floor: {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    a, b = alternate(plan.rounds, lambda: sends(inbots), lambda: sends(floor))
    send_figure = throughput_figure("send_5_samework", "send, 5 recipients, same work", a, b)
    log(f"  sends, 5 recipients, vs the same-work floor: {time.perf_counter() - started:.1f} s")
    return [send_figure, p50]


def same_shape(ours: Any, theirs: Any, where: str = "") -> list[str]:
    """Where two JSON answers differ in shape (keys, and the type of each value)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        diffs = [f"{where}.{k}: only one side" for k in ours.keys() ^ theirs.keys()]
        for k in ours.keys() & theirs.keys():
            diffs += same_shape(ours[k], theirs[k], f"{where}.{k}")
        return diffs
    if isinstance(ours, list) and isinstance(theirs, list):
        if len(ours) != len(theirs):
            return [f"{where}: {len(ours)} items vs {len(theirs)}"]
        return [d for x, y in zip(ours, theirs, strict=True) for d in same_shape(x, y, where)]
    if ours is not None and theirs is not None and type(ours) is not type(theirs):
        return [f"{where}: {type(ours).__name__} vs {type(theirs).__name__}"]
    return []


def check_samework(inbots: ServerProcess, floor: ServerProcess, world: World) -> None:
    """The floor answers a send and an inbox page with the same JSON shape as Inbots."""
    sender = {"Authorization": f"Bearer {world.sender_keys[0]}"}
    reader = {"Authorization": f"Bearer {world.reader_key}"}
    path = f"/v1/threads/{world.threads[5][0]}/messages"
    answers = []
    for server in (inbots, floor):
        with httpx.Client(base_url=server.url, timeout=60) as client:
            sent = checked_request(
                client, "POST", path, 201, json={"body": "shape check"}, headers=sender
            )
            inbox = checked_request(client, "GET", "/v1/inbox", 200, headers=reader)
        answers.append((sent, inbox))
    diffs = same_shape(answers[0][0], answers[1][0], "send") + same_shape(
        answers[0][1], answers[1][1], "inbox"
    )
    if diffs:
        raise RuntimeError("the same-work floor answers differently: " + "; ".join(diffs))


def measure_governance(
    plan: Plan, governed: ServerProcess, ungoverned: ServerProcess, world: World
) -> list[dict[str, Any]]:
    """The same sends with the caps and the rate limit on (the figure) and off (its baseline)."""
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

        def against(server: ServerProcess, send: Callable[..., Any] = send) -> RunResult:
            return run_load(
                server.url,
                send,
                clients=plan.clients,
                per_client=plan.send_per_client,
                warmup=plan.send_warmup,
                expect=201,
            )

        started = time.perf_counter()
        on, off = alternate(
            plan.governance_rounds, lambda: against(governed), lambda: against(ungoverned)
        )
        noun = "recipient" if n == 1 else "recipients"
        figure = throughput_figure(f"send_caps_{n}", f"send, caps on/off, {n} {noun}", on, off)
        figures.append(figure)
        log(
            f"  sends with caps on vs off, {n} {noun}: ratio {figure['ratio']:.3f} "
            f"({time.perf_counter() - started:.1f} s)"
        )
    return figures


# --- one backend ---------------------------------------------------------------------------


def run_backend(backend: str, plan: Plan, pg_admin_url: str) -> dict[str, Any]:
    log(f"[{backend}] preparing ({plan.name} run)")
    started = time.perf_counter()
    load_before = os.getloadavg()
    with fresh_workspace(backend, pg_admin_url) as workspace, ExitStack() as stack:
        url, db = workspace.url, workspace.db
        baseline_app.metadata.create_all(db.engine)

        served = {
            "INBOTS_DATABASE_URL": url,
            "INBOTS_LOG_LEVEL": "WARNING",
            "INBOTS_STALL_SECONDS": STALL_SECONDS,  # keeps the seeded mail from stalling
        }
        inbots = ServerProcess("inbots", "inbots.app:create_app", {**served, **GOVERNED})
        stack.callback(inbots.stop)
        inbots.start()
        # The caps figure compares two servers with the same history: both start here and
        # serve nothing but its sends (the main server above also serves the other figures).
        governed = ServerProcess("inbots-governed", "inbots.app:create_app", {**served, **GOVERNED})
        stack.callback(governed.stop)
        governed.start()
        ungoverned = ServerProcess(
            "inbots-ungoverned", "inbots.app:create_app", {**served, **UNGOVERNED}
        )
        stack.callback(ungoverned.stop)
        ungoverned.start()
        world = build_world(plan, inbots.url, workspace.token, db, workspace.workspace_id)
        db.engine.dispose()  # the bench process holds no connection while measuring
        baseline = ServerProcess(
            "baseline", "bench.baseline_app:create_app", {baseline_app.URL_ENV: url}
        )
        stack.callback(baseline.stop)
        baseline.start()
        # The same-work floor, with the caps and rate limit of the main Inbots server, so that
        # both admit every send alike (PostgreSQL: inbots_admit; SQLite: governance.py's
        # statements).
        floor = ServerProcess(
            "samework", "bench.samework_app:create_app", {samework_app.URL_ENV: url, **GOVERNED}
        )
        stack.callback(floor.stop)
        floor.start()
        check_inbox(inbots.url, world, plan)

        # Listing first, while exactly the seeded deliveries are stored; sends add more.
        listing = measure_listing(plan, inbots, baseline, world)
        figures = measure_sends(plan, inbots, baseline, world) + listing
        check_samework(inbots, floor, world)
        samework = measure_samework(plan, inbots, floor, world)
        figures += samework
        governance = measure_governance(plan, governed, ungoverned, world)
        figures += governance
        stored = check_fanout(db, world)
        errors = sum(r["errors"] for f in figures for r in f["inbots_runs"] + f["baseline_runs"])
        if errors:
            log(f"[{backend}] inbots server log:\n{inbots.log_tail()}")
            log(f"[{backend}] baseline server log:\n{baseline.log_tail()}")

    result = {
        **run_info("http_api", backend, plan, load_before),
        "seed": asdict(world.seed),
        "messages_stored_by_sends": {str(k): v for k, v in stored.items()},
        "errors": errors,
        # Sends with the caps and the rate limit on / off (the spec: within 10 %).
        "caps_on_off_ratio": {f["key"]: f["ratio"] for f in governance},
        # Inbots against the same-work floor (bench.samework_app).
        **{f["key"]: f["ratio"] for f in samework},
        "seconds": round(time.perf_counter() - started, 1),
        "figures": figures,
    }
    write_result(result)
    return result


# --- report --------------------------------------------------------------------------------

BASELINES = {
    "send": "an endpoint doing one INSERT",
    "inbox": "an endpoint selecting 50 rows by an indexed key",
}


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if unit == "msg/s" else f"{value:,.2f}"


def render(result: dict[str, Any]) -> str:
    plan = result["plan"]
    seed = result["seed"]
    lines = [
        title("HTTP API benchmark", result),
        f"  {plan['clients']} concurrent clients (and 1, for the inbox), {plan['rounds']} "
        f"alternating round(s) per figure;",
        f"  {seed['deliveries']:,} deliveries stored, the reader has "
        f"{seed['reader_unacked']:,} unacknowledged; {load_average(result)}",
        "",
        *figure_table(result["figures"], _number, widths=(34, 6, 11)),
        "",
        f"  Baselines (bare FastAPI, same database): sends vs {BASELINES['send']},",
        f"  inbox vs {BASELINES['inbox']}; 'caps on/off' is the same sends with the caps",
        "  and the rate limit on (above what the workload reaches) against them off.",
        "  'same work': against bench.samework_app, the same statements by hand (psycopg or",
        "  sqlite3, no ORM); targets: send >= 0.5, inbox p50 <= 1.5.",
        "  msg/s: higher is better, a ratio below 1 means Inbots is slower. ms: lower is better,",
        "  a ratio above 1 means Inbots is slower. 'per round': the ratio in each round.",
    ]
    if result["errors"]:
        lines.append(f"  WARNING: {result['errors']} requests failed; see the JSON file.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return run_main(
        argv,
        prog="python -m bench.http_api",
        description=__doc__,
        quick_help="a small run, to check it works",
        plans=(FULL, QUICK),
        run_backend=run_backend,
        render=render,
    )


if __name__ == "__main__":
    sys.exit(main())
