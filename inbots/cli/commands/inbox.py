"""``inbots inbox``, ``inbots reply`` and ``inbots ack``: the operator's desk — the mail agents
sent the operator (replies in its threads, and mail sent ``to: ["operator"]``)."""

from __future__ import annotations

from functools import partial
from typing import Annotated, cast

import typer

from inbots.cli import views
from inbots.cli.client import EXIT_USAGE, CliError
from inbots.cli.options import AllPagesOpt, LimitOpt, Operator, operator_command
from inbots.client import InboxStatus, Kind, Outcome


@operator_command()
def inbox(
    op: Operator,
    status: Annotated[
        str | None,
        typer.Option(help="unacked (default: still to act on), acked (re-read) or all."),
    ] = None,
    urgent: Annotated[bool, typer.Option("--urgent", help="Only urgent mail.")] = False,
    bodies: Annotated[
        bool, typer.Option("--bodies", help="Show each message's body (stamps it fetched).")
    ] = False,
    wait: Annotated[
        float | None,
        typer.Option(
            min=1,
            max=60,
            help="Long-poll: wait up to this many seconds for mail not shown before, then list "
            "only that (empty at the timeout).",
        ),
    ] = None,
    limit: LimitOpt = None,
    all_pages: AllPagesOpt = False,
) -> None:
    """The operator's own mail, urgent first, then oldest first."""
    if wait is not None:
        op.show_list(op.api.wait(wait), views.inbox_table)
        return
    fetch = partial(
        op.api.inbox,
        limit,
        status=cast(InboxStatus | None, status),  # the server judges it (422 for a bogus one)
        priority="urgent" if urgent else None,
        include="body" if bodies else None,
    )
    op.show_pages(fetch, views.inbox_table, every_page=all_pages)


@operator_command()
def reply(
    op: Operator,
    message: Annotated[
        str,
        typer.Argument(
            help="The message to answer (msg_… or dlv_…, from inbots inbox).", show_default=False
        ),
    ],
    body: Annotated[str, typer.Argument(help="Your answer.", show_default=False)],
    kind: Annotated[str | None, typer.Option(help="The message kind.")] = None,
    ack: Annotated[
        str | None,
        typer.Option(
            help="Also acknowledge the message answered: done or declined.",
        ),
    ] = None,
) -> None:
    """Answer a message in its thread (as a reply to it); with --ack, acknowledge it too."""
    if ack not in (None, "done", "declined"):
        raise CliError(f"--ack takes done or declined (got {ack!r}).", EXIT_USAGE)
    original = op.api.read(message)
    answered = original.message
    if ack is not None and original.delivery is None:  # checked before anything is sent
        raise CliError(
            f"{answered.id} was not sent to you, so there is nothing of yours to acknowledge: "
            "reply without --ack."
        )
    kind_ = cast(Kind | None, kind)  # the server judges it (422 for an unknown kind)
    posted = op.api.send(answered.thread_id, body, kind=kind_, reply_to=answered.id)
    if ack is not None:
        op.api.acknowledge([answered.id], cast(Outcome, ack))
    op.show(posted, views.posted)


@operator_command()
def ack(
    op: Operator,
    ids: Annotated[
        list[str],
        typer.Argument(help="Message or delivery ids (from inbots inbox).", show_default=False),
    ],
    declined: Annotated[
        bool, typer.Option("--declined", help="Acknowledge as declined, not done.")
    ] = False,
    note: Annotated[str | None, typer.Option(help="A short note for the sender.")] = None,
) -> None:
    """Acknowledge the operator's own mail: done (default) or declined, with a note."""
    answer = op.api.acknowledge(ids, "declined" if declined else "done", note)
    op.show(answer, views.acked)
    if answer.not_found:  # shown with the rest; and a script sees it in the exit code
        raise CliError(f"not found: {', '.join(answer.not_found)}")
    if answer.expired:
        raise CliError(f"expired, no longer yours: {', '.join(answer.expired)}")
