"""Where a send's and an inbox page's CPU goes: the server, PostgreSQL and the client, per
request, for Inbots and for the bare baseline, on PostgreSQL.

    .venv/bin/python -m bench.cpu_split [--seconds 8] [--rounds 2]

The same servers, world and requests as ``bench.http_api`` (sends to 5 recipients from 8
clients, the caps on; inbox pages of 50 for 1 client over 20,000 stored deliveries), each run
for a fixed time while the CPU time of each process is read from ``/proc`` before and after:
the uvicorn server, every ``postgres`` process of the machine (so other users of the shared
server count too: run it on a quiet machine) and this process (the client threads). Inbots and
the baseline alternate round by round. On 2 cores with 8 clients both sides keep the CPUs about
equally busy, so the throughput ratio ``send_5`` follows the ratio of the total CPU per request;
the last lines turn the target (``send_5`` >= 0.6) into a CPU budget per send and set the parts
of a send that are not the server's against it. See ``bench/README.md``, "CPU per request".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from typing import Any

import httpx

from bench import baseline_app
from bench.common import DEFAULT_PG_ADMIN, RESULTS, STALL_SECONDS, fresh_workspace, log
from bench.http_api import GOVERNED, QUICK, READER_OWNER, World, build_world
from bench.servers import ServerProcess

TICKS = os.sysconf("SC_CLK_TCK")
SEND_TARGET = 0.6  # issue 12's send_5 target: Inbots / baseline msg/s


def cpu_seconds(pids: Callable[[], list[int]]) -> float:
    total = 0
    for pid in pids():
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            continue  # it ended meanwhile
    return total / TICKS


def postgres_pids() -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if f.read().startswith(b"postgres"):
                        found.append(int(name))
            except OSError:
                continue
    return found


Request = tuple[str, str, dict[str, Any]]


def measure(
    server: ServerProcess, clients: int, seconds: float, request: Callable[[int, int], Request]
) -> dict[str, float]:
    """``clients`` threads send ``request(client, n)`` for ``seconds``; CPU per request."""
    assert server.proc is not None
    own = [server.proc.pid]
    done = [0] * clients
    stop = time.monotonic() + seconds

    def client(i: int) -> None:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            n = 0
            while time.monotonic() < stop:
                method, path, kw = request(i, n)
                response = http.request(method, path, **kw)
                if response.status_code >= 300:
                    raise RuntimeError(f"{method} {path}: {response.status_code} {response.text}")
                n += 1
            done[i] = n

    before = (
        cpu_seconds(lambda: own),
        cpu_seconds(postgres_pids),
        cpu_seconds(lambda: [os.getpid()]),
    )
    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    after = (
        cpu_seconds(lambda: own),
        cpu_seconds(postgres_pids),
        cpu_seconds(lambda: [os.getpid()]),
    )
    count = sum(done)
    server_ms, postgres_ms, client_ms = (
        1000 * (b - a) / count for a, b in zip(before, after, strict=True)
    )
    return {
        "per_second": count / elapsed,
        "server_ms": server_ms,
        "postgres_ms": postgres_ms,
        "client_ms": client_ms,
        "total_ms": server_ms + postgres_ms + client_ms,
    }


def workloads(
    world: World,
) -> dict[str, tuple[int, Callable[[int, int], Request], Callable[[int, int], Request]]]:
    senders = [{"Authorization": f"Bearer {key}"} for key in world.sender_keys]
    reader = {"Authorization": f"Bearer {world.reader_key}"}
    threads = world.threads[5]

    def send(i: int, n: int) -> Request:
        path = f"/v1/threads/{threads[i]}/messages"
        return "POST", path, {"json": {"body": f"cpu split {i} {n}"}, "headers": senders[i]}

    def insert(i: int, n: int) -> Request:
        return "POST", "/insert", {"json": {"body": f"cpu split {i} {n}"}}

    def inbox(i: int, n: int) -> Request:
        return "GET", "/v1/inbox", {"headers": reader}

    def items(i: int, n: int) -> Request:
        return "GET", "/items", {"params": {"owner": READER_OWNER}}

    return {"send_5": (8, send, insert), "inbox_c1": (1, inbox, items)}


def mean(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: sum(r[key] for r in runs) / len(runs) for key in runs[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu_split", description=__doc__)
    parser.add_argument("--seconds", type=float, default=8.0, help="per run (default 8)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds (default 2)")
    parser.add_argument("--pg-admin-url", default=DEFAULT_PG_ADMIN)
    args = parser.parse_args(argv)
    plan = replace(QUICK, recipients=(5,))
    results: dict[str, Any] = {"load_before": os.getloadavg()[0], "figures": {}}
    with fresh_workspace("postgres", args.pg_admin_url) as workspace, ExitStack() as stack:
        baseline_app.metadata.create_all(workspace.db.engine)
        served = {
            "INBOTS_DATABASE_URL": workspace.url,
            "INBOTS_LOG_LEVEL": "WARNING",
            "INBOTS_STALL_SECONDS": STALL_SECONDS,
            **GOVERNED,
        }
        inbots = ServerProcess("inbots", "inbots.app:create_app", served)
        stack.callback(inbots.stop)
        inbots.start()
        world = build_world(plan, inbots.url, workspace.token, workspace.db, workspace.workspace_id)
        workspace.db.engine.dispose()
        baseline = ServerProcess(
            "baseline", "bench.baseline_app:create_app", {baseline_app.URL_ENV: workspace.url}
        )
        stack.callback(baseline.stop)
        baseline.start()
        for name, (clients, ours, theirs) in workloads(world).items():
            measure(inbots, clients, 1.0, ours)  # warm-up: connections, prepared statements
            measure(baseline, clients, 1.0, theirs)
            sides: dict[str, list[dict[str, float]]] = {"inbots": [], "baseline": []}
            for round_ in range(args.rounds):
                order = [("inbots", inbots, ours), ("baseline", baseline, theirs)]
                for side, server, request in order if round_ % 2 == 0 else order[::-1]:
                    sides[side].append(measure(server, clients, args.seconds, request))
            results["figures"][name] = {side: mean(runs) for side, runs in sides.items()}
            log(f"  {name}: done")
    results["load_after"] = os.getloadavg()[0]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cpu_split-postgres.json").write_text(json.dumps(results, indent=2) + "\n")
    print(render(results))
    return 0


def render(results: dict[str, Any]) -> str:
    lines = [
        "CPU per request, PostgreSQL (ms of CPU; server = the uvicorn process, postgres = every",
        f"postgres process, client = the load threads); load average {results['load_before']:.1f}"
        f" -> {results['load_after']:.1f}",
        "",
        f"  {'figure':<10} {'side':<9} {'req/s':>7} {'server':>7} {'postgres':>9} {'client':>7}"
        f" {'total':>7}",
    ]
    for name, sides in results["figures"].items():
        for side, r in sides.items():
            lines.append(
                f"  {name:<10} {side:<9} {r['per_second']:>7.1f} {r['server_ms']:>7.2f}"
                f" {r['postgres_ms']:>9.2f} {r['client_ms']:>7.2f} {r['total_ms']:>7.2f}"
            )
    send = results["figures"].get("send_5")
    if send:
        ours, base = send["inbots"], send["baseline"]
        budget = base["total_ms"] / SEND_TARGET
        floor = ours["postgres_ms"] + ours["client_ms"]
        lines += [
            "",
            f"  send_5 at the target {SEND_TARGET} would need a total of at most "
            f"{budget:.2f} ms per send (the baseline's {base['total_ms']:.2f} / {SEND_TARGET});",
            f"  Inbots' PostgreSQL and client alone take {floor:.2f} ms "
            f"({100 * floor / budget:.0f} % of it), leaving {budget - floor:.2f} ms for the "
            f"server, which takes {ours['server_ms']:.2f} (the baseline's server: "
            f"{base['server_ms']:.2f}).",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
