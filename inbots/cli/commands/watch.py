"""``inbots watch``: a live view of deliveries moving, stalled and failed highlighted."""

from __future__ import annotations

import sys
import time
from contextlib import suppress
from typing import Annotated

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from inbots.cli import views
from inbots.cli.client import EXIT_UNREACHABLE, Client, CliError
from inbots.cli.options import Operator, operator_command
from inbots.cli.render import on_terminal, out, print_human


# No request spinner: the view has its own, and two live displays would fight.
@operator_command(answers=False, spinner=False)
def watch(
    op: Operator,
    interval: Annotated[float, typer.Option(min=0.1, help="Seconds between refreshes.")] = 2.0,
    state: Annotated[str | None, typer.Option(help="Only deliveries in this state.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="How many recent deliveries.")] = 20,
    once: Annotated[bool, typer.Option(help="Render one frame and exit.")] = False,
) -> None:
    """A live view of recent deliveries and the counters; stalled rows yellow, failed red.
    Ctrl-C stops it. When stdout is not a terminal, one frame after another (like top -b)."""
    if once:
        print_human(frame(op.api, state, limit))
        return
    with suppress(KeyboardInterrupt):  # Ctrl-C is the normal way out
        if on_terminal():
            watch_live(op.api, interval, state, limit)
        else:
            watch_frames(op.api, interval, state, limit)


def watch_live(api: Client, interval: float, state: str | None, limit: int) -> None:
    header = Spinner("dots", text=Text(f"watching {api.url} (every {interval:g} s; Ctrl-C stops)"))
    with Live(console=out, refresh_per_second=8) as live:
        while True:
            live.update(Group(header, frame_or_outage(api, state, limit)))
            time.sleep(interval)


def watch_frames(api: Client, interval: float, state: str | None, limit: int) -> None:
    while True:
        print_human(frame_or_outage(api, state, limit))
        sys.stdout.flush()
        time.sleep(interval)


def frame_or_outage(api: Client, state: str | None, limit: int) -> RenderableType:
    try:
        return frame(api, state, limit)
    except CliError as exc:
        if exc.exit_code != EXIT_UNREACHABLE:
            raise
        # A server restart should not end the watch: say so and keep trying.
        return Text(f"{exc.format_message()} — retrying", style="red")


def frame(api: Client, state: str | None, limit: int) -> Group:
    page = api.get("/deliveries", state=state, limit=limit)
    return views.watch_frame(page, api.get("/stats"), state)
