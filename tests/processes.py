"""Real processes for tests: the installed ``inbots`` command and a running ``inbots serve``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parent.parent


def procfile() -> dict[str, str]:
    """The Procfile's command lines by process type."""
    lines = (ROOT / "Procfile").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if line.strip())


def venv_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this interpreter's bin directory first on PATH (``inbots``, ``uvicorn`` and
    ``celery`` as the Procfile names them)."""
    return {**env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"}


def inbots_executable() -> str:
    beside = Path(sys.executable).parent / "inbots"
    if beside.exists():
        return str(beside)
    found = shutil.which("inbots")
    assert found, "the inbots command is not installed"
    return found


def clean_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The test process's environment without any INBOTS_ setting (nor a terminal width), plus
    ``settings``. The working directory is ``tmp_path``, so no stray ``.env`` is read."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("INBOTS_") and k not in ("COLUMNS", "LINES")
    }
    env["PYTHONUNBUFFERED"] = "1"
    env["HOME"] = str(tmp_path)
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    env.setdefault("INBOTS_DATABASE_URL", f"sqlite:///{tmp_path / 'never-used.db'}")
    env.update(settings)
    return env


# --- a real server --------------------------------------------------------------------------


@dataclass
class Served:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    output: str = ""  # everything it printed, once it has stopped


@contextmanager
def serve(tmp_path: Path, **settings: str) -> Iterator[Served]:
    """A real ``inbots serve`` on a free port (its own SQLite file unless ``settings`` name a
    database), stopped with Ctrl-C at the end. Its output goes to a file, not a pipe, so a
    chatty server never blocks on a full pipe."""
    port = free_port()
    wanted = {
        "INBOTS_DATABASE_URL": f"sqlite:///{tmp_path / 'inbots.db'}",
        "INBOTS_PORT": str(port),
        **settings,
    }
    log = tmp_path / f"serve-{port}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [inbots_executable(), "serve"],
            env=clean_env(tmp_path, **wanted),
            cwd=tmp_path,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    served = Served(f"http://127.0.0.1:{wanted['INBOTS_PORT']}", process, log)
    try:
        deadline = time.monotonic() + 60  # a loaded machine (parallel tests) starts it slowly
        while True:
            if process.poll() is not None:
                pytest.fail(f"inbots serve exited with {process.returncode}:\n{_text(log)}")
            try:
                if httpx.get(served.url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"inbots serve did not answer /healthz within 60 s:\n{_text(log)}")
            time.sleep(0.1)
        yield served
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        served.output = _text(log)


def _text(path: Path) -> str:
    return path.read_text(errors="replace")


# --- a real inbots web ----------------------------------------------------------------------


@dataclass
class Web:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return _text(self.log)


def start_web(tmp_path: Path, port: int, *options: str, **settings: str) -> Web:
    """A real ``inbots web --host 127.0.0.1 --port PORT OPTIONS`` with ``settings``, in a
    session of its own (so :func:`stop_web_group` reaches every process it started, orphans
    too), its output in a file. Returns at once: see :func:`wait_for_healthz`."""
    log = tmp_path / f"web-{port}-{time.monotonic_ns()}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [inbots_executable(), "web", "--host", "127.0.0.1", "--port", str(port), *options],
            env=clean_env(tmp_path, **settings),
            cwd=tmp_path,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Web(f"http://127.0.0.1:{port}", process, log)


def wait_for_healthz(web: Web, timeout: float = 60) -> None:
    """Until ``web`` answers ``/healthz``; fail with its output if it exits or takes too long."""
    deadline = time.monotonic() + timeout
    while True:
        if web.process.poll() is not None:
            pytest.fail(f"inbots web exited with {web.process.returncode}:\n{web.output()}")
        try:
            if httpx.get(web.url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"inbots web did not answer /healthz within {timeout} s:\n{web.output()}")
        time.sleep(0.1)


def stop_web_group(web: Web) -> None:
    """SIGKILL whatever is left of ``web``'s session (its workers included) and reap it."""
    with suppress(ProcessLookupError):
        os.killpg(web.process.pid, signal.SIGKILL)
    web.process.wait()


def child_pids(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` now (from /proc; Linux)."""
    children = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[1]) == pid:
            children.add(int(stat.parent.name))
    return children


def running(pid: int) -> bool:
    """``pid`` is a process that has not ended (a zombie waiting to be reaped has)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
