"""The MCP server of the agent tools (the official SDK's low-level server) that ``/mcp``
(:mod:`inbots.mcp.endpoint`) serves; ``inbots mcp`` relays stdio to it (:mod:`inbots.mcp.stdio`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from mcp.server import Server, ServerRequestContext
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
)

from inbots import __version__
from inbots.errors import InbotsError, Invalid
from inbots.limits import Limits
from inbots.mcp.spec import ToolContext, failure
from inbots.mcp.tools import INSTRUCTIONS, tool_specs

ContextFor = Callable[[ServerRequestContext[Any, Any]], ToolContext]
WantsAll = Callable[[ServerRequestContext[Any, Any]], bool]


@functools.lru_cache(maxsize=16)
def _catalogue(
    limits_json: str, everything: bool = False
) -> tuple[ListToolsResult, dict[str, dict[str, Any]]]:
    """The tool list (the default set, or ``everything``: the rarely used tools too) and every
    tool's input schema, for these limits. Made once per process, set of limits and set of tools
    (each server of a process shares them, read-only): generating the JSON schemas of every
    tool's arguments takes a good part of a tenth of a second."""
    limits = Limits.model_validate_json(limits_json)
    specs = tool_specs()
    shown = [spec for spec in specs if everything or not spec.rarely_used]
    listed = ListToolsResult(tools=[spec.listing(limits) for spec in shown])
    return listed, {spec.name: spec.input_schema(limits) for spec in specs}


def build_server(context_for: ContextFor, limits: Limits, wants_all: WantsAll) -> Server[Any]:
    """The MCP server for these tools. ``context_for`` gives the request's caller (raising
    :class:`InbotsError` if there is none); ``wants_all`` says whether the request asks for every
    tool in ``tools/list`` (a tool left out of the default list still answers a call by name)."""
    by_name = {spec.name: spec for spec in tool_specs()}
    limits_json = limits.model_dump_json()
    _, schemas = _catalogue(limits_json)

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return _catalogue(limits_json, wants_all(ctx))[0]

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult:
        spec = by_name.get(params.name)
        if spec is None:
            names = ", ".join(by_name)
            return failure(Invalid(f"There is no tool {params.name!r}; the tools are {names}."))
        try:
            context = context_for(ctx)
        except InbotsError as exc:
            return failure(exc)
        return await spec.call(context, params.arguments or {})

    return Server(
        "inbots",
        version=__version__,
        title="Inbots",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=schemas.get,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
