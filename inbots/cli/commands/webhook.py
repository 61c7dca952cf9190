"""``inbots webhook``: an agent's webhook URL and signing secret."""

from __future__ import annotations

from functools import partial
from typing import Annotated

import typer

from inbots.cli import views
from inbots.cli.options import AgentArg, Operator, operator_command
from inbots.cli.render import say

app = typer.Typer(help="An agent's webhook (URL and signing secret).", no_args_is_help=True)


@app.command("set")
@operator_command()
def webhook_set(
    op: Operator,
    agent: AgentArg,
    webhook_url: Annotated[str, typer.Argument(metavar="URL", help="The new webhook URL.")],
    events: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated notification types it receives: message.created, "
            "message.acknowledged, thread.close_requested, thread.closed ('' for none; "
            "omitted: unchanged)."
        ),
    ] = None,
) -> None:
    """Set or change an agent's webhook URL (a signing secret is minted the first time) and,
    with --events, the notification types it receives."""
    chosen = None if events is None else [t.strip() for t in events.split(",") if t.strip()]
    op.show(op.api.set_agent_webhook(agent, webhook_url, events=chosen), views.webhook_fields)


@app.command("show")
@operator_command()
def webhook_show(
    op: Operator,
    agent: AgentArg,
    reveal: Annotated[bool, typer.Option(help="Print the whole signing secret.")] = False,
) -> None:
    """An agent's webhook URL and signing secret (masked unless --reveal; tsv and json print
    it whole)."""
    op.show(op.api.agent_webhook(agent), partial(views.webhook_fields, reveal=reveal))


@app.command("remove")
@operator_command(answers=False)
def webhook_remove(op: Operator, agent: AgentArg) -> None:
    """Remove an agent's webhook and discard its signing secret for good."""
    op.api.remove_agent_webhook(agent)
    say(f"Removed the webhook of {agent}.")


@app.command("rotate")
@operator_command()
def webhook_rotate(op: Operator, agent: AgentArg) -> None:
    """Mint a new signing secret and print it; the previous one keeps signing for 24 hours."""
    op.show(op.api.rotate_agent_webhook(agent), views.rotated)
