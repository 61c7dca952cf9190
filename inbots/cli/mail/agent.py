"""The agent's connection for ``inbots mail``: an :class:`inbots.client.Client` with the key in
``INBOTS_API_KEY``, at ``INBOTS_URL``, and what a call that failed becomes.

Exit codes (``docs/cli.md``)::

    0  ok
    1  the server refused (its sentence on stderr): not found, conflict, validation, 403 …
    2  usage or configuration: a bad option, INBOTS_API_KEY missing, malformed or refused (401)
    3  the server could not be reached, timed out, answered 5xx or is not Inbots
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from inbots import __version__, client
from inbots.cli.client import (
    EXIT_AUTH,
    EXIT_REFUSED,
    EXIT_USAGE,
    TIMEOUT_SECONDS,
    CliError,
    failure,
)
from inbots.kit.tokens import AGENT_KEY_PREFIX

if TYPE_CHECKING:
    from inbots.client import Client

DEFAULT_URL = "http://127.0.0.1:8000"
USER_AGENT = f"inbots-mail/{__version__}"


def settings() -> tuple[str, str]:
    """``INBOTS_URL`` and ``INBOTS_API_KEY``, checked before any request (exit 2 when wrong)."""
    url = os.environ.get("INBOTS_URL") or DEFAULT_URL
    key = os.environ.get("INBOTS_API_KEY", "")
    if not url.startswith(("http://", "https://")):
        raise CliError(f"INBOTS_URL must start with http:// or https:// (got {url!r}).", EXIT_USAGE)
    if not key:
        raise CliError(
            "INBOTS_API_KEY is not set: export the agent's key (agt_…), shown once when the "
            "operator registered it.",
            EXIT_USAGE,
        )
    if not all("!" <= c <= "~" for c in key):
        raise CliError(
            "INBOTS_API_KEY must be the key as printed, visible ASCII only: remove the spaces "
            "or line break around it.",
            EXIT_USAGE,
        )
    if not key.startswith(AGENT_KEY_PREFIX):
        raise CliError(
            "INBOTS_API_KEY must be an agent key (agt_…); the operator token is not an agent "
            "(the operator's commands are inbots inbox, reply and ack).",
            EXIT_USAGE,
        )
    return url, key


@contextmanager
def agent() -> Iterator[Client]:
    """The agent's client for one command; a call that fails inside becomes :func:`refusal`."""
    url, key = settings()
    with client.Client(
        url, key, timeout=TIMEOUT_SECONDS, headers={"User-Agent": USER_AGENT}
    ) as api:
        try:
            yield api
        except (client.InbotsError, client.TransportError) as exc:
            raise refusal(exc, api.url) from None


def refusal(exc: client.InbotsError | client.TransportError, url: str) -> CliError:
    """The operator CLI's one line for the same failure, with the agent's exit codes: a key the
    server refuses (401) is configuration (2), a 403 a refusal like any other (1)."""
    error = failure(exc, url)
    if error.exit_code != EXIT_AUTH:
        return error
    if isinstance(exc, client.InbotsError) and exc.status == 401:
        return CliError(f"INBOTS_API_KEY was refused: {error.message}", EXIT_USAGE)
    return CliError(error.message, EXIT_REFUSED)
