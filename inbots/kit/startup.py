"""A process's garbage collector rests while it starts.

What a process builds as it starts (a server's app, a worker's tasks: models, routes and tables)
lives as long as the process, and collecting garbage meanwhile walks it again and again: a fifth
of a server's start-up. So the collector rests until the process has started (``inbots serve``
and ``inbots web`` say when, a Celery worker or beat when it is ready; any process still running
after :data:`START_UP_SECONDS` collects again then), and a short command ends before it would
have collected anything useful.

And httpx's own command line (``httpx._main``, which ``import httpx`` loads for its ``main``,
with click, pygments and rich's progress bars: about 0.07 s of CPU) is never loaded by Inbots'
processes: :func:`without_httpx_cli`.
"""

from __future__ import annotations

import gc
import sys
import threading

# How long a command may take to start before it collects garbage again.
START_UP_SECONDS = 5.0


def starting() -> None:
    """Hold the collector until :func:`started` (or :data:`START_UP_SECONDS` from now)."""
    gc.disable()
    resume = threading.Timer(START_UP_SECONDS, started)
    resume.daemon = True
    resume.start()


def started() -> None:
    """Collect garbage again from here on, never walking what start-up made (it lives as long
    as the process). Idempotent."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def without_httpx_cli() -> None:
    """Let ``import httpx`` skip its command line in this process (``httpx.main`` then only says
    it cannot run). Call before anything imports httpx; Inbots' entry points do."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
