"""The load generator: N client threads, each with its own httpx client (one keep-alive
connection), a short warm-up, then a fixed number of timed requests released together. Also
the runs' percentiles and summaries, and alternating two measurements round by round."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

A = TypeVar("A")
B = TypeVar("B")

# (client index, sequence number) -> (method, path, httpx keyword arguments)
RequestMaker = Callable[[int, int], tuple[str, str, dict[str, Any]]]


@dataclass
class RunResult:
    clients: int
    requests: int  # timed requests answered with the expected status
    seconds: float  # wall time from the release of all clients to the last answer
    latencies_ms: list[float]
    steady_requests: int  # answered before the first client finished its share
    steady_seconds: float  # from the release to the first client finishing
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)

    @property
    def per_second(self) -> float:
        """Answers per second while every client was busy (the draining tail, when fewer than
        ``clients`` requests are in flight, is left out)."""
        if self.steady_seconds <= 0:
            return 0.0
        return self.steady_requests / self.steady_seconds

    @property
    def wall_per_second(self) -> float:
        """Answers per second over the whole run, draining tail included."""
        return self.requests / self.seconds if self.seconds > 0 else 0.0


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def run_summary(
    run: RunResult, percentiles: Sequence[int] = (50, 99), *, throughput: bool = True
) -> dict[str, Any]:
    """A run for the results file: counts, time, the latency ``percentiles`` (ms) and errors;
    with ``throughput``, also the clients and the rates (steady and whole-run)."""
    summary: dict[str, Any] = {"clients": run.clients} if throughput else {}
    summary["requests"] = run.requests
    summary["seconds"] = round(run.seconds, 4)
    if throughput:
        summary["per_second"] = round(run.per_second, 2)
        summary["steady_requests"] = run.steady_requests
        summary["steady_seconds"] = round(run.steady_seconds, 4)
        summary["wall_per_second"] = round(run.wall_per_second, 2)
    for p in percentiles:
        summary[f"p{p}_ms"] = round(percentile(run.latencies_ms, p), 3)
    summary["errors"] = run.errors
    summary["error_samples"] = run.error_samples
    return summary


def alternate(
    rounds: int, first: Callable[[], A], second: Callable[[], B]
) -> tuple[list[A], list[B]]:
    """Run both ``rounds`` times, alternating which goes first (``first`` in rounds 1, 3, ...),
    so drift in machine load hits both alike."""
    ones: list[A] = []
    twos: list[B] = []
    for r in range(rounds):
        if r % 2 == 0:
            ones.append(first())
            twos.append(second())
        else:
            twos.append(second())
            ones.append(first())
    return ones, twos


def run_load(
    base_url: str,
    make_request: RequestMaker,
    *,
    clients: int,
    per_client: int,
    warmup: int,
    expect: int,
    client: httpx.Client | None = None,
) -> RunResult:
    """``client``: an existing client for the one worker to use instead of making its own (for
    state such as a session cookie); only with ``clients=1``. It is left open, and its own
    ``base_url`` applies."""
    if client is not None and clients != 1:
        raise ValueError("a given client serves exactly one worker")
    barrier = threading.Barrier(clients + 1)
    lock = threading.Lock()
    latencies: list[float] = []
    completions: list[float] = []
    errors: list[str] = []
    ends: list[float] = []

    def worker(index: int) -> None:
        mine: list[float] = []
        done: list[float] = []
        bad: list[str] = []
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        with (
            nullcontext(client)
            if client is not None
            else httpx.Client(base_url=base_url, timeout=120, limits=limits)
        ) as http:

            def one(seq: int) -> None:
                method, path, kwargs = make_request(index, seq)
                started = time.perf_counter()
                try:
                    response = http.request(method, path, **kwargs)
                except httpx.HTTPError as exc:
                    bad.append(f"{method} {path}: {type(exc).__name__}: {exc}")
                    return
                finished = time.perf_counter()
                if response.status_code != expect:
                    bad.append(f"{method} {path}: {response.status_code} {response.text[:300]}")
                    return
                mine.append((finished - started) * 1000)
                done.append(finished)

            try:
                for seq in range(warmup):
                    one(-1 - seq)
                mine.clear()
                done.clear()
                bad.clear()  # warm-up answers are not counted
            finally:
                barrier.wait()
            for seq in range(per_client):
                one(seq)
            end = time.perf_counter()
        with lock:
            latencies.extend(mine)
            completions.extend(done)
            errors.extend(bad)
            ends.append(end)

    threads = [
        threading.Thread(target=worker, args=(i,), name=f"bench-client-{i}", daemon=True)
        for i in range(clients)
    ]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    seconds = (max(ends) if ends else time.perf_counter()) - started
    first_end = min(ends) if ends else started
    return RunResult(
        clients=clients,
        requests=len(latencies),
        seconds=seconds,
        latencies_ms=latencies,
        steady_requests=sum(1 for t in completions if t <= first_end),
        steady_seconds=first_end - started,
        errors=len(errors),
        error_samples=errors[:5],
    )
