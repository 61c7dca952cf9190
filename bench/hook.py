"""The harness hook's cold start: ``inbots mail hook`` beside ``python -c "import httpx"``.

    .venv/bin/python -m bench.hook [--runs N]

A throwaway SQLite database and the real API (uvicorn, one process); an agent with three
messages waiting, so the hook makes its one request and prints its block. Then the two commands
run in turn, A B A B …, N times each after one warm-up of each (the hook reads an empty event
on stdin, as a harness without one gives it): the wall time of each whole process, its median,
and the ratio of the medians. coordination.md §3 asks the hook to stay within 2× the yardstick,
plus 50 ms for its one request: the last line says whether it did. Timings are the machine's:
quote the ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench.common import checked_request, fresh_workspace
from bench.servers import ServerProcess

ALLOWANCE = 0.050  # seconds: the hook's one request


def timed(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, input="", capture_output=True, text=True, check=True)
    return time.perf_counter() - started, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    inbots = shutil.which("inbots", path=str(Path(sys.executable).parent)) or "inbots"
    with (
        fresh_workspace("sqlite", "") as workspace,
        ServerProcess(
            "inbots", "inbots.app:create_app", {"INBOTS_DATABASE_URL": workspace.url}
        ) as server,
        httpx.Client(
            base_url=f"{server.url}/v1",
            headers={"Authorization": f"Bearer {workspace.token}"},
        ) as operator,
    ):
        keys = {
            name: checked_request(operator, "POST", "/agents", 201, json={"name": name})["api_key"]
            for name in ("lead", "reader")
        }
        lead = {"Authorization": f"Bearer {keys['lead']}"}
        for n in range(3):
            body = {"to": ["reader"], "body": f"Task {n}: look at the flaky test", "kind": "task"}
            checked_request(operator, "POST", "/messages", 201, json=body, headers=lead)
        env = {k: v for k, v in os.environ.items() if not k.startswith("INBOTS_")}
        env.update(INBOTS_URL=server.url, INBOTS_API_KEY=keys["reader"])
        hook = [inbots, "mail", "hook"]
        yardstick = [sys.executable, "-c", "import httpx"]
        _, block = timed(hook, env)
        if "3 messages" not in block:
            raise SystemExit(f"the hook did not print its block: {block!r}")
        timed(yardstick, env)
        pairs = [(timed(hook, env)[0], timed(yardstick, env)[0]) for _ in range(args.runs)]
    a = statistics.median(p[0] for p in pairs)
    b = statistics.median(p[1] for p in pairs)
    ratios = sorted(x / y for x, y in pairs)
    print(f"{'command':<34}{'median wall (ms)':>18}")
    print(f"{'inbots mail hook (3 waiting)':<34}{a * 1000:>18.0f}")
    yardstick_name = 'python -c "import httpx"'
    print(f"{yardstick_name:<34}{b * 1000:>18.0f}")
    print(f"ratio of medians {a / b:.2f}× (pairwise {ratios[0]:.2f}–{ratios[-1]:.2f}×)")
    bound = 2 * b + ALLOWANCE
    verdict = "within" if a <= bound else "OVER"
    print(f"bound 2 × yardstick + 50 ms = {bound * 1000:.0f} ms: {verdict}")
    sys.exit(0 if a <= bound else 1)


if __name__ == "__main__":
    main()
