"""How uvicorn serves the app, for ``inbots serve`` (one process) and ``inbots web`` (several).

:func:`uvicorn_options` is the one place that builds uvicorn's options: an option every server
must have (a protocol class, a limit) is added there, once, and both commands get it.

``inbots web``'s processes: :func:`web_app` is the app factory its worker processes call
(they end with the process that started them), :func:`metrics_directory` the directory they add
their metrics up in, and :func:`sigterm_unwinds` lets that directory be emptied when a SIGTERM
stops the one process of ``--workers 1``.
"""

from __future__ import annotations

import ctypes
import gc
import multiprocessing
import os
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from inbots.config import Settings
from inbots.observability.logs import logging_config

if TYPE_CHECKING:
    from fastapi import FastAPI

# prometheus-client's multiprocess mode reads its directory from this variable, in each process.
MULTIPROC_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"

# ``inbots web``'s app, by name: uvicorn's worker processes import it themselves.
WEB_APP = "inbots.serving:web_app"

# The temporary metrics directory without INBOTS_METRICS_DIR: inbots-metrics-<pid>-<random>,
# the pid of the ``inbots web`` that made it, so a later start can tell one left behind.
_TEMPORARY_PREFIX = "inbots-metrics-"
_TEMPORARY_NAME = re.compile(re.escape(_TEMPORARY_PREFIX) + r"(\d+)-[a-z0-9_]+")

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """The keyword arguments of ``uvicorn.run`` that do not depend on the command."""
    return {
        # Inbots' handler (JSON lines in production) from uvicorn's very first line, in the
        # supervisor and in every worker process.
        "log_config": logging_config(settings),
        "log_level": settings.log_level.lower(),
        "proxy_headers": True,
        # Whose X-Forwarded-Proto/For to believe: the TLS proxy's address when it runs on
        # another host (INBOTS_FORWARDED_ALLOW_IPS; docs/operations.md, "Behind a TLS proxy").
        "forwarded_allow_ips": settings.forwarded_allow_ips,
        # Caps the request head while it arrives and answers parser refusals in the error
        # envelope (inbots/web/protocol.py). By name: ``inbots web``'s worker processes import
        # it and read the limits from their own settings.
        "http": "inbots.web.protocol:InbotsHttpProtocol",
    }


@contextmanager
def metrics_directory(settings: Settings) -> Iterator[Path]:
    """The directory where the web processes add up their metrics (prometheus-client's
    multiprocess mode), exported as ``PROMETHEUS_MULTIPROC_DIR`` for the processes started
    inside the block.

    ``INBOTS_METRICS_DIR`` names it: created if missing, and emptied of metric files at start
    (counts of processes that are gone would otherwise be added in) and again at exit. Without
    it, a fresh temporary directory is made, and removed at exit; one that an ``inbots web``
    killed outright (SIGKILL) left behind is removed by the next start, once its maker is gone.
    """
    if settings.metrics_dir:
        directory = Path(settings.metrics_dir)
        directory.mkdir(parents=True, exist_ok=True)
        _remove_metric_files(directory)
    else:
        _remove_abandoned_directories(Path(tempfile.gettempdir()))
        directory = Path(tempfile.mkdtemp(prefix=f"{_TEMPORARY_PREFIX}{os.getpid()}-"))
    previous = os.environ.get(MULTIPROC_VARIABLE)
    os.environ[MULTIPROC_VARIABLE] = str(directory)
    try:
        yield directory
    finally:
        if previous is None:
            os.environ.pop(MULTIPROC_VARIABLE, None)
        else:
            os.environ[MULTIPROC_VARIABLE] = previous
        if settings.metrics_dir:
            _remove_metric_files(directory)
        else:
            shutil.rmtree(directory, ignore_errors=True)


def _remove_metric_files(directory: Path) -> None:
    # Only prometheus-client's own files (counter_123.db, …): the directory is the operator's.
    for path in directory.glob("*.db"):
        path.unlink(missing_ok=True)


def _remove_abandoned_directories(parent: Path) -> None:
    """Remove the temporary metrics directories (``inbots-metrics-<pid>-…``) of this user whose
    ``inbots web`` is no longer running: one killed with SIGKILL could not remove its own."""
    for path in parent.glob(f"{_TEMPORARY_PREFIX}*"):
        found = _TEMPORARY_NAME.fullmatch(path.name)
        if found is None:
            continue
        try:
            owned = path.lstat()
        except OSError:
            continue
        if owned.st_uid != os.getuid() or not path.is_dir() or path.is_symlink():
            continue
        if not _running(int(found.group(1))):
            shutil.rmtree(path, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process, or not a pid: leave it be
    return True


class _Terminated(BaseException):
    """SIGTERM, raised where the process is, so the ``finally`` clauses run (a BaseException:
    no ``except Exception`` takes it for an error)."""


def _raise_terminated(_signal: int, _frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the clean-up short
    raise _Terminated


@contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """A SIGTERM inside the block unwinds it (every ``finally`` runs: the metrics directory is
    emptied), then ends the process by SIGTERM, as it would have ended.

    ``inbots web --workers 1`` serves in its own process: uvicorn catches SIGTERM, shuts down
    gracefully, then raises the signal again once its own handler is gone. With the default
    handler in place, that killed the process on the spot, before the metrics directory was
    cleaned up. (With several workers, uvicorn's supervisor handles SIGTERM itself and returns.)
    """
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)
        raise  # not reached: the signal ends the process
    finally:
        if previous is not None:  # None: a handler not set from Python, nothing to put back
            signal.signal(signal.SIGTERM, previous)


def die_with_parent() -> None:
    """In a process that uvicorn's supervisor started (a worker of ``inbots web``), have Linux
    send it SIGTERM when the supervisor dies, even by SIGKILL (``prctl(PR_SET_PDEATHSIG)``), so
    no worker is left serving the port on its own. SIGTERM is uvicorn's graceful shutdown: the
    port is let go at once, the requests in flight finish.

    Nothing in a process that was not started by Python's multiprocessing (``inbots serve``,
    ``inbots web --workers 1``, which serve in the process a shell or a process manager
    started), nor off Linux."""
    parent = multiprocessing.parent_process()
    if parent is None or not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGTERM), 0, 0, 0) != 0:
        return  # refused (a sandbox): the worker runs as it did before
    if os.getppid() != parent.pid:
        # The supervisor was gone before the request above: no signal will come, so stop now,
        # gracefully, as that signal would have done.
        os.kill(os.getpid(), signal.SIGTERM)


def web_app() -> FastAPI:
    """``inbots web``'s app factory, called by uvicorn in each process that serves: the app of
    :func:`inbots.app.create_app`, in a process that ends with its supervisor."""
    die_with_parent()
    gc.disable()  # until the app is built: see inbots.cli.main.main
    try:
        from inbots.app import create_app

        return create_app()
    finally:
        gc.freeze()
        gc.enable()
