"""``inbots enroll``: enrolment tokens, with which agents register themselves (``POST
/v1/register``, ``inbots mcp --enroll``)."""

from __future__ import annotations

import enum
import re
from typing import Annotated

import typer

from inbots.cli import views
from inbots.cli.client import EXIT_USAGE, CliError
from inbots.cli.options import Operator, operator_command
from inbots.cli.render import say

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class Action(enum.StrEnum):
    CREATE = "create"
    LIST = "list"
    REVOKE = "revoke"


def seconds_of(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``24h`` or ``7d`` in seconds."""
    match = _DURATION.fullmatch(text.strip().lower())
    if not match:
        raise CliError(
            f"--expires-in: a duration like 3600, 15m, 24h or 7d (got {text!r}).", EXIT_USAGE
        )
    return float(match[1]) * _UNIT[match[2]]


def enroll(
    op: Operator,
    action: Annotated[
        Action,
        typer.Argument(
            case_sensitive=False,
            help="create (the default), list, or revoke ID.",
        ),
    ] = Action.CREATE,
    enrollment_id: Annotated[
        str | None,
        typer.Argument(
            metavar="[ID]", help="For revoke: the token's id (enl_…).", show_default=False
        ),
    ] = None,
    uses: Annotated[
        int | None,
        typer.Option(min=1, help="How many agents may register with it (server default: 1)."),
    ] = None,
    expires_in: Annotated[
        str | None,
        typer.Option(
            "--expires-in",
            help="How long it lasts: seconds, or 15m, 24h, 7d (server default: 24h).",
            show_default=False,
        ),
    ] = None,
    label: Annotated[
        str | None, typer.Option(help="What it is for (shown in lists), like 'build farm'.")
    ] = None,
) -> None:
    """Create an enrolment token (shown once), list them, or revoke one. An agent registers
    itself with the token: POST /v1/register, or inbots mcp --enroll enr_… --name NAME."""
    if action is Action.LIST:
        op.show_list(op.api.enrollments(), views.enrollments_table)
        return
    if action is Action.REVOKE:
        if not enrollment_id:
            raise CliError("inbots enroll revoke needs the token's id (enl_…).", EXIT_USAGE)
        op.api.revoke_enrollment(enrollment_id)
        say(f"Revoked enrolment token {enrollment_id}.")
        return
    if enrollment_id:
        raise CliError(
            f"Unexpected {enrollment_id!r}: inbots enroll [create] takes options only.",
            EXIT_USAGE,
        )
    seconds = None if expires_in is None else seconds_of(expires_in)
    op.show(op.api.create_enrollment(uses, seconds, label), views.enrollment_created)


enroll_command = operator_command()(enroll)
