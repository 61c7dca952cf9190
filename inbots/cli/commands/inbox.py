"""``inbots inbox``, ``inbots reply`` and ``inbots ack``: the operator's desk — the mail agents
sent the operator (replies in its threads, and mail sent ``to: ["operator"]``)."""

from __future__ import annotations

from typing import Annotated

import typer

from inbots.cli import views
from inbots.cli.client import EXIT_USAGE, TIMEOUT_SECONDS, CliError, path
from inbots.cli.options import AllPagesOpt, LimitOpt, Operator, operator_command


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
        page = op.api.request(
            "GET",
            "/inbox/wait",
            params={"timeout": f"{wait:g}"},
            timeout=wait + TIMEOUT_SECONDS,
        )
    else:
        page = op.api.listing(
            "/inbox",
            every_page=all_pages,
            status=status,
            priority="urgent" if urgent else None,
            include="body" if bodies else None,
            limit=limit,
        )
    op.show_list(page, views.inbox_table)


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
    original = op.api.get(path("messages", message))
    if ack is not None and original.get("delivery") is None:  # checked before anything is sent
        raise CliError(
            f"{original['message']['id']} was not sent to you, so there is nothing of yours to "
            "acknowledge: reply without --ack."
        )
    thread_id = original["message"]["thread_id"]
    answer = {"body": body, "kind": kind, "reply_to": original["message"]["id"]}
    posted = op.api.post(path("threads", thread_id, "messages"), answer)
    if ack is not None:
        op.api.post("/acks", {"ids": [original["message"]["id"]], "outcome": ack})
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
    body = {"ids": ids, "outcome": "declined" if declined else "done", "note": note}
    answer = op.api.post("/acks", body)
    op.show(answer, views.acked)
    if answer["not_found"]:  # shown with the rest; and a script sees it in the exit code
        raise CliError(f"not found: {', '.join(answer['not_found'])}")
    if answer.get("expired"):
        raise CliError(f"expired, no longer yours: {', '.join(answer['expired'])}")
