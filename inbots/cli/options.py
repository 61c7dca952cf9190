"""The options and arguments the operator commands share, declared once, and the operator's
connection: an :class:`inbots.client.Client` with the operator token.

A command declares only what is its own, and takes an :class:`Operator` first::

    @agents_app.command("show")
    @operator_command()
    def agents_show(op: Operator, agent: AgentArg) -> None:
        \"\"\"One agent.\"\"\"
        op.show(op.api.agent(agent), views.agent_fields)

:func:`operator_command` adds ``--url`` and ``--token`` to the command line Typer reads — and, for
a command that prints an answer, ``--output``/``-o`` with its alias ``--json`` — after the
command's own parameters, so ``inbots stats --url …`` keeps working. When the command runs, it
opens the client (:func:`connect`), hands the command an :class:`Operator`, and turns what the
client raises into the CLI's one-line error and exit code
(:func:`inbots.cli.client.failure`). Commands print the client's answers as the server sent
them (:func:`as_json`): ``--output json`` is the API's JSON, key for key.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Concatenate, ParamSpec, TypeVar

import httpx
import typer
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.table import Table

from inbots import client
from inbots.cli import render
from inbots.cli.client import EXIT_AUTH, EXIT_USAGE, TIMEOUT_SECONDS, CliError, failure
from inbots.cli.render import Json, Output
from inbots.kit.tokens import AGENT_KEY_PREFIX

if TYPE_CHECKING:  # `client` loads pydantic and the models when a command first uses them
    from pydantic import BaseModel

P = ParamSpec("P")
Paged = TypeVar("Paged", "client.Page[Any]", "client.Inbox")  # a page of a list, or the inbox's

DEFAULT_URL = "http://127.0.0.1:8000"
USER_AGENT = "inbots-cli"

# Arguments and options more than one command takes.
AgentArg = Annotated[str, typer.Argument(help="The agent's id or username.", show_default=False)]
ThreadArg = Annotated[str, typer.Argument(help="The thread id.", show_default=False)]
DeliveryArg = Annotated[str, typer.Argument(help="The delivery id.", show_default=False)]
LimitOpt = Annotated[
    int | None, typer.Option("--limit", min=1, help="At most this many (one page).")
]
AllPagesOpt = Annotated[bool, typer.Option("--all", help="Follow next_cursor to the last page.")]


def as_json(answer: BaseModel) -> Json:
    """A client's answer as the server sent it: the same keys in the same order, none of the
    client's defaults added (``tests/test_client.py`` checks every model does)."""
    return answer.model_dump(mode="json", exclude_unset=True)


@dataclass(frozen=True)
class Operator:
    """What an operator command works with: the server, and how to print its answers."""

    api: client.Client
    output: Output | None = None  # None: the default for where stdout goes (render.py)

    def show(self, answer: BaseModel, human: Callable[[Json], RenderableType]) -> None:
        """Print one answer: ``human`` draws it for people; tsv and json need nothing more."""
        render.show_record(as_json(answer), human, self.output)

    def show_list(
        self,
        answer: client.Page[Any] | client.Inbox | Sequence[BaseModel],
        human: Callable[[list[Json]], Table],
    ) -> None:
        """Print a list: a page, or the items of a list the API answers in one piece
        (``{"items": [...]}``); ``human`` draws its items as a table."""
        if isinstance(answer, client.Page | client.Inbox):
            page = as_json(answer)
        else:
            page = {"items": [as_json(item) for item in answer]}
        render.show_list(page, human, self.output)

    def show_pages(
        self,
        fetch: Callable[..., Paged],
        human: Callable[[list[Json]], Table],
        *,
        every_page: bool,
    ) -> None:
        """Print a paged list: the page ``fetch()`` answers or, with ``every_page``, the items of
        every page (``fetch(cursor=…)`` following ``next_cursor``) joined into one
        ``{"items": [...], "next_cursor": null}``."""
        page = fetch()
        if not every_page:
            self.show_list(page, human)
            return
        items = [as_json(item) for item in page.items]
        while page.next_cursor:
            page = fetch(cursor=page.next_cursor)
            items += [as_json(item) for item in page.items]
        render.show_list({"items": items, "next_cursor": None}, human, self.output)


def connect(url: str, token: str | None, *, progress: bool = False) -> client.Client:
    """The operator's client for the server at ``url``: the token is checked first (an agent
    key is refused before any request: the operator's desk is the operator's alone).
    ``progress`` shows a spinner on stderr while each request is in flight."""
    if not url.startswith(("http://", "https://")):
        raise CliError(f"INBOTS_URL must start with http:// or https:// (got {url!r}).", EXIT_USAGE)
    if not token:
        raise CliError(
            "INBOTS_OPERATOR_TOKEN is not set: give the operator token (ops_…) "
            "with --token or the environment.",
            EXIT_USAGE,
        )
    if not (token.isascii() and token.isprintable()) or " " in token:
        raise CliError(
            "INBOTS_OPERATOR_TOKEN holds characters no token has (spaces, line breaks or "
            "non-ASCII); copy it again.",
            EXIT_USAGE,
        )
    if token.startswith(AGENT_KEY_PREFIX):
        raise CliError(
            "INBOTS_OPERATOR_TOKEN holds an agent key (agt_…): operator commands need the "
            "operator token (ops_…). An agent uses its key over HTTP or MCP.",
            EXIT_AUTH,
        )
    try:
        return client.Client(
            url,
            token,
            timeout=TIMEOUT_SECONDS,
            headers={"User-Agent": USER_AGENT},
            transport=Spinning(url) if progress else None,
        )
    except httpx.InvalidURL as exc:
        raise CliError(f"INBOTS_URL is not a valid URL ({exc}).", EXIT_USAGE) from None


class Spinning(httpx.BaseTransport):
    """httpx's transport, with a spinner on stderr naming the request while it is in flight."""

    def __init__(self, url: str) -> None:
        self._http = httpx.HTTPTransport()
        self._prefix = httpx.URL(url).path.rstrip("/") + "/v1"
        self._stderr = Console(stderr=True)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        what = f"{request.method} {request.url.path.removeprefix(self._prefix)}"
        with self._stderr.status(f"{escape(what)} …", spinner="dots"):
            return self._http.handle_request(request)

    def close(self) -> None:
        self._http.close()


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
            with connect(url, token, progress=progress) as api:
                try:
                    call(Operator(api, chosen), **own_args)
                except (client.InbotsError, client.TransportError) as exc:
                    raise failure(exc, api.url) from None

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
