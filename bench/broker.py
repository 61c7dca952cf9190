"""The delivery benchmark's private broker and worker: a throwaway ``redis-server`` and the real
Celery worker (``celery -A workers worker``), both subprocesses of the benchmark.

The shared Redis on 6379 is never touched: our own server listens on a free loopback port,
keeps nothing on disk and goes away with the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis

from bench.servers import REPO_ROOT, free_port


def _stop(proc: subprocess.Popen[bytes] | None, sig: int, timeout: float) -> None:
    """Signal our child, wait, then kill its process group (it was started in a new session,
    so the group is exactly the child and anything it forked)."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


class RedisServer:
    """``redis-server`` on 127.0.0.1 and a free port, no persistence, in a temporary directory."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._dir = tempfile.TemporaryDirectory(prefix="bench-redis-")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 15.0) -> RedisServer:
        binary = os.environ.get("INBOTS_BENCH_REDIS_SERVER") or shutil.which("redis-server")
        if not binary:
            raise RuntimeError("redis-server not found (set INBOTS_BENCH_REDIS_SERVER)")
        log = Path(self._dir.name) / "redis.log"
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self._dir.name,
                "--logfile",
                str(log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        client = self.client()
        deadline = time.monotonic() + timeout
        try:
            while True:
                if self.proc.poll() is not None:
                    text = log.read_text(errors="replace") if log.exists() else ""
                    raise RuntimeError(f"redis-server exited with {self.proc.returncode}:\n{text}")
                try:
                    if client.ping():
                        return self
                except redis.RedisError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.05)
        finally:
            client.close()

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=5, socket_connect_timeout=5)

    def stop(self) -> None:
        _stop(self.proc, signal.SIGTERM, 10)
        self._dir.cleanup()


# Every model module, as ``inbots.models.base.import_models`` lists them.
MODEL_MODULES = (
    "inbots.models.agents",
    "inbots.models.deliveries",
    "inbots.models.messages",
    "inbots.models.threads",
    "inbots.models.workspaces",
)

_CHECK_MODELS = """
import json, sys
import workers  # what `celery -A workers` loads
from inbots.models.base import Base
missing = []
for table in Base.metadata.tables.values():
    for fk in table.foreign_keys:
        try:
            fk.column
        except Exception:
            missing.append(f"{table.name}.{fk.parent.name} -> {fk.target_fullname}")
print(json.dumps(missing))
"""


def unresolved_foreign_keys(env: dict[str, str]) -> list[str]:
    """In a fresh interpreter that imports only what ``celery -A workers`` imports, the foreign
    keys whose target table no imported model defines. The ORM cannot flush any change while
    one is left (``NoReferencedTableError``), so a worker in that state notifies nobody."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("INBOTS_")}
    out = subprocess.run(
        [sys.executable, "-c", _CHECK_MODELS],
        cwd=REPO_ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    found: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


class CeleryWorker:
    """``celery -A workers worker --pool threads --concurrency 8 -Q
    notify,notify-retry,alerts,sweep`` from the repository root, with the environment given
    (``INBOTS_*`` from the caller's own environment removed first), plus ``--include`` when
    asked. Stopped with SIGTERM: Celery's warm shutdown."""

    def __init__(
        self, env: dict[str, str], concurrency: int, include: tuple[str, ...] = ()
    ) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("INBOTS_")}
        self.env.update(env)
        self.concurrency = concurrency
        self.include = include  # extra modules for the worker to import (``--include``)
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0  # time.time() when the process was started
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed in close())
            prefix="bench-worker-", suffix=".log", delete=False
        )

    def command(self) -> list[str]:
        celery = Path(sys.executable).parent / "celery"
        head = [str(celery)] if celery.exists() else [sys.executable, "-m", "celery"]
        return [*head, *self.args()]

    def args(self) -> list[str]:
        return [
            "-A",
            "workers",
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            str(self.concurrency),
            "-Q",
            "notify,notify-retry,alerts,sweep",
            "--loglevel",
            "WARNING",
            "--hostname",
            f"bench-{uuid.uuid4().hex[:8]}@%h",
            *(["--include", ",".join(self.include)] if self.include else []),
        ]

    def start(self) -> CeleryWorker:
        if self.running():
            return self
        self.started_at = time.time()
        self.proc = subprocess.Popen(
            self.command(),
            cwd=REPO_ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check(self) -> None:
        """Raise if the worker has exited."""
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"celery worker exited with {self.proc.returncode}")

    def log_tail(self, lines: int = 40) -> str:
        self._log.flush()
        text = Path(self._log.name).read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        _stop(self.proc, signal.SIGTERM, 30)
        self.proc = None

    def close(self) -> None:
        self.stop()
        if not self._log.closed:
            self._log.close()
            Path(self._log.name).unlink(missing_ok=True)
