"""``inbots mcp``: the agent tools over stdio, for harnesses that launch a local command.

The tools are the ones ``/mcp`` serves (same names, descriptions, schemas and results); their
backend calls the HTTP API of a running Inbots with the agent's key. Stdout carries only the
protocol; anything else goes to stderr.

With an enrolment token (``inbots mcp --enroll enr_… --name NAME``) the bridge first registers the
agent (``POST /v1/register``) and then serves with the new key. The key is kept in the
``--key-file`` (created with mode 0600): the next start finds it there and does not register
again, so a harness can keep the same command line. Without a key file the key is printed once
on stderr, the only place it will ever be shown.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp.server import Server
from mcp.server.stdio import stdio_server

from inbots.errors import InbotsError
from inbots.limits import Limits
from inbots.mcp.remote import HttpBackend
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


async def enroll(
    base_url: str, token: str, name: str, description: str | None, key_file: Path | None
) -> str:
    """Register the agent with an enrolment token and keep its key (see the module's
    docstring); the key. InbotsError with the server's sentence when it refuses."""
    async with HttpBackend(base_url, "") as anonymous:
        created = await anonymous.register(token, name, description)
    api_key = str(created["api_key"])
    kept = None
    if key_file is not None:
        try:
            write_key(key_file, api_key)
            kept = key_file
        except OSError as exc:
            print(
                f"inbots mcp: could not write the key to {key_file} ({exc.strerror or exc}).",
                file=sys.stderr,
            )
    if kept is not None:
        print(
            f"inbots mcp: registered @{created['username']} ({created['id']}); its key is in "
            f"{kept}.",
            file=sys.stderr,
        )
    else:
        print(
            f"inbots mcp: registered @{created['username']} ({created['id']}). Its API key, "
            "shown this once (store it now, or use --key-file next time; start with "
            f"INBOTS_API_KEY set to it):\n{api_key}",
            file=sys.stderr,
        )
    return api_key


def read_key(key_file: Path) -> str | None:
    """The key kept in ``key_file``, or None when there is no such file; InbotsError for a file
    that holds something else (registering would then have nowhere to keep the new key)."""
    try:
        text = key_file.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise InbotsError(
            f"--key-file {key_file} cannot be read ({exc}); fix its permissions or give another."
        ) from None
    if not text.startswith("agt_"):
        raise InbotsError(
            f"--key-file {key_file} exists but holds no agent key (agt_…); remove it to register "
            "anew, or give another path."
        )
    return text


def write_key(key_file: Path, api_key: str) -> None:
    """Keep the key in a new file only its owner can read."""
    key_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(api_key + "\n")


@asynccontextmanager
async def bridge(
    base_url: str, api_key: str, session: str | None = None
) -> AsyncIterator[Server[Any]]:
    """The bridge's MCP server, calling the HTTP API at ``base_url`` as the agent of ``api_key``,
    with the server's limits quoted in its tool descriptions. ``serve_stdio`` runs it on
    stdin/stdout; a client in the same process can connect to it directly (the tests do)."""
    limits = await server_limits(base_url, api_key)
    async with HttpBackend(base_url, api_key, limits=limits, session=session) as backend:
        yield build_server(lambda _ctx: backend, limits)


async def serve_stdio(base_url: str, api_key: str, session: str | None = None) -> None:
    """Serve the tools on stdin/stdout until the client closes them."""
    async with bridge(base_url, api_key, session) as server, stdio_server() as streams:
        read_stream, write_stream = streams
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run(base_url: str, api_key: str, session: str | None = None) -> None:
    anyio.run(serve_stdio, base_url, api_key, session)


def run_enrolled(
    base_url: str,
    token: str,
    name: str,
    description: str | None,
    key_file: Path | None,
    session: str | None = None,
) -> None:
    """Register with ``token`` (unless ``key_file`` already holds a key), then serve."""

    async def main() -> None:
        api_key = read_key(key_file) if key_file is not None else None
        if api_key is None:
            api_key = await enroll(base_url, token, name, description, key_file)
        await serve_stdio(base_url, api_key, session)

    anyio.run(main)
