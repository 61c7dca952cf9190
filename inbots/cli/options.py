"""The options and arguments the operator commands share, declared once.

A command declares only what is its own, and takes an :class:`Operator` first::

    @agents_app.command("show")
    @operator_command()
    def agents_show(op: Operator, agent: AgentArg) -> None:
        \"\"\"One agent.\"\"\"
        op.show(op.api.get(path("agents", agent)), views.agent_fields)

:func:`operator_command` adds ``--url`` and ``--token`` to the command line Typer reads — and, for
a command that prints an answer, ``--output``/``-o`` with its alias ``--json`` — after the
command's own parameters, so ``inbots stats --url …`` keeps working. When the command runs, it
opens the :class:`~inbots.cli.client.Client` and hands the command an :class:`Operator`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Concatenate, ParamSpec

import typer
from rich.console import RenderableType
from rich.table import Table

from inbots.cli import render
from inbots.cli.client import DEFAULT_URL, EXIT_USAGE, Client, CliError
from inbots.cli.render import Json, Output

P = ParamSpec("P")

# Arguments and options more than one command takes.
AgentArg = Annotated[str, typer.Argument(help="The agent's id or username.", show_default=False)]
ThreadArg = Annotated[str, typer.Argument(help="The thread id.", show_default=False)]
DeliveryArg = Annotated[str, typer.Argument(help="The delivery id.", show_default=False)]
LimitOpt = Annotated[
    int | None, typer.Option("--limit", min=1, help="At most this many (one page).")
]
AllPagesOpt = Annotated[bool, typer.Option("--all", help="Follow next_cursor to the last page.")]


@dataclass(frozen=True)
class Operator:
    """What an operator command works with: the server, and how to print its answer."""

    api: Client
    output: Output | None = None  # None: the default for where stdout goes (render.py)

    def show(self, answer: Json, human: Callable[[Json], RenderableType]) -> None:
        """Print one answer: ``human`` draws it for people; tsv and json need nothing more."""
        render.show_record(answer, human, self.output)

    def show_list(self, page: Json, human: Callable[[list[Json]], Table]) -> None:
        """Print a page of a list; ``human`` draws its items as a table."""
        render.show_list(page, human, self.output)


def _connection(
    *,
    url: Annotated[
        str, typer.Option("--url", envvar="INBOTS_URL", help="Base URL of Inbots [INBOTS_URL].")
    ] = DEFAULT_URL,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="INBOTS_OPERATOR_TOKEN",
            help="The operator token, ops_… (prefer the environment) [INBOTS_OPERATOR_TOKEN].",
            show_default=False,
        ),
    ] = None,
) -> None:
    """(Its signature holds the connection options that every operator command takes.)"""


def _answer(
    *,
    output: Annotated[
        Output | None,
        typer.Option(
            "--output",
            "-o",
            case_sensitive=False,
            help="table, json or tsv. Default: table on a terminal; elsewhere tsv for a list, "
            "and tables never wrapped.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The same as --output json.")] = False,
) -> None:
    """(Its signature holds the output options of every command that prints an answer.)"""


CONNECTION = tuple(inspect.signature(_connection, eval_str=True).parameters.values())
ANSWER = tuple(inspect.signature(_answer, eval_str=True).parameters.values())


def operator_command(
    *, answers: bool = True, spinner: bool = True
) -> Callable[[Callable[Concatenate[Operator, P], None]], Callable[..., None]]:
    """Give a command the shared options and, when it runs, an :class:`Operator`.

    ``answers=False`` for a command that prints no answer (no ``--output``/``--json``);
    ``spinner=False`` for one that draws its own live view (no request spinner on stderr)."""

    def decorate(command: Callable[Concatenate[Operator, P], None]) -> Callable[..., None]:
        own = list(inspect.signature(command, eval_str=True).parameters.values())[1:]
        shared = [*CONNECTION, *(ANSWER if answers else ())]
        if clash := {p.name for p in own} & {p.name for p in shared}:
            raise TypeError(f"{command.__name__} declares the shared {sorted(clash)} again")
        call: Callable[..., None] = command

        @functools.wraps(command)
        def run(
            *,
            url: str,
            token: str | None,
            output: Output | None = None,
            as_json: bool = False,
            **own_args: Any,
        ) -> None:
            chosen = chosen_output(output, as_json)
            # A spinner on stderr only for a person at a terminal waiting for a table.
            progress = spinner and render.on_terminal() and chosen in (None, Output.TABLE)
            with Client(url, token, progress=progress) as api:
                call(Operator(api, chosen), **own_args)

        # What Typer reads to build the command line: the command's own parameters, then ours.
        signature = inspect.Signature([*own, *shared])
        run.__signature__ = signature  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
        return run

    return decorate


def chosen_output(output: Output | None, as_json: bool) -> Output | None:
    """``--json`` is ``--output json``; the two cannot disagree."""
    if not as_json:
        return output
    if output not in (None, Output.JSON):
        raise CliError(f"--json is --output json; it cannot go with --output {output}.", EXIT_USAGE)
    return Output.JSON
