"""``inbots tokens``: the workspace's operator tokens."""

from __future__ import annotations

from typing import Annotated

import typer

from inbots.cli import views
from inbots.cli.options import Operator, operator_command
from inbots.cli.render import say

app = typer.Typer(
    help="Operator tokens: create another, list them, revoke one.", no_args_is_help=True
)


@app.command("create")
@operator_command()
def tokens_create(
    op: Operator,
    label: Annotated[
        str | None, typer.Option(help="What it is for (shown in lists), like 'ci' or 'alice'.")
    ] = None,
) -> None:
    """Mint another operator token and print it (shown this once)."""
    op.show(op.api.create_token(label), views.token_created)


@app.command("list")
@operator_command()
def tokens_list(op: Operator) -> None:
    """Every operator token of the workspace, revoked ones included (never the token itself)."""
    op.show_list(op.api.tokens(), views.tokens_table)


@app.command("revoke")
@operator_command(answers=False)
def tokens_revoke(
    op: Operator,
    token_id: Annotated[
        str, typer.Argument(metavar="ID", help="The token's id (otk_…).", show_default=False)
    ],
) -> None:
    """Revoke an operator token at once; the dashboard sessions signed in with it end too.
    The workspace's last live token cannot be revoked: create another first."""
    op.api.revoke_token(token_id)
    say(f"Revoked operator token {token_id}.")
