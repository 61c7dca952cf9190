"""The operator CLI's HTTP client: base URL, bearer token, and the one place that turns a failed
call into an exit code.

Exit codes (documented in ``docs/cli.md``)::

    0  ok
    1  the server refused (4xx other than 401/403: not found, conflict, validation, …)
    2  usage or configuration (missing token, bad option)
    3  the server could not be reached (connection refused, timeout) or answered 5xx
    4  authentication or authorization (401/403)
   70  a bug in the CLI itself
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from urllib.parse import quote

import httpx
import typer
from rich.console import Console
from rich.markup import escape

from inbots.kit.tokens import AGENT_KEY_PREFIX

EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_AUTH = 4
EXIT_INTERNAL = 70  # a bug in the CLI itself (sysexits EX_SOFTWARE)

DEFAULT_URL = "http://127.0.0.1:8000"
TIMEOUT_SECONDS = 30.0

_stderr = Console(stderr=True, soft_wrap=True)


class CliError(typer.TyperException):
    """An expected failure: ``inbots.cli.main.main`` prints it as one line on stderr and exits
    with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def path(*parts: str) -> str:
    """An API path from its segments, each quoted: ``path("agents", name, "webhook")``."""
    return "".join("/" + quote(part, safe="") for part in parts)


def report(message: str) -> None:
    """Print one error line on stderr (the message is plain text, never markup)."""
    first_line = " ".join(message.split())
    _stderr.print(f"[bold red]inbots:[/] {escape(first_line)}", highlight=False)


def error_for(response: httpx.Response) -> CliError:
    """Map a non-2xx answer to a :class:`CliError` naming the server's code and message."""
    status = response.status_code
    try:
        body = response.json()["error"]
        detail = f"{body['code']}: {body['message']}"
        if body.get("field"):
            detail += f" (field: {body['field']})"
    except (ValueError, KeyError, TypeError):
        detail = f"{response.reason_phrase or 'error'}: {response.text[:200]}".rstrip(": ")
    if status in (401, 403):
        return CliError(f"{detail} [HTTP {status}]", EXIT_AUTH)
    if status >= 500:
        return CliError(f"server error {detail} [HTTP {status}]", EXIT_UNREACHABLE)
    return CliError(f"{detail} [HTTP {status}]", EXIT_REFUSED)


class Client:
    """The operator's view of one Inbots server. Every method returns the decoded JSON body (or
    ``None`` for an empty answer) and raises :class:`CliError` for anything else."""

    def __init__(self, url: str, token: str | None, *, progress: bool = False) -> None:
        if not url.startswith(("http://", "https://")):
            raise CliError(
                f"INBOTS_URL must start with http:// or https:// (got {url!r}).", EXIT_USAGE
            )
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
        if token.startswith(AGENT_KEY_PREFIX):  # the operator's desk is the operator's alone
            raise CliError(
                "INBOTS_OPERATOR_TOKEN holds an agent key (agt_…): operator commands need the "
                "operator token (ops_…). An agent uses its key over HTTP or MCP.",
                EXIT_AUTH,
            )
        self.url = url.rstrip("/")
        self.progress = progress
        try:
            self._http = httpx.Client(
                base_url=self.url + "/v1",
                headers={"Authorization": f"Bearer {token}", "User-Agent": "inbots-cli"},
                timeout=TIMEOUT_SECONDS,
            )
        except httpx.InvalidURL as exc:
            raise CliError(f"INBOTS_URL is not a valid URL ({exc}).", EXIT_USAGE) from None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        timeout: float = TIMEOUT_SECONDS,
    ) -> Any:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        with self._spinner(f"{method} {path}"):
            try:
                response = self._http.request(
                    method, path, params=query, json=json, timeout=timeout
                )
            except httpx.TimeoutException:
                raise CliError(
                    f"Inbots at {self.url} did not answer within {timeout:g} s.",
                    EXIT_UNREACHABLE,
                ) from None
            except httpx.TransportError as exc:
                raise CliError(
                    f"could not reach Inbots at {self.url}: {exc or type(exc).__name__}",
                    EXIT_UNREACHABLE,
                ) from None
        if response.is_error:
            raise error_for(response)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:  # another server at that address (a proxy's page, another app)
            kind = response.headers.get("content-type", "no content type")
            raise CliError(
                f"{self.url} answered {method} {path} with something that is not Inbots' JSON "
                f"(HTTP {response.status_code}, {kind}); check that INBOTS_URL points at an "
                "Inbots server.",
                EXIT_UNREACHABLE,
            ) from None

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, json: Any = None) -> Any:
        return self.request("POST", path, json=json)

    def put(self, path: str, json: Any = None) -> Any:
        return self.request("PUT", path, json=json)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def pages(self, path: str, **params: Any) -> Iterator[dict[str, Any]]:
        """Every page of a cursor-paginated list, following ``next_cursor``."""
        cursor: str | None = None
        while True:
            page: dict[str, Any] = self.get(path, **params, cursor=cursor)
            yield page
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def listing(self, path: str, *, every_page: bool = False, **params: Any) -> dict[str, Any]:
        """One page of a list; with ``every_page``, the items of every page joined into one
        ``{"items": [...], "next_cursor": None}``."""
        if not every_page:
            page: dict[str, Any] = self.get(path, **params)
            return page
        items = [item for page in self.pages(path, **params) for item in page["items"]]
        return {"items": items, "next_cursor": None}

    def _spinner(self, what: str) -> AbstractContextManager[object]:
        if not self.progress:
            return nullcontext()
        return _stderr.status(f"{escape(what)} …", spinner="dots")
