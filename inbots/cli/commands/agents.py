"""``inbots agents``: list, register, show and archive the workspace's agents."""

from __future__ import annotations

from typing import Annotated

import typer

from inbots.cli import views
from inbots.cli.client import path
from inbots.cli.options import AgentArg, Operator, operator_command

app = typer.Typer(help="Agents of the workspace.", no_args_is_help=True)


@app.command("list")
@operator_command()
def agents_list(op: Operator) -> None:
    """Every agent of the workspace, archived ones included."""
    op.show_list(op.api.get("/agents"), views.agents_table)


@app.command("register")
@operator_command()
def agents_register(
    op: Operator,
    name: Annotated[str, typer.Argument(help="The agent's name.", show_default=False)],
    description: Annotated[str | None, typer.Option(help="What the agent does.")] = None,
    webhook_url: Annotated[str | None, typer.Option(help="Where to notify it.")] = None,
) -> None:
    """Register an agent and print its API key (and webhook signing secret) — shown this once."""
    body = {"name": name, "description": description, "webhook_url": webhook_url}
    op.show(op.api.post("/agents", body), views.registered)


@app.command("show")
@operator_command()
def agents_show(op: Operator, agent: AgentArg) -> None:
    """One agent."""
    op.show(op.api.get(path("agents", agent)), views.agent_fields)


@app.command("archive")
@operator_command()
def agents_archive(op: Operator, agent: AgentArg) -> None:
    """Archive an agent: its key stops working at once; its history stays. Idempotent."""
    op.show(op.api.post(path("agents", agent, "archive")), views.archived)
