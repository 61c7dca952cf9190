"""``inbots mcp``: the agent tools over stdio, for harnesses that launch a local command.

The tools are the ones ``/mcp`` serves (same names, descriptions, schemas and results); their
backend calls the HTTP API of a running Inbots with the agent's key. Stdout carries only the
protocol; anything else goes to stderr.
"""

from __future__ import annotations

import anyio
from mcp.server.stdio import stdio_server

from inbots.mcp.backends import HttpBackend, ToolLimits
from inbots.mcp.tools import build_server


async def serve_stdio(base_url: str, api_key: str) -> None:
    """Serve the tools on stdin/stdout until the client closes them."""
    limits = ToolLimits()
    async with HttpBackend(base_url, api_key, limits=limits) as backend:
        server = build_server(lambda _ctx: backend, limits)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


def run(base_url: str, api_key: str) -> None:
    anyio.run(serve_stdio, base_url, api_key)
