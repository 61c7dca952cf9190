"""``inbots web``'s processes: its workers end with it, even when it is killed (SIGKILL), a restart
takes the port back, and it leaves no metric files behind when it stops.

Real processes, kept few: one ``--workers 2`` killed and one ``--workers 1`` restarted in its
place, and one ``--workers 1`` per stopping signal."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from inbots.cli.client import CliError
from inbots.cli.main import listen_or_exit
from inbots.config import load_settings
from inbots.serving import die_with_parent, metrics_directory
from tests.conftest import free_port
from tests.processes import (
    child_pids,
    running,
    start_web,
    stop_web_group,
    wait_for_healthz,
)

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl: Linux"),
    pytest.mark.xdist_group("web_processes"),
]

_PR_GET_PDEATHSIG = 2


def _database(tmp_path: Path, sqlite_template: Path) -> str:
    path = tmp_path / "inbots.db"
    shutil.copy(sqlite_template, path)
    return f"sqlite:///{path}"


def _wait_for(probe: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_killed_web_takes_its_workers_along_and_a_restart_takes_the_port_back(
    tmp_path: Path, sqlite_template: Path
) -> None:
    """SIGKILL of ``inbots web --workers 2``: each of its processes ends within seconds (the
    workers by their parent-death signal), a new ``inbots web`` started at once on the same port
    serves, and it removes the temporary metrics directory the killed one left behind; stopped
    by SIGTERM, it removes its own."""
    temporary = tmp_path / "tmp"  # where inbots web makes its temporary metrics directory
    temporary.mkdir()
    settings = {
        "INBOTS_DATABASE_URL": _database(tmp_path, sqlite_template),
        "INBOTS_LOG_LEVEL": "WARNING",
        "TMPDIR": str(temporary),
    }
    port = free_port()
    first = start_web(tmp_path, port, "--workers", "2", **settings)
    second = None
    try:
        wait_for_healthz(first)
        children = child_pids(first.process.pid)  # the two workers and multiprocessing's tracker
        workers = [pid for pid in children if b"spawn_main" in _cmdline(pid)]
        assert len(workers) == 2, (children, first.output())
        assert [p.name for p in temporary.iterdir()] == [
            next(temporary.glob(f"inbots-metrics-{first.process.pid}-*")).name
        ]

        first.process.kill()
        first.process.wait()
        second = start_web(tmp_path, port, "--workers", "1", **settings)

        _wait_for(
            lambda: not any(running(pid) for pid in children),
            timeout=20,
            what=f"the killed inbots web's processes outlived it: "
            f"{[pid for pid in children if running(pid)]}",
        )
        wait_for_healthz(second)
        assert httpx.get(second.url + "/healthz", timeout=5).json() == {"status": "ok"}
        assert second.process.poll() is None, second.output()
        left = sorted(p.name for p in temporary.iterdir())
        assert len(left) == 1 and left[0].startswith(f"inbots-metrics-{second.process.pid}-"), left

        second.process.send_signal(signal.SIGTERM)
        assert second.process.wait(timeout=30) == -signal.SIGTERM, second.output()
        assert list(temporary.iterdir()) == [], "inbots web left its metrics directory"
        assert "Traceback" not in first.output() + second.output()
    finally:
        stop_web_group(first)
        if second is not None:
            stop_web_group(second)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_web_with_one_worker_leaves_no_metric_files(
    tmp_path: Path, sqlite_template: Path, stop: signal.Signals
) -> None:
    """``--workers 1`` serves in the process itself (no supervisor): stopped by either signal,
    it empties INBOTS_METRICS_DIR. (SIGTERM used to kill it before the clean-up: uvicorn raises
    the signal again once it has shut down.)"""
    metrics = tmp_path / "metrics"
    web = start_web(
        tmp_path,
        free_port(),
        "--workers",
        "1",
        INBOTS_DATABASE_URL=_database(tmp_path, sqlite_template),
        INBOTS_LOG_LEVEL="WARNING",
        INBOTS_METRICS_DIR=str(metrics),
    )
    try:
        wait_for_healthz(web)
        assert httpx.get(web.url + "/metrics", timeout=10).status_code == 200
        assert list(metrics.glob("*.db")), "inbots web did not keep its metrics there"
        web.process.send_signal(stop)
        code = web.process.wait(timeout=30)
        assert code in (0, -stop), (code, web.output())
        assert list(metrics.glob("*.db")) == [], "inbots web left its metric files"
        assert "Traceback" not in web.output(), web.output()
    finally:
        stop_web_group(web)


# In this process: no server -------------------------------------------------------------------


def test_no_parent_death_signal_in_a_process_not_spawned_by_multiprocessing() -> None:
    """``inbots serve`` and ``inbots web --workers 1`` serve in the process their shell or
    process manager started: dying with that parent would be wrong."""
    die_with_parent()
    libc = ctypes.CDLL(None, use_errno=True)
    asked = ctypes.c_int(-1)
    assert libc.prctl(_PR_GET_PDEATHSIG, ctypes.byref(asked), 0, 0, 0) == 0
    assert asked.value == 0


def test_the_port_is_waited_for_a_moment_then_refused_in_one_line() -> None:
    port = free_port()
    taken = _listening(port)
    threading.Timer(0.3, taken.close).start()
    started = time.monotonic()
    listen_or_exit("127.0.0.1", port, wait=10)  # let go meanwhile: no error
    assert time.monotonic() - started < 5

    taken = _listening(port)
    try:
        started = time.monotonic()
        with pytest.raises(CliError, match=r"^cannot listen on 127\.0\.0\.1:\d+ \(Address"):
            listen_or_exit("127.0.0.1", port, wait=0.3)
        assert 0.3 <= time.monotonic() - started < 3
    finally:
        taken.close()


def test_a_temporary_metrics_directory_left_by_a_killed_web_is_removed_by_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    never_a_pid = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
    abandoned = tmp_path / f"inbots-metrics-{never_a_pid}-abcd1234"
    abandoned.mkdir()
    (abandoned / "counter_7.db").write_bytes(b"")
    in_use = tmp_path / f"inbots-metrics-{os.getpid()}-abcd1234"
    in_use.mkdir()  # this very process: running
    unknown = tmp_path / "inbots-metrics-abcd1234"  # not a name inbots web makes
    unknown.mkdir()
    settings = load_settings(database_url=f"sqlite:///{tmp_path / 'unused.db'}")
    with metrics_directory(settings) as directory:
        assert not abandoned.exists()
        assert in_use.exists() and unknown.exists() and directory.exists()
    assert not directory.exists()


def _listening(port: int) -> socket.socket:
    taken = socket.socket()
    taken.bind(("127.0.0.1", port))
    taken.listen()
    return taken


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
