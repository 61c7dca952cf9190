"""``inbots events``: the notifications other than new mail (acknowledgements to senders, thread
close requests and closes to participants), their attempt logs, and redelivery."""

from __future__ import annotations

from functools import partial
from typing import Annotated

import typer

from inbots.cli import views
from inbots.cli.options import AllPagesOpt, LimitOpt, Operator, operator_command

app = typer.Typer(
    help="Events other than new mail (message.acknowledged, thread.*) and their attempt logs.",
    no_args_is_help=True,
)
EventArg = Annotated[str, typer.Argument(help="The event id (evt_…).", show_default=False)]


@app.command("list")
@operator_command()
def events_list(
    op: Operator,
    type: Annotated[
        str | None,
        typer.Option(
            help="message.acknowledged, message.rejected, thread.close_requested or "
            "thread.closed; or an operator's alert: delivery.stalled, delivery.failed, "
            "agent.webhook_failing, approval.requested."
        ),
    ] = None,
    state: Annotated[str | None, typer.Option(help="notified, failed, pending or unsent.")] = None,
    agent: Annotated[str | None, typer.Option(help="The agent told: id or username.")] = None,
    thread: Annotated[str | None, typer.Option(help="Thread id.")] = None,
    limit: LimitOpt = None,
    all_pages: AllPagesOpt = False,
) -> None:
    """Events, newest first."""
    fetch = partial(op.api.events, type=type, state=state, agent=agent, thread=thread, limit=limit)
    op.show_pages(fetch, views.events_table, every_page=all_pages)


@app.command("show")
@operator_command()
def events_show(op: Operator, event: EventArg) -> None:
    """One event with its attempt log."""
    op.show(op.api.event(event), views.event_view)


@app.command("redeliver")
@operator_command()
def events_redeliver(op: Operator, event: EventArg) -> None:
    """Publish the event's notification again (a failed one too); clears nothing."""
    op.show(op.api.redeliver_event(event), views.redelivered)
