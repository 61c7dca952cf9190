"""``inbots mcp --enroll enr_… --name NAME``: register the agent, then relay as it.

The bridge first registers the agent (``POST /v1/register``, through :mod:`inbots.client`) and
then relays with the new key (:mod:`inbots.mcp.stdio`). The key is kept in the ``--key-file``
(created with mode 0600): the next start finds it there and does not register again, so a
harness can keep the same command line. Without a key file the key is printed once on stderr,
the only place it will ever be shown. Like the relay, this imports nothing of the server side.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio

from inbots import client
from inbots.errors import InbotsError
from inbots.mcp.stdio import USER_AGENT, serve_stdio, server_url


async def enroll(
    base_url: str, token: str, name: str, description: str | None, key_file: Path | None
) -> str:
    """Register the agent with an enrolment token and keep its key (see the module's
    docstring); the key. InbotsError with the server's sentence when it refuses."""
    server = server_url(base_url)
    async with client.AsyncClient(server, None, headers={"User-Agent": USER_AGENT}) as anonymous:
        try:
            created = await anonymous.register(token, name, description)
        except client.Timeout:
            raise InbotsError(
                f"Inbots at {server} did not answer in time; the call may or may not have "
                "taken effect. Check before repeating it (send_message: repeat with the same "
                "idempotency_key)."
            ) from None
        except client.TransportError as exc:
            cause = type(exc.__cause__ or exc).__name__
            raise InbotsError(
                f"Could not reach Inbots at {server} ({cause}); check that the server is running "
                "and that INBOTS_URL points at it."
            ) from None
        except client.InbotsError as exc:
            if exc.code == f"http_{exc.status}":  # an answer without the error envelope
                raise InbotsError(
                    f"Inbots at {server} answered HTTP {exc.status} without an error message."
                ) from None
            raise InbotsError(exc.message, field=exc.field) from None
    kept = None
    if key_file is not None:
        try:
            write_key(key_file, created.api_key)
            kept = key_file
        except OSError as exc:
            print(
                f"inbots mcp: could not write the key to {key_file} ({exc.strerror or exc}).",
                file=sys.stderr,
            )
    if kept is not None:
        print(
            f"inbots mcp: registered @{created.username} ({created.id}); its key is in {kept}.",
            file=sys.stderr,
        )
    else:
        print(
            f"inbots mcp: registered @{created.username} ({created.id}). Its API key, "
            "shown this once (store it now, or use --key-file next time; start with "
            f"INBOTS_API_KEY set to it):\n{created.api_key}",
            file=sys.stderr,
        )
    return created.api_key


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


def run_enrolled(
    base_url: str,
    token: str,
    name: str,
    description: str | None,
    key_file: Path | None,
    session: str | None = None,
    tools: str | None = None,
) -> None:
    """Register with ``token`` (unless ``key_file`` already holds a key), then relay."""

    async def main() -> None:
        api_key = read_key(key_file) if key_file is not None else None
        if api_key is None:
            api_key = await enroll(base_url, token, name, description, key_file)
        await serve_stdio(base_url, api_key, session, tools)

    anyio.run(main)
