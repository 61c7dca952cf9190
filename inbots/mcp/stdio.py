"""``inbots mcp``: the agent tools over stdio, for harnesses that launch a local command.

The tools are the ones ``/mcp`` serves (same names, descriptions, schemas and results); their
backend calls the HTTP API of a running Inbots with the agent's key. Stdout carries only the
protocol; anything else goes to stderr.
"""

from __future__ import annotations

import sys

import anyio
from mcp.server.stdio import stdio_server

from inbots.errors import InbotsError
from inbots.limits import Limits
from inbots.mcp.backends import HttpBackend
from inbots.mcp.server import build_server

# How long start-up waits for the server's limits before it goes on with the defaults: a
# harness waits for the MCP handshake, and an unreachable server is reported by every tool.
LIMITS_TIMEOUT_SECONDS = 5.0


async def server_limits(base_url: str, api_key: str) -> Limits:
    """The server's limits, so that the tool descriptions quote them; the documented defaults
    (and one line on stderr) when the server cannot tell: unreachable, the key refused, or a
    server older than ``GET /v1/limits``."""
    async with HttpBackend(base_url, api_key) as probe:
        try:
            with anyio.fail_after(LIMITS_TIMEOUT_SECONDS):
                return await probe.server_limits()
        except (InbotsError, TimeoutError) as exc:
            reason = exc.message if isinstance(exc, InbotsError) else "no answer in time"
            print(
                f"inbots mcp: could not read the server's limits ({reason}); "
                "the tool descriptions quote the defaults.",
                file=sys.stderr,
            )
            return Limits.defaults()


async def serve_stdio(base_url: str, api_key: str) -> None:
    """Serve the tools on stdin/stdout until the client closes them."""
    limits = await server_limits(base_url, api_key)
    async with HttpBackend(base_url, api_key, limits=limits) as backend:
        server = build_server(lambda _ctx: backend, limits)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


def run(base_url: str, api_key: str) -> None:
    anyio.run(serve_stdio, base_url, api_key)
