"""Two revisions' operator surfaces side by side, on one seeded database.

    git worktree add /tmp/before <rev>
    .venv/bin/python -m bench.operator_pair /tmp/before [--deliveries 100000] [--rounds 4]

``bench.operator`` measures one revision at a time, so a change of a few milliseconds is lost in
the drift between two runs of it. This seeds one PostgreSQL workspace (as ``bench.operator``
does), starts this checkout's server and the other checkout's server on it (the other one
imports ``inbots`` from its own directory), and runs both in alternating rounds: in each, for
each surface, the server's baseline page read (``GET /v1/deliveries?limit=50``) and then the
surface, 40 timed requests each, one at a time. Each surface's figure is its p50 over the
baseline's p50 on the same server in the same round; the table gives the median over the rounds
and each round's value. The other checkout must have the same migrations as this one (they
share the database).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import httpx

from bench import servers
from bench.common import STALL_SECONDS, fresh_workspace, log
from bench.load import percentile, run_load
from bench.operator import BASELINE, MEASURED, Surface, seed_workspace, sign_in
from bench.servers import ServerProcess

POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def p50(client: httpx.Client, surface: Surface, token: str, requests: int) -> float:
    kwargs = {"headers": {"Authorization": f"Bearer {token}"}} if surface.bearer else {}
    result = run_load(
        str(client.base_url),
        lambda _c, _s: ("GET", surface.path, kwargs),
        clients=1,
        per_client=requests,
        warmup=3,
        expect=200,
        client=client,
    )
    if result.errors:
        raise RuntimeError(f"{surface.path}: {result.error_samples}")
    return percentile(result.latencies_ms, 50)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.operator_pair", description=__doc__)
    parser.add_argument("other", type=Path, help="the other checkout (a git worktree)")
    parser.add_argument("--deliveries", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument(
        "--postgres-url", default=os.environ.get("INBOTS_BENCH_POSTGRES_URL", POSTGRES)
    )
    args = parser.parse_args(argv)
    if not (args.other / "inbots" / "__init__.py").is_file():
        parser.error(f"{args.other} is not a checkout of Inbots")
    surfaces = [s for s in MEASURED if s.key != "healthz"]
    figures: dict[tuple[str, str], list[float]] = {}
    with fresh_workspace("postgres", args.postgres_url) as ws:
        env = {
            "INBOTS_DATABASE_URL": ws.url,
            "INBOTS_LOG_LEVEL": "WARNING",
            "INBOTS_STALL_SECONDS": STALL_SECONDS,
        }
        here = ServerProcess("this", "inbots.app:create_app", env)
        other = ServerProcess("other", "inbots.app:create_app", env)
        try:
            here.start()
            root, servers.REPO_ROOT = servers.REPO_ROOT, args.other.resolve()
            try:
                other.start()
            finally:
                servers.REPO_ROOT = root
            log(f"seeding {args.deliveries:,} deliveries")
            seed_workspace(ws.db, here.url, ws.token, ws.workspace_id, args.deliveries)
            ws.db.engine.dispose()
            clients = {"this": sign_in(here.url, ws.token), "other": sign_in(other.url, ws.token)}
            for r in range(args.rounds):
                order = ["this", "other"] if r % 2 == 0 else ["other", "this"]
                for side in order:
                    client = clients[side]
                    for surface in surfaces:
                        base = p50(client, BASELINE, ws.token, args.requests)
                        mine = p50(client, surface, ws.token, args.requests)
                        figures.setdefault((side, surface.key), []).append(mine / base)
                log(f"  round {r + 1} of {args.rounds} done")
            for client in clients.values():
                client.close()
        finally:
            here.stop()
            other.stop()
    print(
        f"Operator surfaces, this checkout and {args.other}, {args.deliveries:,} deliveries, "
        f"PostgreSQL; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )
    print("  p50 / the same server's baseline p50; median over rounds [each round]")
    for surface in surfaces:
        cells = []
        for side in ("other", "this"):
            values = figures[(side, surface.key)]
            each = ", ".join(f"{v:.2f}" for v in values)
            cells.append(f"{side} {statistics.median(values):.2f}x [{each}]")
        print(f"  {surface.label:22s} " + "   ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
