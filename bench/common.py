"""What the benchmark scripts (``bench.http_api``, ``bench.delivery``, ``bench.operator``) share:
their command line, a throwaway database with a workspace, the results file with its run
metadata, and the pieces of their printed reports."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx
from sqlalchemy import create_engine, text

from bench.servers import REPO_ROOT
from inbots.config import load_settings
from inbots.db.engine import Database
from inbots.db.migrate import upgrade
from inbots.db.uow import unit_of_work
from inbots.workspaces.service import create_workspace

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
SEEDED_TABLES = ("agents", "threads", "participants", "messages", "deliveries")
# The embedded server's renotify sweep (every 30 s) stamps unacknowledged deliveries older than
# INBOTS_STALL_SECONDS (default 15 min) as stalled, 500 a sweep. Seeded mail is hours old, so
# with the default it would rewrite thousands of rows while we measure and change every count.
# A threshold of 30 days keeps the seeded workspace as it was (the sweep still runs, finding none).
STALL_SECONDS = str(30 * 24 * 3600)

P = TypeVar("P")  # a script's plan


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the command line ----------------------------------------------------------------------


def run_main(
    argv: list[str] | None,
    *,
    prog: str,
    description: str | None,
    quick_help: str,
    plans: tuple[P, P],
    run_backend: Callable[[str, P, str], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
) -> int:
    """``--backend``, ``--quick`` and ``--postgres-url``: runs each backend in turn with the
    full plan or, with ``--quick``, the quick one (``plans``: full, quick). A failed backend is
    reported and the next still runs; then every result's report goes to stdout. Exit code 1 if
    a backend failed or a result counts errors."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("INBOTS_BENCH_POSTGRES_URL", DEFAULT_PG_ADMIN),
        help="an admin connection used to create and drop a throwaway database "
        "[INBOTS_BENCH_POSTGRES_URL]",
    )
    args = parser.parse_args(argv)
    plan = plans[1] if args.quick else plans[0]
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


@dataclass
class Workspace:
    url: str  # the database
    db: Database
    workspace_id: str
    token: str  # the workspace's operator token


@contextmanager
def fresh_workspace(backend: str, pg_admin_url: str) -> Iterator[Workspace]:
    """A fresh database (``fresh_database``), migrated, with one workspace named ``bench``; the
    engine is disposed of and the database removed afterwards."""
    with fresh_database(backend, pg_admin_url) as url:
        settings = load_settings(database_url=url)
        upgrade(settings)
        db = Database(settings)
        try:
            with unit_of_work(db) as uow:
                made = create_workspace(uow, "bench")
            assert made.minted_token
            yield Workspace(url, db, made.workspace_id, made.minted_token)
        finally:
            db.dispose()


def checked_request(client: httpx.Client, method: str, path: str, status: int, **kw: Any) -> Any:
    """The JSON answer, which must come with ``status``."""
    response = client.request(method, path, **kw)
    if response.status_code != status:
        raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:500]}")
    return response.json()


# --- the results file ----------------------------------------------------------------------


def git_revision() -> str:
    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    try:
        rev = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_info(
    benchmark: str, backend: str, plan: Any, load_before: tuple[float, float, float]
) -> dict[str, Any]:
    """The head of every results file: what ran, when, at which revision, on what machine
    (``load_before``: ``os.getloadavg()`` when the run began; the load now is taken here)."""
    return {
        "benchmark": benchmark,
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
    }


def write_result(result: dict[str, Any]) -> None:
    """``bench/results/<benchmark>-<backend>.json``."""
    RESULTS.mkdir(exist_ok=True)
    backend = result["backend"]
    path = RESULTS / f"{result['benchmark']}-{backend}.json"
    path.write_text(json.dumps(finite(result), indent=2) + "\n")
    log(f"[{backend}] done in {result['seconds']} s; wrote {path.relative_to(REPO_ROOT)}")


def finite(value: Any) -> Any:
    """NaN (a percentile of no answers) becomes null, so the file stays valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


# --- the printed report --------------------------------------------------------------------


def title(what: str, result: dict[str, Any]) -> str:
    """The report's first line."""
    return (
        f"Inbots {what}: {result['backend']}, {result['plan']['name']} run, "
        f"revision {result['revision']}"
    )


def load_average(result: dict[str, Any]) -> str:
    machine = result["machine"]
    return (
        f"load average {machine['loadavg_before'][0]:.2f} -> "
        f"{machine['loadavg_after'][0]:.2f} on {machine['cpus']} CPUs"
    )


def ratio_range(
    ratios: Sequence[float | None], fmt: str = ".2f", *, empty: str = "", single: bool = True
) -> str:
    """The 'per round' column: lowest-highest of the rounds' ratios; one round's ratio alone
    (or ``empty`` if not ``single``); ``empty`` without any."""
    rounds = [r for r in ratios if r is not None and math.isfinite(r)]
    if len(rounds) > 1:
        return f"{min(rounds):{fmt}}-{max(rounds):{fmt}}"
    if len(rounds) == 1 and single:
        return f"{rounds[0]:{fmt}}"
    return empty


def figure_table(
    figures: Sequence[dict[str, Any]],
    number: Callable[[float | None, str], str],
    *,
    widths: tuple[int, int, int] = (28, 6, 11),
    fmt: str = ".2f",
    empty: str = "n/a",
    single: bool = True,
) -> list[str]:
    """Header and one row per figure: label, unit, Inbots, baseline, Inbots/base, per round.
    ``widths``: of the label, the unit and each value column; ``number(value, unit)`` formats a
    value; ``fmt`` the ratios; ``empty`` and ``single`` as for ``ratio_range``."""
    label, unit, value = widths
    lines = [
        f"  {'figure':<{label}}{'unit':>{unit}}{'Inbots':>{value}}{'baseline':>{value}}"
        f"{'Inbots/base':>13}  per round"
    ]
    for f in figures:
        ratio = "n/a" if f["ratio"] is None else f"{f['ratio']:{fmt}}"
        spread = ratio_range(f["round_ratios"], fmt, empty=empty, single=single)
        lines.append(
            f"  {f['label']:<{label}}{f['unit']:>{unit}}{number(f['inbots'], f['unit']):>{value}}"
            f"{number(f['baseline'], f['unit']):>{value}}{ratio:>13}  {spread}"
        )
    return lines


def comparison(
    key: str,
    label: str,
    unit: str,
    *,
    inbots: float,
    baseline: float,
    round_ratios: Sequence[float | None],
    higher_is_better: bool,
) -> dict[str, Any]:
    """One figure beside its baseline, as ``figure_table`` prints it (ratio Inbots / baseline)."""
    return {
        "key": key,
        "label": label,
        "unit": unit,
        "higher_is_better": higher_is_better,
        "inbots": inbots,
        "baseline": baseline,
        "ratio": inbots / baseline if baseline else None,
        "round_ratios": list(round_ratios),
    }
