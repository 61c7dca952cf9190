"""Message search on a large mailbox: ``GET /v1/search`` beside an inbox page, same run.

    .venv/bin/python -m bench.search [--backend sqlite|postgres|both] [--quick]

For each backend a fresh database is migrated (migration 0014 builds the search index) and
seeded (``bench.seed``: 100,000 messages, 500,000 deliveries; every body also holds one of
1,000 rare words ``case0000``…``case0999``), the real Inbots server runs as a uvicorn
subprocess on it, and one ``httpx.Client`` makes one request at a time. Each search figure
alternates, round by round, with the baseline ``GET /v1/inbox?limit=50`` of the same agent on
the same server through the same client. See ``bench/README.md``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, replace
from typing import Any

import httpx
from sqlalchemy import create_engine

from bench.common import (
    SEEDED_TABLES,
    STALL_SECONDS,
    checked_request,
    fresh_workspace,
    load_average,
    log,
    ratio_range,
    run_info,
    run_main,
    title,
    write_result,
)
from bench.load import RunResult, alternate, percentile, run_load, run_summary
from bench.seed import RECIPIENTS_PER_MESSAGE, analyze, seed_inbox, tag_word
from bench.servers import ServerProcess

READER_UNACKED = 1_000
READER_ACKED = 1_000
TAGS = 1_000  # rare words; each is in about one message in TAGS


@dataclass(frozen=True)
class Plan:
    name: str
    messages: int
    rounds: int
    warmup: int
    requests: int  # timed requests per run, one at a time


FULL = Plan(name="full", messages=100_000, rounds=3, warmup=5, requests=60)
QUICK = replace(FULL, name="quick", messages=20_000, rounds=1, requests=20)


@dataclass(frozen=True)
class Search:
    key: str
    label: str
    operator: bool  # the operator's token (the whole workspace) or the reader's (its threads)
    query: Callable[[int], str]  # the seq-th request's q


def _rare(seq: int) -> str:
    return tag_word((seq * 37) % TAGS)  # a different rare word each request


SEARCHES = (
    Search("agent_rare", "agent, 1 rare word", False, _rare),
    Search("agent_two", "agent, rare + common word", False, lambda s: f"{_rare(s)} deploy"),
    Search("agent_common", "agent, common word", False, lambda s: "deploy"),
    Search("operator_rare", "operator, 1 rare word", True, _rare),
    Search("operator_common", "operator, common word", True, lambda s: "deploy"),
)
BASELINE_LABEL = "GET /v1/inbox?limit=50 (agent)"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.2f}"


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def measure(
    plan: Plan, url: str, reader: dict[str, str], operator: dict[str, str]
) -> list[dict[str, Any]]:
    figures: list[dict[str, Any]] = []
    with httpx.Client(base_url=url, timeout=120) as client:

        def inbox() -> RunResult:
            return run_load(
                url,
                lambda i, seq: ("GET", "/v1/inbox", {"params": {"limit": 50}, "headers": reader}),
                clients=1,
                per_client=plan.requests,
                warmup=plan.warmup,
                expect=200,
                client=client,
            )

        def searching(s: Search) -> Callable[[], RunResult]:
            headers = operator if s.operator else reader

            def run() -> RunResult:
                return run_load(
                    url,
                    lambda i, seq: (
                        "GET",
                        "/v1/search",
                        {"params": {"q": s.query(seq), "limit": 50}, "headers": headers},
                    ),
                    clients=1,
                    per_client=plan.requests,
                    warmup=plan.warmup,
                    expect=200,
                    client=client,
                )

            return run

        for s in SEARCHES:
            started = time.perf_counter()
            ours, base = alternate(plan.rounds, searching(s), inbox)
            mine = [x for r in ours for x in r.latencies_ms]
            theirs = [x for r in base for x in r.latencies_ms]
            p50, base_p50 = percentile(mine, 50), percentile(theirs, 50)
            p95, base_p95 = percentile(mine, 95), percentile(theirs, 95)
            figures.append(
                {
                    "key": s.key,
                    "label": s.label,
                    "p50_ms": round(p50, 3),
                    "p95_ms": round(p95, 3),
                    "inbox_p50_ms": round(base_p50, 3),
                    "inbox_p95_ms": round(base_p95, 3),
                    "ratio_p50": p50 / base_p50 if base_p50 else None,
                    "ratio_p95": p95 / base_p95 if base_p95 else None,
                    "round_ratios_p50": [
                        percentile(a.latencies_ms, 50) / percentile(b.latencies_ms, 50)
                        for a, b in zip(ours, base, strict=True)
                    ],
                    "errors": sum(r.errors for r in ours) + sum(r.errors for r in base),
                    "runs": [run_summary(r, (50, 95), throughput=False) for r in ours],
                    "inbox_runs": [run_summary(r, (50, 95), throughput=False) for r in base],
                }
            )
            log(f"  {s.label}: {time.perf_counter() - started:.1f} s")
    return figures


def run_backend(backend: str, plan: Plan, pg_admin_url: str) -> dict[str, Any]:
    log(f"[{backend}] {plan.name} run, {plan.messages:,} messages")
    started = time.perf_counter()
    load_before = os.getloadavg()
    with fresh_workspace(backend, pg_admin_url) as workspace, ExitStack() as stack:
        inbots = _server(workspace.url)
        stack.callback(inbots.stop)
        inbots.start()
        operator = {"Authorization": f"Bearer {workspace.token}"}
        with httpx.Client(base_url=inbots.url, timeout=60) as client:
            made = checked_request(
                client, "POST", "/v1/agents", 201, json={"name": "bench-reader"}, headers=operator
            )
        reader = {"Authorization": f"Bearer {made['api_key']}"}
        seeding = time.perf_counter()
        # Its own engine: no statement timeout (COPY of 500,000 rows may take longer than the
        # server's requests are allowed).
        engine = create_engine(workspace.url)
        stack.callback(engine.dispose)
        seed = seed_inbox(
            engine,
            workspace_id=workspace.workspace_id,
            reader_id=made["id"],
            deliveries=plan.messages * RECIPIENTS_PER_MESSAGE,
            reader_unacked=READER_UNACKED,
            reader_acked=READER_ACKED,
            tags=TAGS,
        )
        analyze(engine, SEEDED_TABLES)
        engine.dispose()
        seconds = time.perf_counter() - seeding
        log(
            f"  seeded {seed.messages:,} messages, {seed.deliveries:,} deliveries "
            f"in {seconds:.1f} s"
        )
        workspace.db.engine.dispose()  # the bench process holds no connection while measuring
        with httpx.Client(base_url=inbots.url, timeout=60) as client:
            found = checked_request(
                client, "GET", "/v1/search", 200, params={"q": "deploy"}, headers=operator
            )
            if not found["items"]:
                raise RuntimeError("the seeded messages are not in the search index")
        figures = measure(plan, inbots.url, reader, operator)
        errors = sum(f["errors"] for f in figures)
        if errors:
            log(f"[{backend}] inbots server log:\n{inbots.log_tail()}")
    result = {
        **run_info("search", backend, plan, load_before),
        "errors": errors,
        "seconds": round(time.perf_counter() - started, 1),
        "seed": asdict(seed),
        "figures": figures,
    }
    write_result(result)
    return result


def _server(database_url: str) -> ServerProcess:
    return ServerProcess(
        "inbots",
        "inbots.app:create_app",
        {
            "INBOTS_DATABASE_URL": database_url,
            "INBOTS_LOG_LEVEL": "WARNING",
            "INBOTS_STALL_SECONDS": STALL_SECONDS,
        },
    )


def render(result: dict[str, Any]) -> str:
    plan, seed = result["plan"], result["seed"]
    lines = [
        title("search", result),
        f"  {seed['messages']:,} messages, {seed['deliveries']:,} deliveries; 1 client, one "
        f"request at a time; {plan['requests']} timed requests per run, {plan['rounds']} "
        "alternating round(s) per figure;",
        f"  {load_average(result)}",
        "",
        f"  {'GET /v1/search?limit=50':<28}{'p50 ms':>9}{'p95 ms':>9}{'inbox p50':>11}"
        f"{'x inbox p50':>13}{'x inbox p95':>13}  per round",
    ]
    for f in result["figures"]:
        lines.append(
            f"  {f['label']:<28}{_ms(f['p50_ms']):>9}{_ms(f['p95_ms']):>9}"
            f"{_ms(f['inbox_p50_ms']):>11}{_x(f['ratio_p50']):>13}{_x(f['ratio_p95']):>13}"
            f"  {ratio_range(f['round_ratios_p50'])}"
        )
    lines += [
        "",
        f"  'x inbox': the search's latency divided by the baseline's, {BASELINE_LABEL},",
        "  measured in the rounds paired with it; above 1 is slower. The agent is in 100 of the",
        "  threads (2,000 messages); a rare word is in about 1 message in 1,000, 'deploy' in",
        "  most. 'per round': the p50 ratio in each round.",
    ]
    if result["errors"]:
        lines.append(
            f"  WARNING: {result['errors']} requests got an unexpected status; see the JSON."
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return run_main(
        argv,
        prog="python -m bench.search",
        description=__doc__,
        quick_help="20,000 messages, one round",
        plans=(FULL, QUICK),
        run_backend=run_backend,
        render=render,
    )


if __name__ == "__main__":
    sys.exit(main())
