"""The operator CLI's exit codes, its one-line error, and the one place that turns a call
:mod:`inbots.client` could not make into an exit code. The calls themselves are
:mod:`inbots.client`'s; :mod:`inbots.cli.options` opens the operator's connection.

Exit codes (documented in ``docs/cli.md``)::

    0  ok
    1  the server refused (4xx other than 401/403: not found, conflict, validation, …)
    2  usage or configuration (missing token, bad option)
    3  the server could not be reached (connection refused, timeout) or answered 5xx
    4  authentication or authorization (401/403)
   70  a bug in the CLI itself
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import typer
from rich.console import Console
from rich.markup import escape

from inbots.client import InbotsError, Timeout, TransportError, UnexpectedResponse

EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_AUTH = 4
EXIT_INTERNAL = 70  # a bug in the CLI itself (sysexits EX_SOFTWARE)

TIMEOUT_SECONDS = 30.0  # each call's; a long-poll is allowed its wait on top

_stderr = Console(stderr=True, soft_wrap=True)


class CliError(typer.TyperException):
    """An expected failure: ``inbots.cli.main.main`` prints it as one line on stderr and exits
    with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def report(message: str) -> None:
    """Print one error line on stderr (the message is plain text, never markup)."""
    first_line = " ".join(message.split())
    _stderr.print(f"[bold red]inbots:[/] {escape(first_line)}", highlight=False)


def failure(exc: InbotsError | TransportError, url: str) -> CliError:
    """The one-line error, and its exit code, for a call to Inbots at ``url`` that failed: the
    server's code, message and status when it refused."""
    if isinstance(exc, Timeout):
        return CliError(
            f"Inbots at {url} did not answer within {_allowed(exc):g} s.", EXIT_UNREACHABLE
        )
    if isinstance(exc, TransportError):
        cause = exc.__cause__ or exc
        return CliError(
            f"could not reach Inbots at {url}: {cause or type(cause).__name__}", EXIT_UNREACHABLE
        )
    response = exc.response
    if isinstance(exc, UnexpectedResponse) and response is not None:
        # Another server at that address (a proxy's page, another app).
        kind = response.headers.get("content-type", "no content type")
        path = response.request.url.path.removeprefix(urlsplit(url).path.rstrip("/") + "/v1")
        return CliError(
            f"{url} answered {response.request.method} {path} with something that is not "
            f"Inbots' JSON (HTTP {response.status_code}, {kind}); check that INBOTS_URL points "
            "at an Inbots server.",
            EXIT_UNREACHABLE,
        )
    if exc.code == f"http_{exc.status}" and response is not None:  # no error envelope
        detail = f"{response.reason_phrase or 'error'}: {response.text[:200]}".rstrip(": ")
    else:
        detail = f"{exc.code}: {exc.message}" + (f" (field: {exc.field})" if exc.field else "")
    if exc.status in (401, 403):
        return CliError(f"{detail} [HTTP {exc.status}]", EXIT_AUTH)
    if exc.status >= 500:
        return CliError(f"server error {detail} [HTTP {exc.status}]", EXIT_UNREACHABLE)
    return CliError(f"{detail} [HTTP {exc.status}]", EXIT_REFUSED)


_PHASES = {
    httpx.ConnectTimeout: "connect",
    httpx.ReadTimeout: "read",
    httpx.WriteTimeout: "write",
    httpx.PoolTimeout: "pool",
}


def _allowed(exc: Timeout) -> float:
    """The seconds the call was allowed for the step that timed out (reading a long-poll's
    answer is allowed its wait on top)."""
    cause = exc.__cause__
    if not isinstance(cause, httpx.TimeoutException):
        return TIMEOUT_SECONDS
    try:
        allowed = cause.request.extensions.get("timeout", {}).get(_PHASES.get(type(cause)))
    except RuntimeError:  # an exception raised without its request
        return TIMEOUT_SECONDS
    return float(allowed) if isinstance(allowed, int | float) else TIMEOUT_SECONDS
