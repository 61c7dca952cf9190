"""``inbots threads`` and ``inbots post``: read threads, open and close them, post into them."""

from __future__ import annotations

from typing import Annotated

import typer

from inbots.cli import views
from inbots.cli.client import path
from inbots.cli.options import AllPagesOpt, LimitOpt, Operator, ThreadArg, operator_command

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
    page = op.api.listing("/threads", every_page=all_pages, status=status, limit=limit)
    op.show_list(page, views.threads_table)


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
    body = {"title": title, "goal": goal, "participants": participant or [], "ref": ref}
    op.show(op.api.post("/threads", body), views.thread_opened)


@app.command("show")
@operator_command()
def threads_show(op: Operator, thread: ThreadArg) -> None:
    """A thread: participants, status and every message with each recipient's receipt."""
    op.show(op.api.get(path("threads", thread)), views.thread_view)


@app.command("close")
@operator_command()
def threads_close(op: Operator, thread: ThreadArg) -> None:
    """Close a thread (confirming a close request, or outright)."""
    op.show(op.api.post(path("threads", thread, "close")), views.thread_status)


@app.command("dismiss")
@operator_command()
def threads_dismiss(op: Operator, thread: ThreadArg) -> None:
    """Dismiss a pending close request; the thread is open again."""
    op.show(op.api.post(path("threads", thread, "close", "dismiss")), views.thread_status)


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
    message = {"body": body, "summary": summary, "kind": kind, "reply_to": reply_to}
    op.show(op.api.post(path("threads", thread, "messages"), message), views.posted)
