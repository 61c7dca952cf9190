"""How uvicorn serves the app, for ``inbots serve`` (one process) and ``inbots web`` (several).

:func:`uvicorn_options` is the one place that builds uvicorn's options: an option every server
must have (a protocol class, a limit) is added there, once, and both commands get it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from inbots.config import Settings
from inbots.observability.logs import logging_config

# prometheus-client's multiprocess mode reads its directory from this variable, in each process.
MULTIPROC_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


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
        # envelope (inbots/api/protocol.py). By name: ``inbots web``'s worker processes import
        # it and read the limits from their own settings.
        "http": "inbots.api.protocol:InbotsHttpProtocol",
    }


@contextmanager
def metrics_directory(settings: Settings) -> Iterator[Path]:
    """The directory where the web processes add up their metrics (prometheus-client's
    multiprocess mode), exported as ``PROMETHEUS_MULTIPROC_DIR`` for the processes started
    inside the block.

    ``INBOTS_METRICS_DIR`` names it: created if missing, and emptied of metric files at start
    (counts of processes that are gone would otherwise be added in) and again at exit. Without
    it, a fresh temporary directory is made, and removed at exit."""
    if settings.metrics_dir:
        directory = Path(settings.metrics_dir)
        directory.mkdir(parents=True, exist_ok=True)
        _remove_metric_files(directory)
    else:
        directory = Path(tempfile.mkdtemp(prefix="inbots-metrics-"))
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
