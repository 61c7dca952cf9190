"""``inbots deliveries``: receipts, their attempt logs, and redelivery."""

from __future__ import annotations

from functools import partial
from typing import Annotated

import typer

from inbots.cli import views
from inbots.cli.options import AllPagesOpt, DeliveryArg, LimitOpt, Operator, operator_command

app = typer.Typer(help="Delivery receipts and their attempt logs.", no_args_is_help=True)


@app.command("list")
@operator_command()
def deliveries_list(
    op: Operator,
    state: Annotated[
        str | None, typer.Option(help="A derived state: stalled, failed, notified, …")
    ] = None,
    agent: Annotated[str | None, typer.Option(help="Recipient id or username.")] = None,
    thread: Annotated[str | None, typer.Option(help="Thread id.")] = None,
    limit: LimitOpt = None,
    all_pages: AllPagesOpt = False,
) -> None:
    """Delivery receipts, newest first."""
    fetch = partial(op.api.deliveries, state=state, agent=agent, thread=thread, limit=limit)
    op.show_pages(fetch, views.deliveries_table, every_page=all_pages)


@app.command("show")
@operator_command()
def deliveries_show(op: Operator, delivery: DeliveryArg) -> None:
    """One receipt with its attempt log."""
    op.show(op.api.delivery(delivery), views.delivery_view)


@app.command("redeliver")
@operator_command()
def deliveries_redeliver(op: Operator, delivery: DeliveryArg) -> None:
    """Publish the notification again (a failed one too); adds stamps, clears none."""
    op.show(op.api.redeliver(delivery), views.redelivered)
