"""What an MCP tool is, and how one call runs.

A :class:`ToolSpec` names a tool and holds its argument model (:mod:`inbots.mcp.arguments`), its
service (the function the HTTP route runs, through :meth:`ToolContext.run`: a unit of work of
its own, as the route runs it), its result model and its text rendering (:mod:`inbots.mcp.render`);
:meth:`ToolSpec.call` parses the arguments (a refusal worded as HTTP words it), runs the service
and renders the answer. Every failure is a tool result with ``isError: true`` whose text is the
sentence the HTTP API would give, with the calls it points to named as tools (:func:`failure`);
nothing a caller sends can end the session.
The tools themselves are the table in :mod:`inbots.mcp.tools`.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Concatenate, ParamSpec, TypeVar, get_origin

import anyio.to_thread
from mcp_types import (
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    TextContent,
    Tool,
    ToolAnnotations,
)
from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import DataError

from inbots.caller import Caller
from inbots.config import Settings
from inbots.db.engine import Database
from inbots.db.uow import UnitOfWork, run_unit
from inbots.dispatch.effects import Dispatch
from inbots.errors import InbotsError, Invalid, UnknownField
from inbots.kit.paging import page_size
from inbots.kit.schema import refusal
from inbots.limits import Limits, describe, resolve
from inbots.mcp.arguments import Arguments
from inbots.mcp.render import Json

log = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")


class InternalError(InbotsError):
    code = "internal_error"
    status = 500


@dataclass(frozen=True)
class ToolContext:
    """A tool call's caller, and what its service call needs."""

    db: Database
    dispatch: Dispatch
    settings: Settings
    caller: Caller

    def page_size(self, limit: int | None) -> int:
        """A list's ``limit`` argument as HTTP's ``?limit=`` reads it (1 to ``INBOTS_LIST_MAX``;
        otherwise ``INBOTS_LIST_DEFAULT``)."""
        return page_size(limit, self.settings.list_default, self.settings.list_max)

    async def run(
        self,
        fn: Callable[Concatenate[UnitOfWork, Caller, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn`` as the HTTP route runs it: in a unit of work of its own (with the mode ``fn``
        declares), on a worker thread, so the event loop never blocks on the database."""
        call = functools.partial(run_unit, self.db, self.dispatch, fn, self.caller, *args, **kwargs)
        try:
            return await anyio.to_thread.run_sync(call)
        except DataError:
            # As the HTTP layer answers it: a value the database cannot hold is still input.
            raise Invalid("A value in the request cannot be stored.") from None


@dataclass(frozen=True)
class Blocks:
    """An answer that is content of its own (an image, a file) rather than text about a
    result: these blocks as the tool result's content, ``result`` as its structured content
    (the tool's ``render`` is not used)."""

    result: BaseModel
    content: list[TextContent | ImageContent | EmbeddedResource]


Service = Callable[[ToolContext, Any], Awaitable[BaseModel | Json | Blocks]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    arguments: type[Arguments]
    result: type[BaseModel]
    service: Service
    render: Callable[[Json], str]
    read_only: bool = False
    idempotent: bool = False
    # Listed only when the whole set is asked for (INBOTS_MCP_TOOLS=all, X-Inbots-Tools: all);
    # callable by name either way.
    rarely_used: bool = False

    NO_ANSWER: ClassVar[str] = "Something went wrong on our side; nothing was changed."

    def input_schema(self, limits: Limits) -> dict[str, Any]:
        """The argument model's JSON schema with the server's limits in it (see
        :mod:`inbots.limits`), in as few characters as say the same (:func:`compact`)."""
        schema: dict[str, Any] = compact(resolve(self.arguments.model_json_schema(), limits))
        schema.setdefault("properties", {})
        return schema

    def listing(self, limits: Limits) -> Tool:
        """The tool as ``tools/list`` shows it: no output schema (optional in MCP; a client
        that is given one validates every answer against it, and none needs it: the structured
        content is the HTTP API's JSON, as docs/api.md describes it), and only the hints that
        differ from the protocol's defaults or say something."""
        if self.read_only:  # the other hints are meaningful only for a tool that writes
            hints = ToolAnnotations(read_only_hint=True)
        else:
            hints = ToolAnnotations(destructive_hint=False, idempotent_hint=self.idempotent or None)
        return Tool(
            name=self.name,
            description=describe(self.description, limits),
            input_schema=self.input_schema(limits),
            annotations=hints,
        )

    def parse(self, raw: dict[str, Any]) -> Any:
        """The arguments as the tool's model, or :class:`Invalid` with the HTTP-style sentence.
        A list sent as a JSON string (some harnesses do) is read as the list."""
        fields = self.arguments.model_fields
        values = dict(raw)
        for name, value in raw.items():
            if name in fields and isinstance(value, str) and _is_list(fields[name].annotation):
                try:
                    decoded = json.loads(value)
                except (ValueError, RecursionError):
                    continue
                if isinstance(decoded, list):
                    values[name] = decoded
        try:
            return self.arguments.model_validate(values)
        except ValidationError as exc:
            raise self._invalid(exc.errors()[0]) from None

    def _invalid(self, err: Any) -> Invalid:
        """The HTTP API's sentence (:func:`~inbots.kit.schema.refusal`); an unknown argument is
        said in a tool's terms."""
        refused = refusal(err)
        if isinstance(refused, UnknownField):
            name = refused.field or ""
            takes = ", ".join(self.arguments.model_fields) or "no arguments"
            return UnknownField(
                f"{self.name} has no argument {name!r}; it takes {takes}.", field=name
            )
        return refused

    async def call(self, context: ToolContext, raw: dict[str, Any]) -> CallToolResult:
        try:
            answer = await self.service(context, self.parse(raw))
            if isinstance(answer, Blocks):
                structured = answer.result.model_dump(mode="json")
                return CallToolResult(content=list(answer.content), structured_content=structured)
            result = answer.model_dump(mode="json") if isinstance(answer, BaseModel) else answer
            text = self.render(result)
        except InbotsError as exc:
            return failure(exc)
        except Exception:
            log.exception("MCP tool %s failed", self.name)
            return failure(InternalError(self.NO_ANSWER))
        return CallToolResult(content=[TextContent(text=text)], structured_content=result)


def failure(exc: InbotsError) -> CallToolResult:
    """A tool error: the HTTP error's sentence as the tools word it (a call it points to is
    named as a tool: :class:`~inbots.errors.Pointing`) as text, and the HTTP error's envelope with
    that sentence as structured content, with ``retry_after`` (seconds) where HTTP sends a
    ``Retry-After`` header, which a tool's caller never sees."""
    error = {**exc.to_dict(), "message": exc.tool_message}
    if exc.retry_after is not None:
        error["retry_after"] = exc.retry_after
    return CallToolResult(
        content=[TextContent(text=exc.tool_message)],
        structured_content={"error": error},
        is_error=True,
    )


def _is_list(annotation: Any) -> bool:
    return get_origin(annotation) is list


# What a JSON schema of pydantic's says that a tool's caller does not need: a title made from the
# field's name, a default that is "nothing" (null, false, an empty list: leaving the argument out
# says the same), "no other properties" and "not empty" (the tool checks its arguments, and
# refuses an unknown or an empty one with a sentence that says how to fix the call).
_UNSAID: dict[str, tuple[Any, ...]] = {
    "title": (),
    "default": (None, False, []),
    "additionalProperties": (False,),
    "minLength": (1,),
}


def compact(schema: Any) -> Any:
    """A pydantic JSON schema in fewer characters, saying the same to a caller: the keys of
    ``_UNSAID`` dropped, and an optional value (``anyOf: [X, {"type": "null"}]``) written as
    ``X`` (leaving an argument out is how a tool's caller says "none"; the tool still takes an
    explicit null), without the null that :func:`inbots.kit.schema.choice` adds to its ``enum``."""
    if isinstance(schema, list):
        return [compact(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _UNSAID and (not _UNSAID[key] or _is_unsaid(value, _UNSAID[key])):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: compact(field) for name, field in value.items()}
        elif key == "anyOf" and isinstance(value, list) and {"type": "null"} in value:
            rest = [compact(v) for v in value if v != {"type": "null"}]
            if len(rest) == 1 and isinstance(rest[0], dict):
                out.update(rest[0])
            else:
                out[key] = rest
        elif key == "enum" and isinstance(value, list):
            out[key] = [v for v in value if v is not None]
        else:
            out[key] = compact(value)
    return out


def _is_unsaid(value: Any, nothing: tuple[Any, ...]) -> bool:
    return any(value == n and type(value) is type(n) for n in nothing)
