"""``inbots watch``: a live view of deliveries moving, stalled and failed highlighted."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from inbots.cli import views
from inbots.cli.client import EXIT_UNREACHABLE, failure
from inbots.cli.options import Operator, as_json, operator_command
from inbots.cli.render import on_terminal, out, print_human
from inbots.client import InbotsError, TransportError

if TYPE_CHECKING:
    from inbots.client import Client  # loaded with the models when a command runs


# No request spinner: the view has its own, and two live displays would fight.
@operator_command(answers=False, spinner=False)
def watch(
    op: Operator,
    interval: Annotated[float, typer.Option(min=0.1, help="Seconds between refreshes.")] = 2.0,
    state: Annotated[str | None, typer.Option(help="Only deliveries in this state.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="How many recent deliveries.")] = 20,
    recipient: Annotated[
        str | None,
        typer.Option(
            "--for",
            help="Only deliveries to this recipient (a username or agent id; operator for the "
            "operator's own mail).",
        ),
    ] = None,
    once: Annotated[bool, typer.Option(help="Render one frame and exit.")] = False,
) -> None:
    """A live view of recent deliveries and the counters; stalled rows yellow, failed red.
    Ctrl-C stops it. When stdout is not a terminal, one frame after another (like top -b)."""
    view = View(state, recipient, limit)
    if once:
        print_human(frame(op.api, view))
        return
    with suppress(KeyboardInterrupt), ctrl_c() as stopped:  # Ctrl-C is the normal way out
        if on_terminal():
            watch_live(op.api, interval, view, stopped)
        else:
            watch_frames(op.api, interval, view, stopped)


@contextmanager
def ctrl_c() -> Iterator[threading.Event]:
    """Ctrl-C raises KeyboardInterrupt as usual and also sets the event the loops check: an
    interrupt that lands in code which swallows exceptions (a finaliser, a garbage-collector
    callback) still ends the watch at the next refresh."""
    stopped = threading.Event()

    def on_sigint(_signum: int, _frame: object) -> None:
        stopped.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield stopped
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclass(frozen=True)
class View:
    """Which deliveries a watch shows."""

    state: str | None
    recipient: str | None
    limit: int


def watch_live(api: Client, interval: float, view: View, stopped: threading.Event) -> None:
    header = Spinner("dots", text=Text(f"watching {api.url} (every {interval:g} s; Ctrl-C stops)"))
    with Live(console=out, refresh_per_second=8) as live:
        while not stopped.is_set():
            live.update(Group(header, frame_or_outage(api, view)))
            time.sleep(interval)


def watch_frames(api: Client, interval: float, view: View, stopped: threading.Event) -> None:
    while not stopped.is_set():
        print_human(frame_or_outage(api, view))
        sys.stdout.flush()
        time.sleep(interval)


def frame_or_outage(api: Client, view: View) -> RenderableType:
    try:
        return frame(api, view)
    except (InbotsError, TransportError) as exc:
        error = failure(exc, api.url)
        if error.exit_code != EXIT_UNREACHABLE:
            raise error from None
        # A server restart should not end the watch: say so and keep trying.
        return Text(f"{error.format_message()} — retrying", style="red")


def frame(api: Client, view: View) -> Group:
    page = api.deliveries(state=view.state, agent=view.recipient, limit=view.limit)
    return views.watch_frame(as_json(page), as_json(api.stats()), view.state, view.recipient)
