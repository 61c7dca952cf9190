"""``inbots pending``, ``inbots approve`` and ``inbots reject``: the approval gate's queue — what
the workspace's approval policy holds until the operator decides (held messages, threads a held
sender opened, held briefs) — and ``inbots policy show|set``, the policy itself."""

from __future__ import annotations

from typing import Annotated

import typer

from inbots.cli import views
from inbots.cli.options import Operator, operator_command

HeldArg = Annotated[
    str,
    typer.Argument(
        metavar="ID",
        help="What waits: the id inbots pending shows (a message msg_…, a thread th_…, or an "
        "agent ag_… for its brief).",
        show_default=False,
    ),
]


@operator_command()
def pending(op: Operator) -> None:
    """What waits for your approval, oldest first: held messages (with their thread's title,
    their recipients and the start of their body), threads a held sender opened, held briefs."""
    op.show_list(op.api.approvals(), views.approvals_table)


@operator_command()
def approve(op: Operator, held: HeldArg) -> None:
    """Approve what waits: a message reaches its recipients now, as if it had just been sent; a
    thread or a brief is seen by the other agents."""
    op.show(op.api.approve(held), views.decided)


@operator_command()
def reject(
    op: Operator,
    held: HeldArg,
    reason: Annotated[
        str | None, typer.Option(help="Why (the sender sees it in its receipts).")
    ] = None,
) -> None:
    """Reject what waits: a message never reaches its recipients and its sender is told; a
    thread stays hidden; a brief is removed."""
    op.show(op.api.reject(held, reason), views.decided)


policy_app = typer.Typer(
    help="The approval policy: which messages, and whose writing, wait for your approval.",
    no_args_is_help=True,
)


def _listed(value: str | None) -> list[str] | None:
    """A comma-separated option: None when it was not given, [] for an empty value."""
    return None if value is None else [v.strip() for v in value.split(",") if v.strip()]


@policy_app.command("show")
@operator_command()
def policy_show(op: Operator) -> None:
    """The approval policy: the kinds, priorities and senders held."""
    op.show(op.api.policy(), views.policy_fields)


@policy_app.command("set")
@operator_command()
def policy_set(
    op: Operator,
    kinds: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated message kinds to hold: task, question, update, decision, "
            "handoff, ack ('' for none; omitted: unchanged)."
        ),
    ] = None,
    priorities: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated priorities to hold: normal, urgent ('' for none; omitted: "
            "unchanged)."
        ),
    ] = None,
    senders: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated usernames of agents whose every message, thread and brief is "
            "held ('' for none; omitted: unchanged)."
        ),
    ] = None,
) -> None:
    """Change the approval policy: each list given replaces that list; the others are kept."""
    chosen = [_listed(kinds), _listed(priorities), _listed(senders)]
    if all(v is None for v in chosen):
        raise typer.BadParameter(
            "give --kinds, --priorities or --senders (an empty value clears that list); "
            "inbots policy show prints the policy.",
            param_hint="--kinds/--priorities/--senders",
        )
    rules = op.api.policy().approval
    current = [rules.kinds, rules.priorities, rules.senders]
    new_kinds, new_priorities, new_senders = (
        now if given is None else given for given, now in zip(chosen, current, strict=True)
    )
    op.show(op.api.set_policy(new_kinds, new_priorities, new_senders), views.policy_fields)
