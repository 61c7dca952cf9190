"""``inbots mail …``: the agent CLI. Each command is its options, one or two calls of the agent's
:class:`inbots.client.Client` (:func:`~inbots.cli.mail.agent.agent`) and its lines
(:mod:`~inbots.cli.mail.lines`); ``--json`` prints the server's JSON instead, on one line."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any, get_args

import typer
from typer.core import TyperCommand, TyperGroup

from inbots.cli.client import EXIT_REFUSED, EXIT_USAGE, CliError
from inbots.cli.mail import lines
from inbots.cli.mail.agent import agent
from inbots.client import Kind, Outcome, Priority

if TYPE_CHECKING:
    from pydantic import BaseModel
    from typer._click import Context  # Typer's own click, which its groups are built on

# The group's whole help: what an agent reads once to work its mailbox (under 40 lines).
GUIDE = """\
Usage: inbots mail COMMAND [ARGS]...

Your Inbots mailbox, as the agent whose key is in INBOTS_API_KEY (agt_...), on the
server at INBOTS_URL (default http://127.0.0.1:8000).

The loop:
  inbots mail check              what waits: one line per message, urgent first
  inbots mail read ID            one message and its body (ID: its dlv_... or msg_...)
  inbots mail reply ID TEXT --ack done
                                 answer in its thread and say you are done with it
                                 (--ack declined: you will not do it)
  inbots mail ack ID... [--outcome declined] [--note TEXT]
                                 done with it, without a reply
  inbots mail wait [--timeout 30]
                                 block until new mail, or a receipt of yours, arrives
  inbots mail send --to NAME[,NAME] TEXT
                                 start a thread with them (--thread ID: post in one)
  inbots mail sent               your sent mail, each recipient's state and note

TEXT - reads standard input. send and reply take --kind (task, question, update,
decision, handoff, ack), --priority urgent and --summary (needed for long text).
check takes --bodies and --limit N. Every command takes --json: the server's JSON.

Exit codes: 0 ok; 1 the server refused (its sentence is on stderr); 2 bad usage or
INBOTS_API_KEY missing or refused; 3 the server could not be reached.

inbots mail hook prints what waits in a few lines, or nothing: for a harness hook.
Each command's options: inbots mail COMMAND --help.
"""


class MailGroup(TyperGroup):
    """The ``mail`` group, whose help is :data:`GUIDE` as written: plain lines an agent reads
    once, no boxes, no wrapping."""

    def get_help(self, ctx: Context) -> str:
        return GUIDE.rstrip("\n")

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        if not args:  # ``inbots mail`` alone: the guide, on stdout, where an agent reads
            sys.stdout.write(GUIDE)
            raise typer.Exit(0)
        return super().parse_args(ctx, args)


class MailCommand(TyperCommand):
    """A ``mail`` command, whose ``--help`` is plain lines (no boxes: fewer tokens to read)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rich_markup_mode = None


app = typer.Typer(
    cls=MailGroup,
    help="Your mailbox as an agent (INBOTS_API_KEY): check, read, reply, ack, send, wait.",
    add_completion=False,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the server's JSON answer.")]
IdArg = Annotated[
    str,
    typer.Argument(
        metavar="ID", help="A delivery id (dlv_…) or message id (msg_…).", show_default=False
    ),
]
TextArg = Annotated[
    str,
    typer.Argument(
        metavar="TEXT", help="The message text; - reads standard input.", show_default=False
    ),
]
KindOpt = Annotated[
    str | None, typer.Option(help="task, question, update (default), decision, handoff or ack.")
]
PriorityOpt = Annotated[str | None, typer.Option(help="normal (default) or urgent.")]
SummaryOpt = Annotated[
    str | None, typer.Option(help="One line saying what it is about (needed for long text).")
]
LimitOpt = Annotated[int | None, typer.Option("--limit", min=1, help="At most this many.")]


@app.command(cls=MailCommand)
def check(
    bodies: Annotated[
        bool, typer.Option("--bodies", help="Each message's body too (stamps it read).")
    ] = False,
    limit: LimitOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What waits for you, urgent first, then oldest first: one line per message."""
    with agent() as api:
        page = api.inbox(limit, include="body" if bodies else None)
    show(page, as_json, lines.inbox(page, bodies=bodies))


@app.command(cls=MailCommand)
def read(ident: IdArg, as_json: JsonOpt = False) -> None:
    """One message with its body (stamps your copy read)."""
    with agent() as api:
        result = api.read(ident)
    show(result, as_json, lines.reading(result))


@app.command(cls=MailCommand)
def send(
    text: TextArg,
    to: Annotated[
        str | None, typer.Option(help="Usernames, comma-separated: opens a thread with them.")
    ] = None,
    thread: Annotated[str | None, typer.Option(help="Post in this thread (th_…).")] = None,
    kind: KindOpt = None,
    priority: PriorityOpt = None,
    summary: SummaryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Send a message: to people (a new thread), or into a thread."""
    if (to is None) == (thread is None):
        raise CliError("send takes --to NAME[,NAME] (a new thread) or --thread ID.", EXIT_USAGE)
    body = content(text)
    with agent() as api:
        if to is not None:
            names = [name.strip() for name in to.split(",") if name.strip()]
            result = api.send(
                to=names, body=body, summary=summary, kind=kind_of(kind), priority=pri(priority)
            )
        else:
            assert thread is not None
            result = api.send(
                thread, body, summary=summary, kind=kind_of(kind), priority=pri(priority)
            )
    show(result, as_json, [lines.sent(result)])


@app.command(cls=MailCommand)
def reply(
    ident: IdArg,
    text: TextArg,
    ack: Annotated[
        str | None,
        typer.Option(help="Also acknowledge the message answered: done or declined."),
    ] = None,
    kind: KindOpt = None,
    priority: PriorityOpt = None,
    summary: SummaryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer a message in its thread; with --ack, say you are done with it (or declined)."""
    outcome = outcome_of(ack, "--ack")
    body = content(text)
    with agent() as api:
        original = api.read(ident)  # its thread, and your copy of it (stamped read)
        answered, copy = original.message, original.delivery
        if outcome is not None and copy is None:  # before anything is posted
            raise CliError(
                f"{answered.id} was not sent to you, so there is nothing of yours to "
                "acknowledge: reply without --ack.",
                EXIT_REFUSED,
            )
        # With --ack, one call: the reply and the acknowledgement commit together.
        extra = {} if outcome is None else {"acknowledge": outcome}
        result = api.send(
            answered.thread_id,
            body,
            summary=summary,
            kind=kind_of(kind),
            reply_to=answered.id,
            priority=pri(priority),
            **extra,
        )
    if as_json:
        dump(answer(result))  # with --ack: acknowledged {delivery_id, outcome}, as the server says
        return
    said = lines.sent(result)
    if result.acknowledged is not None:
        acked = result.acknowledged
        said += f" Acknowledged {acked.delivery_id} {acked.outcome or ''}".rstrip() + "."
    write([said])


@app.command(cls=MailCommand)
def ack(
    ids: Annotated[list[str], typer.Argument(help="Delivery or message ids.", show_default=False)],
    outcome: Annotated[str, typer.Option(help="done (default) or declined.")] = "done",
    note: Annotated[str | None, typer.Option(help="A short note for the sender.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Say you are done with messages (or declined them), with a note for the sender."""
    chosen = outcome_of(outcome, "--outcome")
    with agent() as api:
        result = api.acknowledge(ids, chosen, note)
    show(result, as_json, lines.acked(result))
    if result.not_found:  # the others are acknowledged; a script sees this in the exit code
        raise CliError(
            f"not found: {', '.join(result.not_found)} (no mail of yours has that id).",
            EXIT_REFUSED,
        )
    if result.expired:
        raise CliError(
            f"expired before you acknowledged it: {', '.join(result.expired)}.", EXIT_REFUSED
        )


@app.command(cls=MailCommand)
def wait(
    timeout: Annotated[
        float | None,
        typer.Option(min=1, max=60, help="Seconds to wait at most (the server's default: 30)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Block until mail you have not been shown arrives, or a receipt of mail you sent."""
    with agent() as api:
        page = api.wait(timeout, events="receipts")
    show(page, as_json, lines.new_mail(page))


@app.command(cls=MailCommand)
def sent(limit: LimitOpt = None, as_json: JsonOpt = False) -> None:
    """Mail you sent, newest first, with what became of it for each recipient."""
    with agent() as api:
        page = api.outbox(limit=limit)
    show(page, as_json, lines.outbox(page))


@app.command(cls=MailCommand)
def hook(
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Answer as hook JSON (hookSpecificOutput.additionalContext), as Gemini CLI "
            "wants it.",
        ),
    ] = False,
) -> None:
    """For a harness hook: reads the hook's JSON event on stdin, prints a few lines on what
    waits (count, urgent, the first three senders and summaries), or nothing at all. Never
    fails the harness: exit 0, silent, when the server is down."""
    from inbots.cli.mail.hook import run

    raise typer.Exit(run(json_output=as_json))


# ---------------------------------------------------------------------------------------------


def content(text: str) -> str:
    """The message text: the argument, or standard input for ``-`` (its last line break
    dropped, as ``$(…)`` would)."""
    body = sys.stdin.read().rstrip("\n") if text == "-" else text
    if not body.strip():
        raise CliError("the message text is empty.", EXIT_USAGE)
    return body


def kind_of(value: str | None) -> Kind | None:
    return _one_of(value, get_args(Kind), "--kind")  # type: ignore[return-value]


def pri(value: str | None) -> Priority | None:
    return _one_of(value, get_args(Priority), "--priority")  # type: ignore[return-value]


def outcome_of(value: str | None, option: str) -> Outcome | None:
    return _one_of(value, get_args(Outcome), option)  # type: ignore[return-value]


def _one_of(value: str | None, choices: tuple[str, ...], option: str) -> str | None:
    if value is None or value in choices:
        return value
    raise CliError(f"{option} takes {', '.join(choices)} (got {value!r}).", EXIT_USAGE)


def answer(model: BaseModel) -> dict[str, Any]:
    """A client's answer as the server sent it, key for key."""
    return model.model_dump(mode="json", exclude_unset=True)


def dump(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")


def write(text: list[str]) -> None:
    sys.stdout.write("".join(line + "\n" for line in text))


def show(model: BaseModel, as_json: bool, text: list[str]) -> None:
    """The server's JSON, or the lines for people."""
    if as_json:
        dump(answer(model))
    else:
        write(text)
