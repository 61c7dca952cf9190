"""Operator read surfaces on a large workspace: /v1/stats, /metrics and the dashboard overview,
each beside an indexed page read of the same table, at two sizes of the deliveries table.

    .venv/bin/python -m bench.operator [--backend sqlite|postgres|both] [--quick]

For each backend and each size, a fresh database is migrated and seeded (``bench.seed``), the
real Inbots server runs as a uvicorn subprocess on it, and one signed-in ``httpx.Client`` (a
dashboard session cookie, plus the operator token on the API requests) reads each surface one
request at a time. Every surface alternates, round by round, with the baseline
``GET /v1/deliveries?limit=50`` on the same server, through the same client; ``GET /healthz`` is
reported as a floor. See ``bench/README.md``.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, replace
from datetime import timedelta
from typing import Any, cast

import httpx
from sqlalchemy import Table, bindparam, select, update

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
from bench.seed import InboxSeed, analyze, seed_inbox
from bench.servers import ServerProcess
from inbots.db.engine import Database
from inbots.deliveries.renotify import EXHAUSTED
from inbots.models.deliveries import Delivery

READER_UNACKED = 100  # the registered agent's share of the seeded mail (not measured here)
READER_ACKED = 100
OPS_ROWS = 10  # seeded deliveries marked failed, and as many marked stalled, for the overview
CSRF_FIELD = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass(frozen=True)
class Plan:
    name: str
    sizes: tuple[int, ...]  # deliveries stored, one fresh database each
    rounds: int  # each surface and the baseline alternate this many times
    warmup: int  # untimed requests per run
    requests: int  # timed requests per run, one at a time


FULL = Plan(name="full", sizes=(20_000, 100_000), rounds=3, warmup=3, requests=50)
QUICK = replace(FULL, name="quick", sizes=(5_000, 20_000), rounds=1, requests=20)
# --large: does the cost follow history? 100,000 and 1,000,000 deliveries (seeding takes minutes).
LARGE = replace(FULL, name="large", sizes=(100_000, 1_000_000))


@dataclass(frozen=True)
class Surface:
    key: str
    label: str
    path: str
    bearer: bool  # send the operator token (the dashboard relies on the session cookie)


BASELINE = Surface("deliveries", "GET /v1/deliveries?limit=50", "/v1/deliveries?limit=50", True)
MEASURED = (
    Surface("stats", "GET /v1/stats", "/v1/stats", True),
    Surface("metrics", "GET /metrics", "/metrics", False),
    Surface("dashboard", "GET / (dashboard)", "/", False),
    Surface("healthz", "GET /healthz (floor)", "/healthz", False),
)


# --- the workspace -------------------------------------------------------------------------


def seed_workspace(
    db: Database, inbots_url: str, operator_token: str, workspace_id: str, deliveries: int
) -> InboxSeed:
    """One agent registered through the API (the seed's reader), the rest bulk-inserted; then a
    few of the other agents' unacknowledged deliveries are marked failed and stalled, so the
    overview lists some, and the planner gets fresh statistics."""
    with httpx.Client(base_url=inbots_url, timeout=60) as client:
        reader = checked_request(
            client,
            "POST",
            "/v1/agents",
            201,
            json={"name": "bench-reader"},
            headers={"Authorization": f"Bearer {operator_token}"},
        )
    seed = seed_inbox(
        db.engine,
        workspace_id=workspace_id,
        reader_id=reader["id"],
        deliveries=deliveries,
        reader_unacked=READER_UNACKED,
        reader_acked=READER_ACKED,
    )
    t = cast(Table, Delivery.__table__)
    with db.engine.begin() as conn:
        oldest = conn.execute(
            select(t.c.id, t.c.accepted_at)
            .where(t.c.acknowledged_at.is_(None), t.c.recipient_id != reader["id"])
            .order_by(t.c.id)
            .limit(2 * OPS_ROWS)
        ).all()
        if len(oldest) < 2 * OPS_ROWS:
            raise RuntimeError(f"only {len(oldest)} unacknowledged deliveries to mark")
        later = timedelta(minutes=5)  # the oldest rows are older than that at every size
        failed = [{"key": i, "at": at + later} for i, at in oldest[:OPS_ROWS]]
        stalled = [{"key": i, "at": at + later} for i, at in oldest[OPS_ROWS:]]
        conn.execute(
            update(t)
            .where(t.c.id == bindparam("key"))
            .values(failed_at=bindparam("at"), failure_reason=EXHAUSTED),
            failed,
        )
        conn.execute(
            update(t).where(t.c.id == bindparam("key")).values(stalled_at=bindparam("at")),
            stalled,
        )
    analyze(db.engine, [*SEEDED_TABLES, "delivery_attempts"])
    return seed


def sign_in(inbots_url: str, operator_token: str) -> httpx.Client:
    """A client with a dashboard session: the login form's CSRF token, then the form POSTed
    with an Origin header naming this server. The cookie jar keeps the session."""
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    client = httpx.Client(base_url=inbots_url, timeout=120, limits=limits)
    try:
        form = client.get("/login")
        found = CSRF_FIELD.search(form.text)
        if form.status_code != 200 or found is None:
            raise RuntimeError(f"GET /login: {form.status_code}, csrf field found: {bool(found)}")
        answer = client.post(
            "/login",
            data={"token": operator_token, "csrf": found.group(1), "next": "/"},
            headers={"Origin": inbots_url},
        )
        if answer.status_code != 303 or answer.headers.get("location") != "/":
            raise RuntimeError(f"POST /login: {answer.status_code} {answer.text[:300]}")
        return client
    except BaseException:
        client.close()
        raise


def check_surfaces(client: httpx.Client, bearer: dict[str, str], seed: InboxSeed) -> None:
    """Each surface answers, and counts what was seeded."""
    stats = checked_request(client, "GET", "/v1/stats", 200, headers=bearer)
    counts = stats["deliveries"]
    if (counts["total"], counts["failed"], counts["stalled"]) != (
        seed.deliveries,
        OPS_ROWS,
        OPS_ROWS,
    ):
        raise RuntimeError(f"/v1/stats counts {counts}, seeded {seed.deliveries:,}")
    page = checked_request(
        client, "GET", "/v1/deliveries", 200, params={"limit": 50}, headers=bearer
    )
    if len(page["items"]) != 50 or not page["next_cursor"]:
        raise RuntimeError(f"/v1/deliveries returned {len(page['items'])} items")
    metrics = client.get("/metrics")
    wanted = f'inbots_deliveries{{state="failed"}} {float(OPS_ROWS)}'
    if metrics.status_code != 200 or wanted not in metrics.text:
        raise RuntimeError(f"/metrics: {metrics.status_code}, no line {wanted!r}")
    overview = client.get("/")
    if overview.status_code != 200 or "Overview" not in overview.text:
        raise RuntimeError(f"GET /: {overview.status_code} {overview.text[:300]}")


# --- measuring -----------------------------------------------------------------------------


def measure_size(
    plan: Plan, client: httpx.Client, operator_token: str, seed: InboxSeed
) -> list[dict[str, Any]]:
    bearer = {"Authorization": f"Bearer {operator_token}"}

    def runner(surface: Surface) -> Callable[[], RunResult]:
        kwargs: dict[str, Any] = {"headers": bearer} if surface.bearer else {}

        def run() -> RunResult:
            return run_load(
                str(client.base_url),
                lambda _c, _s: ("GET", surface.path, kwargs),
                clients=1,
                per_client=plan.requests,
                warmup=plan.warmup,
                expect=200,
                client=client,
            )

        return run

    figures = []
    all_baseline: list[RunResult] = []
    for surface in MEASURED:
        started = time.perf_counter()
        ours, base = alternate(plan.rounds, runner(surface), runner(BASELINE))
        all_baseline += base
        figures.append(figure(surface, seed.deliveries, ours, base))
        took = time.perf_counter() - started
        log(f"  {seed.deliveries:,} deliveries, {surface.label}: {took:.1f} s")
    figures.insert(0, figure(BASELINE, seed.deliveries, all_baseline, all_baseline))
    return figures


def figure(
    surface: Surface, size: int, ours: list[RunResult], base: list[RunResult]
) -> dict[str, Any]:
    """Percentiles over the runs' samples pooled; ratios to the baseline runs paired with them
    (the same list for the baseline's own row, whose ratio is 1)."""
    mine = [x for r in ours for x in r.latencies_ms]
    theirs = [x for r in base for x in r.latencies_ms]
    result: dict[str, Any] = {"key": surface.key, "label": surface.label, "size": size}
    for p in (50, 95):
        a, b = percentile(mine, p), percentile(theirs, p)
        result[f"p{p}_ms"] = a
        result[f"baseline_p{p}_ms"] = b
        result[f"ratio_p{p}"] = a / b if b else None
    result["round_ratios_p50"] = [
        percentile(x.latencies_ms, 50) / percentile(y.latencies_ms, 50)
        for x, y in zip(ours, base, strict=True)
    ]
    result["runs"] = [run_summary(r, (50, 95), throughput=False) for r in ours]
    if ours is not base:
        result["baseline_runs"] = [run_summary(r, (50, 95), throughput=False) for r in base]
    result["errors"] = sum(r.errors for r in ours) + sum(r.errors for r in base)
    return result


# --- one backend ---------------------------------------------------------------------------


def run_size(backend: str, plan: Plan, size: int, pg_admin_url: str) -> dict[str, Any]:
    with fresh_workspace(backend, pg_admin_url) as workspace, ExitStack() as stack:
        url, db, token = workspace.url, workspace.db, workspace.token

        inbots = ServerProcess(
            "inbots",
            "inbots.app:create_app",
            {
                "INBOTS_DATABASE_URL": url,
                "INBOTS_LOG_LEVEL": "WARNING",
                "INBOTS_STALL_SECONDS": STALL_SECONDS,
            },
        )
        stack.callback(inbots.stop)
        inbots.start()
        started = time.perf_counter()
        seed = seed_workspace(db, inbots.url, token, workspace.workspace_id, size)
        log(
            f"  seeded {seed.deliveries:,} deliveries ({seed.messages:,} messages) "
            f"in {time.perf_counter() - started:.1f} s"
        )
        db.engine.dispose()  # the bench process holds no connection while measuring
        client = sign_in(inbots.url, token)
        stack.callback(client.close)
        check_surfaces(client, {"Authorization": f"Bearer {token}"}, seed)
        figures = measure_size(plan, client, token, seed)
        check_surfaces(client, {"Authorization": f"Bearer {token}"}, seed)  # nothing moved
        errors = sum(f["errors"] for f in figures[1:])  # the baseline row repeats the pairs'
        if errors:
            log(f"[{backend}] inbots server log:\n{inbots.log_tail()}")
    return {"seed": asdict(seed), "errors": errors, "figures": figures}


def run_backend(backend: str, plan: Plan, pg_admin_url: str) -> dict[str, Any]:
    log(f"[{backend}] {plan.name} run, sizes {', '.join(f'{s:,}' for s in plan.sizes)}")
    started = time.perf_counter()
    load_before = os.getloadavg()
    sizes = [run_size(backend, plan, size, pg_admin_url) for size in plan.sizes]
    result = {
        **run_info("operator", backend, plan, load_before),
        "errors": sum(s["errors"] for s in sizes),
        "seconds": round(time.perf_counter() - started, 1),
        "sizes": sizes,
    }
    write_result(result)
    return result


# --- report --------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.2f}"


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def render(result: dict[str, Any]) -> str:
    plan = result["plan"]
    lines = [
        title("operator surfaces", result),
        f"  1 client, one request at a time; {plan['requests']} timed requests per run, "
        f"{plan['rounds']} alternating round(s) per surface;",
        f"  {load_average(result)}",
        "",
        f"  {'deliveries':>10}  {'request':<30}{'p50 ms':>9}{'p95 ms':>9}"
        f"{'x base p50':>12}{'x base p95':>12}  per round",
    ]
    for size in result["sizes"]:
        for f in size["figures"]:
            spread = ratio_range(f["round_ratios_p50"])
            if f["key"] == BASELINE.key:
                spread = "(baseline)"
            lines.append(
                f"  {f['size']:>10,}  {f['label']:<30}{_ms(f['p50_ms']):>9}{_ms(f['p95_ms']):>9}"
                f"{_x(f['ratio_p50']):>12}{_x(f['ratio_p95']):>12}  {spread}"
            )
        lines.append("")
    first, last = result["sizes"][0], result["sizes"][-1]
    small, large = first["seed"]["deliveries"], last["seed"]["deliveries"]
    lines.append(
        f"  Growth of the p50, {small:,} -> {large:,} deliveries ({large / small:.0f}x rows):"
    )
    for a, b in zip(first["figures"], last["figures"], strict=True):
        growth = b["p50_ms"] / a["p50_ms"] if a["p50_ms"] else None
        lines.append(f"    {a['label']:<30}x{_x(growth)}")
    lines += [
        "",
        "  'x base': the surface's latency divided by the baseline's, GET /v1/deliveries?limit=50",
        "  (an indexed page of the same table) measured in the rounds paired with it; above 1 is",
        "  slower. 'per round': the p50 ratio in each round.",
    ]
    if result["errors"]:
        lines.append(
            f"  WARNING: {result['errors']} requests got an unexpected status; see the JSON."
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    large = "--large" in args  # 100,000 and 1,000,000 deliveries instead of the full run's sizes
    if large:
        args.remove("--large")
    return run_main(
        args,
        prog="python -m bench.operator",
        description=__doc__,
        quick_help="small sizes, one round",
        plans=(LARGE if large else FULL, QUICK),
        run_backend=run_backend,
        render=render,
    )


if __name__ == "__main__":
    sys.exit(main())
