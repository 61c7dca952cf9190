"""``inbots pending``, ``inbots approve`` and ``inbots reject``: the approval gate's queue — the
messages the workspace's approval policy (``PUT /v1/policy``) holds until the operator decides."""

from __future__ import annotations

from typing import Annotated

import typer

from inbots.cli import views
from inbots.cli.options import Operator, operator_command

MessageArg = Annotated[
    str,
    typer.Argument(help="The held message (msg_…, from inbots pending).", show_default=False),
]


@operator_command()
def pending(op: Operator) -> None:
    """The held messages waiting for your approval, oldest first."""
    op.show_list(op.api.approvals(), views.approvals_table)


@operator_command()
def approve(op: Operator, message: MessageArg) -> None:
    """Approve a held message: its recipients get it now, as if it had just been sent."""
    op.show(op.api.approve(message), views.decided)


@operator_command()
def reject(
    op: Operator,
    message: MessageArg,
    reason: Annotated[
        str | None, typer.Option(help="Why (the sender sees it in its receipts).")
    ] = None,
) -> None:
    """Reject a held message: it never reaches its recipients; its sender is told."""
    op.show(op.api.reject(message, reason), views.decided)
