"""Servers under test: uvicorn in a subprocess (one worker process, loopback, a free port)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """``python -m uvicorn <factory> --factory`` on 127.0.0.1, log level warning.

    The environment is the caller's minus every ``INBOTS_*`` variable, plus ``env``; the working
    directory is the repository root (so ``bench`` is importable; it holds no ``.env``).
    """

    def __init__(self, name: str, factory: str, env: dict[str, str]) -> None:
        self.name = name
        self.factory = factory
        self.port = free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("INBOTS_")}
        self.env.update(env)
        self.proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed in stop())
            prefix=f"bench-{name}-", suffix=".log", delete=False
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 40) -> str:
        self._log.flush()
        text = Path(self._log.name).read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def start(self, timeout: float = 30.0) -> ServerProcess:
        cmd = [
            sys.executable,
            "-m",
            "uvicorn",
            self.factory,
            "--factory",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warning",
            "--no-access-log",
        ]
        self.proc = subprocess.Popen(
            cmd, cwd=REPO_ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2) as client:
            while True:
                if self.proc.poll() is not None:
                    tail = self.log_tail()
                    self.stop()
                    raise RuntimeError(
                        f"{self.name} server exited with {self.proc.returncode}:\n{tail}"
                    )
                try:
                    if client.get(self.url + "/healthz").status_code == 200:
                        return self
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    tail = self.log_tail()
                    self.stop()
                    raise RuntimeError(f"{self.name} server did not start:\n{tail}")
                time.sleep(0.05)

    def stop(self) -> None:
        if self._log.closed:
            return
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()
        Path(self._log.name).unlink(missing_ok=True)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
