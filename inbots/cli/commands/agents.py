"""``inbots agents``: list, register, show and archive the workspace's agents; their keys,
sessions and briefs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from inbots.cli import views
from inbots.cli.options import AgentArg, Operator, operator_command
from inbots.cli.render import say

app = typer.Typer(help="Agents of the workspace.", no_args_is_help=True)


@app.command("list")
@operator_command()
def agents_list(op: Operator) -> None:
    """Every agent of the workspace, archived ones included."""
    op.show_list(op.api.agents(), views.agents_table)


@app.command("register")
@operator_command()
def agents_register(
    op: Operator,
    name: Annotated[str, typer.Argument(help="The agent's name.", show_default=False)],
    description: Annotated[str | None, typer.Option(help="What the agent does.")] = None,
    webhook_url: Annotated[str | None, typer.Option(help="Where to notify it.")] = None,
) -> None:
    """Register an agent and print its API key (and webhook signing secret) — shown this once."""
    op.show(op.api.register_agent(name, description, webhook_url), views.registered)


@app.command("show")
@operator_command()
def agents_show(op: Operator, agent: AgentArg) -> None:
    """One agent."""
    op.show(op.api.agent(agent), views.agent_fields)


@app.command("archive")
@operator_command()
def agents_archive(op: Operator, agent: AgentArg) -> None:
    """Archive an agent: its key stops working at once; its history stays. Idempotent."""
    op.show(op.api.archive_agent(agent), views.archived)


@app.command("brief")
@operator_command()
def agents_brief(
    op: Operator,
    agent: AgentArg,
    set_from: Annotated[
        str | None,
        typer.Option(
            "--set",
            help="Replace the brief with this Markdown file's text (- reads standard input; an "
            "empty file removes the brief).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """An agent's brief: what it does and how to work with it (Markdown). With --set, replace it."""
    if set_from is None:
        op.show(op.api.brief(agent), views.brief_view)
        return
    try:
        text = sys.stdin.read() if set_from == "-" else Path(set_from).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise typer.BadParameter(
            f"cannot read {set_from} ({exc.__class__.__name__}): give a UTF-8 text file, or - "
            "for standard input.",
            param_hint="--set",
        ) from None
    op.show(op.api.set_agent_brief(agent, text), views.brief_view)


KeyArg = Annotated[str, typer.Argument(metavar="KEY_ID", help="The key's id (key_…).")]


@app.command("keys")
@operator_command()
def agents_keys(op: Operator, agent: AgentArg) -> None:
    """An agent's keys (never the keys themselves: a hint of each)."""
    op.show_list(op.api.agent_keys(agent), views.keys_table)


@app.command("key-create")
@operator_command()
def agents_key_create(
    op: Operator,
    agent: AgentArg,
    label: Annotated[
        str | None, typer.Option(help="What the key is for (shown in lists), like 'laptop'.")
    ] = None,
) -> None:
    """Issue another key for an agent and print it (shown this once)."""
    op.show(op.api.issue_agent_key(agent, label), views.key_created)


@app.command("key-revoke")
@operator_command(answers=False)
def agents_key_revoke(op: Operator, agent: AgentArg, key_id: KeyArg) -> None:
    """Revoke one of an agent's keys at once. Its last key cannot be revoked: issue another
    first (key-create), or archive the agent."""
    op.api.revoke_agent_key(agent, key_id)
    say(f"Revoked key {key_id}.")


@app.command("sessions")
@operator_command()
def agents_sessions(op: Operator, agent: AgentArg) -> None:
    """An agent's sessions: its MCP sessions and X-Inbots-Session clients, latest first."""
    op.show_list(op.api.agent_sessions(agent), views.sessions_table)
