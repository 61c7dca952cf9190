"""``inbots threads`` and ``inbots post``: read threads, open and close them, post into them."""

from __future__ import annotations

from functools import partial
from typing import Annotated, cast

import typer

from inbots.cli import views
from inbots.cli.options import AllPagesOpt, LimitOpt, Operator, ThreadArg, operator_command
from inbots.client import Kind

app = typer.Typer(help="Threads: read, close, dismiss close requests.", no_args_is_help=True)


@app.command("list")
@operator_command()
def threads_list(
    op: Operator,
    status: Annotated[
        str | None, typer.Option(help="open, close_requested or closed (default: any).")
    ] = None,
    limit: LimitOpt = None,
    all_pages: AllPagesOpt = False,
) -> None:
    """Every thread, most recent activity first."""
    fetch = partial(op.api.threads, status=status, limit=limit)
    op.show_pages(fetch, views.threads_table, every_page=all_pages)


@app.command("open")
@operator_command()
def threads_open(
    op: Operator,
    title: Annotated[str, typer.Argument(help="What the thread is about.", show_default=False)],
    participant: Annotated[
        list[str] | None,
        typer.Option(
            "--participant",
            "-p",
            help="A participant's username (repeat for more; '*' for every agent).",
        ),
    ] = None,
    goal: Annotated[str | None, typer.Option(help="What done looks like.")] = None,
    ref: Annotated[str | None, typer.Option(help="A task reference, such as a ticket id.")] = None,
) -> None:
    """Open a thread as the operator, with at least one agent."""
    op.show(op.api.open_thread(title, participant or [], goal, ref=ref), views.thread_opened)


@app.command("show")
@operator_command()
def threads_show(op: Operator, thread: ThreadArg) -> None:
    """A thread: participants, status and every message with each recipient's receipt."""
    op.show(op.api.thread(thread), views.thread_view)


@app.command("close")
@operator_command()
def threads_close(op: Operator, thread: ThreadArg) -> None:
    """Close a thread (confirming a close request, or outright)."""
    op.show(op.api.close_thread(thread), views.thread_status)


@app.command("dismiss")
@operator_command()
def threads_dismiss(op: Operator, thread: ThreadArg) -> None:
    """Dismiss a pending close request; the thread is open again."""
    op.show(op.api.dismiss_close_request(thread), views.thread_status)


@operator_command()
def post(
    op: Operator,
    thread: ThreadArg,
    body: Annotated[str, typer.Argument(help="The message.", show_default=False)],
    summary: Annotated[str | None, typer.Option(help="A one-line summary.")] = None,
    kind: Annotated[str | None, typer.Option(help="The message kind.")] = None,
    reply_to: Annotated[str | None, typer.Option(help="The message this answers.")] = None,
) -> None:
    """Post into a thread as the operator (joining it)."""
    kind_ = cast(Kind | None, kind)  # the server judges it (422 for an unknown kind)
    posted = op.api.send(thread, body, summary=summary, kind=kind_, reply_to=reply_to)
    op.show(posted, views.posted)
