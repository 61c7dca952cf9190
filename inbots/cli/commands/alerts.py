"""``inbots alerts``: the operator's alert webhook (URL, alert types, signing secret)."""

from __future__ import annotations

from typing import Annotated

import typer

from inbots.cli import views
from inbots.cli.options import Operator, operator_command
from inbots.cli.render import say
from inbots.webhooks.subscriptions import ALERT_TYPES

app = typer.Typer(
    help="The operator's alert webhook: stalled and failed deliveries, failing agent webhooks, "
    "messages held for approval, a backlog and workers down (see docs/operations.md, Alerts).",
    no_args_is_help=True,
)


@app.command("set")
@operator_command()
def alerts_set(
    op: Operator,
    webhook_url: Annotated[
        str, typer.Argument(metavar="URL", help="Where Inbots POSTs signed alerts.")
    ],
    events: Annotated[
        str | None,
        typer.Option(
            help=f"Comma-separated alert types it receives: {', '.join(ALERT_TYPES)} ('' for "
            "none; omitted: unchanged, and all of them for a new webhook)."
        ),
    ] = None,
) -> None:
    """Set or change the alert webhook URL and, with --events, the alert types it receives. The
    first time, a signing secret is minted and printed: store it, it is not shown again."""
    chosen = None if events is None else [t.strip() for t in events.split(",") if t.strip()]
    op.show(op.api.set_alert_webhook(webhook_url, events=chosen), views.alert_webhook_fields)


@app.command("show")
@operator_command()
def alerts_show(op: Operator) -> None:
    """The alert webhook's URL and alert types (the secret is never shown again: rotate it)."""
    op.show(op.api.alert_webhook(), views.alert_webhook_fields)


@app.command("rotate")
@operator_command()
def alerts_rotate(op: Operator) -> None:
    """Mint a new signing secret and print it; the previous one keeps signing for 24 hours."""
    op.show(op.api.rotate_alert_webhook(), views.rotated)


@app.command("off")
@operator_command(answers=False)
def alerts_off(op: Operator) -> None:
    """Remove the alert webhook and discard its signing secret for good."""
    op.api.remove_alert_webhook()
    say("Alerts are off: the alert webhook is removed.")
