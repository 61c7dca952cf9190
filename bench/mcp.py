"""MCP benchmark: ``send_message`` and ``check_inbox`` over Streamable HTTP with the official MCP
client, each beside the same operation over the HTTP API, on the same server, by the same agent.

    .venv/bin/python -m bench.mcp [--backend sqlite|postgres|both] [--quick]

For each backend: a throwaway database and the real Inbots API (uvicorn, the embedded default;
no webhooks, so nothing is notified). One client, one call at a time, so the figure is each
call's latency: MCP (``Client.call_tool`` over ``/mcp``, one session for the round) against
HTTP (``POST /v1/threads/{id}/messages``, ``GET /v1/inbox?limit=20`` with one ``httpx.Client``).
The reader's inbox holds ``waiting`` unacknowledged messages (2,000 in the full run) while
``check_inbox`` is timed. MCP and HTTP rounds alternate. The ratio is MCP / HTTP: what the MCP
layer (JSON-RPC, the session, tool argument validation, structured output and the client's
validation of it) costs on top of the same service call. See ``bench/README.md``.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import Any

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

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
from bench.load import alternate, percentile
from bench.servers import ServerProcess


@dataclass(frozen=True)
class Plan:
    name: str
    rounds: int  # MCP and HTTP alternate this many times per figure
    sends: int  # timed sends per round
    checks: int  # timed inbox checks per round
    warmup: int  # untimed calls before each round
    waiting: int  # unacknowledged messages in the reader's inbox while checking


FULL = Plan(name="full", rounds=3, sends=150, checks=100, warmup=10, waiting=2_000)
QUICK = replace(FULL, name="quick", rounds=1, sends=40, checks=30, waiting=300)

# Governance off: the figure compares two doors to the same service, and the inbox is filled
# faster than the default rate limit allows.
SERVED = {
    "INBOTS_LOG_LEVEL": "WARNING",
    "INBOTS_RATE_LIMIT_PER_MINUTE": "0",
    "INBOTS_CAP_PER_RECIPIENT": "0",
    "INBOTS_CAP_PER_PAIR": "0",
}


@dataclass
class World:
    sender_key: str
    reader_key: str
    thread_id: str


def build_world(url: str, token: str, waiting: int) -> World:
    operator = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, timeout=30) as client:
        keys = {
            name: checked_request(
                client, "POST", "/v1/agents", 201, json={"name": name}, headers=operator
            )["api_key"]
            for name in ("mcp-sender", "mcp-reader")
        }
        sender = {"Authorization": f"Bearer {keys['mcp-sender']}"}
        thread = checked_request(
            client,
            "POST",
            "/v1/threads",
            201,
            json={"title": "MCP benchmark", "participants": ["mcp-reader"]},
            headers=sender,
        )["id"]
        started = time.perf_counter()
        for i in range(waiting):
            checked_request(
                client,
                "POST",
                f"/v1/threads/{thread}/messages",
                201,
                json={"body": f"waiting message {i}: the nightly build passed, numbers attached"},
                headers=sender,
            )
        took = time.perf_counter() - started
        log(f"  {waiting:,} messages waiting in the reader's inbox ({took:.1f} s)")
    return World(keys["mcp-sender"], keys["mcp-reader"], thread)


Call = Callable[[int], Awaitable[None]]


async def _timed(call: Call, count: int, warmup: int) -> list[float]:
    for i in range(warmup):
        await call(-1 - i)
    latencies = []
    for i in range(count):
        started = time.perf_counter()
        await call(i)
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def over_mcp(
    url: str,
    key: str,
    tool: str,
    arguments: Callable[[int], dict[str, Any]],
    plan: Plan,
    count: int,
) -> list[float]:
    async def scenario() -> list[float]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30.0)
        transport = streamable_http_client(f"{url}/mcp", http_client=http)
        async with http, Client(transport) as client:

            async def call(i: int) -> None:
                result = await client.call_tool(tool, arguments(i))
                if result.is_error:
                    raise RuntimeError(f"{tool}: {result.content}")

            return await _timed(call, count, plan.warmup)

    return anyio.run(scenario)


def over_http(
    url: str,
    key: str,
    request: Callable[[int], tuple[str, str, dict[str, Any]]],
    plan: Plan,
    count: int,
) -> list[float]:
    async def scenario() -> list[float]:
        with httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30
        ) as client:

            async def call(i: int) -> None:
                method, path, kw = request(i)
                response = client.request(method, path, **kw)
                if response.status_code >= 300:
                    raise RuntimeError(
                        f"{method} {path}: {response.status_code} {response.text[:300]}"
                    )

            return await _timed(call, count, plan.warmup)

    return anyio.run(scenario)


def latency_figure(
    key: str, label: str, mcp: list[list[float]], http: list[list[float]]
) -> dict[str, Any]:
    mine = percentile([x for r in mcp for x in r], 50)
    base = percentile([x for r in http for x in r], 50)
    return {
        **comparison(
            key,
            label,
            "ms",
            inbots=mine,
            baseline=base,
            round_ratios=[
                statistics.median(a) / statistics.median(b) for a, b in zip(mcp, http, strict=True)
            ],
            higher_is_better=False,
        ),
        "mcp_p99_ms": percentile([x for r in mcp for x in r], 99),
        "http_p99_ms": percentile([x for r in http for x in r], 99),
    }


def run_backend(backend: str, plan: Plan, pg_admin_url: str) -> dict[str, Any]:
    log(f"[{backend}] preparing ({plan.name} run)")
    started = time.perf_counter()
    load_before = os.getloadavg()
    with fresh_workspace(backend, pg_admin_url) as workspace, ExitStack() as stack:
        server = ServerProcess(
            "inbots", "inbots.app:create_app", {"INBOTS_DATABASE_URL": workspace.url, **SERVED}
        )
        stack.callback(server.stop)
        server.start()
        world = build_world(server.url, workspace.token, plan.waiting)
        workspace.db.engine.dispose()
        url = server.url

        def body(i: int) -> str:
            return f"MCP benchmark message {i}: please review the attached build notes."

        # The inbox first, while exactly `waiting` messages wait (the sends add to it).
        checks_mcp, checks_http = alternate(
            plan.rounds,
            lambda: over_mcp(
                url, world.reader_key, "check_inbox", lambda i: {"limit": 20}, plan, plan.checks
            ),
            lambda: over_http(
                url,
                world.reader_key,
                lambda i: ("GET", "/v1/inbox", {"params": {"limit": 20}}),
                plan,
                plan.checks,
            ),
        )
        log("  check_inbox / GET inbox: done")
        sends_mcp, sends_http = alternate(
            plan.rounds,
            lambda: over_mcp(
                url,
                world.sender_key,
                "send_message",
                lambda i: {"thread_id": world.thread_id, "body": body(i)},
                plan,
                plan.sends,
            ),
            lambda: over_http(
                url,
                world.sender_key,
                lambda i: (
                    "POST",
                    f"/v1/threads/{world.thread_id}/messages",
                    {"json": {"body": body(i)}},
                ),
                plan,
                plan.sends,
            ),
        )
        log("  send_message / POST messages: done")
        figures = [
            latency_figure(
                "mcp_send_message_p50", "send_message vs POST, p50", sends_mcp, sends_http
            ),
            latency_figure(
                "mcp_check_inbox_p50",
                f"check_inbox vs GET inbox, p50 ({plan.waiting:,} waiting)",
                checks_mcp,
                checks_http,
            ),
        ]
    result = {
        **run_info("mcp", backend, plan, load_before),
        "errors": 0,
        "seconds": round(time.perf_counter() - started, 1),
        "figures": figures,
    }
    write_result(result)
    return result


def _number(value: float | None, unit: str) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def render(result: dict[str, Any]) -> str:
    plan = result["plan"]
    lines = [
        title("MCP benchmark", result),
        f"  one client, one call at a time; {plan['rounds']} alternating round(s); "
        f"{plan['sends']} sends and {plan['checks']} inbox checks per round;",
        f"  {load_average(result)}",
        "",
        *figure_table(result["figures"], _number, widths=(44, 5, 10)),
        "",
        "  Baseline: the same operation over the HTTP API, same server, same agent. Ratio = MCP /",
        "  HTTP (lower is better): what JSON-RPC, the session, argument and output validation add.",
    ]
    for f in result["figures"]:
        lines.append(
            f"  {f['key']}: p99 MCP {f['mcp_p99_ms']:.2f} ms, HTTP {f['http_p99_ms']:.2f} ms"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return run_main(
        argv,
        prog="python -m bench.mcp",
        description=__doc__,
        quick_help="fewer calls and 300 waiting messages (a smoke run)",
        plans=(FULL, QUICK),
        run_backend=run_backend,
        render=render,
    )


if __name__ == "__main__":
    raise SystemExit(main())
