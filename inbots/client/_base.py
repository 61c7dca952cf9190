"""What the sync and the async client share: a call described as data (:class:`Call`), the
headers and timeouts of a client, and turning an answer into a result or an error. Neither
client builds a request or reads a response any other way."""

from __future__ import annotations

import functools
import re
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

import httpx

from inbots import __version__
from inbots.client._errors import (
    NotFound,
    Timeout,
    TransportError,
    UnexpectedResponse,
    ValidationError,
    error_for,
)
from inbots.client._types import _rfc3339

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0
# A long-poll answers within the timeout it asked for (the server caps it at its
# wait_max_seconds, 60 by default); the read timeout allows that much plus this.
WAIT_SLACK = 15.0
WAIT_ASSUMED = 60.0  # the wait a call without a timeout may take: the default server cap
USER_AGENT = f"inbots-client/{__version__}"


@dataclass(frozen=True)
class Call(Generic[T]):
    """One API call: method, path under ``/v1``, query, JSON body, extra headers, and how to turn
    the decoded JSON answer (``None`` for an empty one) into the result."""

    method: str
    path: str
    parse: Callable[[Any], T]
    params: Mapping[str, str] = field(default_factory=dict)
    json: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    wait: float | None = None  # a long-poll of up to this many seconds
    raw: bool = False  # the answer is bytes (an attachment), given to ``parse`` as they came


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context every client of this process shares: httpx's default (certifi's roots,
    or ``SSL_CERT_FILE``/``SSL_CERT_DIR`` as set when the first client is made). Building one
    parses the whole CA bundle, tens of milliseconds of CPU per client otherwise."""
    return httpx.create_ssl_context()


def query(**values: object) -> dict[str, str]:
    """Query parameters: None left out, booleans as ``true``/``false``, times as RFC 3339."""
    params: dict[str, str] = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            params[name] = "true" if value else "false"
        elif isinstance(value, datetime):
            params[name] = _rfc3339(value)
        else:
            params[name] = str(value)
    return params


def body(**values: object) -> dict[str, object]:
    """A JSON body without the fields left at None (the server's defaults apply)."""
    return {name: value for name, value in values.items() if value is not None}


_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")


def segment(ident: str, what: str) -> str:
    """An id or username for a URL path. They are letters, digits, ``_`` and ``-``; anything
    else names nothing (and could change the path), so it is not found without asking."""
    if not isinstance(ident, str) or not _SEGMENT.fullmatch(ident):
        raise NotFound(f"No {what} with id {ident!r} was found.", status=404, code="not_found")
    return ident


def idempotency_headers(key: str | None) -> dict[str, str]:
    if key is None:
        return {}
    if not key or not all("!" <= c <= "~" for c in key):
        raise ValidationError(
            "An idempotency key must be visible ASCII characters, without spaces (the server "
            "limits its length: GET /v1/limits, idempotency_key_max).",
            status=422,
            code="validation_error",
            field="idempotency_key",
        )
    return {"Idempotency-Key": key}


def _header_value(value: str, what: str) -> str:
    if not value or not all(" " <= c <= "~" for c in value) or value != value.strip():
        raise ValueError(f"the {what} must be printable ASCII without leading or trailing spaces")
    return value


@dataclass(frozen=True)
class ClientConfig:
    """A client's fixed parts: where, who, how long to wait."""

    base_url: str  # ends in /v1
    headers: dict[str, str]
    timeout: httpx.Timeout

    @classmethod
    def of(
        cls,
        url: str,
        token: str | None,
        timeout: float | httpx.Timeout | None,
        session_label: str | None,
        headers: Mapping[str, str] | None = None,
    ) -> ClientConfig:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"the Inbots URL must start with http:// or https:// (got {url!r})")
        fixed = {"User-Agent": USER_AGENT, "Accept": "application/json", **(headers or {})}
        if token is not None:  # None: no caller yet, only register() can be called
            fixed["Authorization"] = f"Bearer {_header_value(token, 'token')}"
        if session_label is not None:
            fixed["X-Inbots-Session"] = _header_value(session_label, "session label")
        base = url.rstrip("/").removesuffix("/v1") + "/v1"
        return cls(base, fixed, httpx.Timeout(timeout))

    @property
    def server(self) -> str:
        return self.base_url.removesuffix("/v1")

    def timeout_for(self, call: Call[Any]) -> httpx.Timeout:
        """The client's timeout, with room for the server to hold a long-poll."""
        if call.wait is None or self.timeout.read is None:
            return self.timeout
        read = max(self.timeout.read, call.wait + WAIT_SLACK)
        return httpx.Timeout(
            connect=self.timeout.connect,
            read=read,
            write=self.timeout.write,
            pool=self.timeout.pool,
        )

    def result(self, call: Call[T], response: httpx.Response) -> T:
        """The call's result from the server's answer; the error it stands for otherwise."""
        if not response.is_success:
            raise error_for(response, self.server)
        if call.raw:
            return call.parse(response.content)
        try:
            decoded = response.json() if response.content else None
            return call.parse(decoded)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError too
            raise UnexpectedResponse(
                f"Inbots at {self.server} answered {call.method} /v1{call.path} with a body "
                f"this client cannot read ({_first_line(exc)}); is the URL an Inbots server?",
                status=response.status_code,
                code="unexpected_response",
                response=response,
            ) from exc

    def transport_error(self, exc: httpx.TransportError, call: Call[Any]) -> TransportError:
        what = f"{call.method} /v1{call.path}"
        if isinstance(exc, httpx.TimeoutException):
            return Timeout(
                f"Inbots at {self.server} did not answer {what} in time ({type(exc).__name__}); "
                "the call may or may not have taken effect. Check before repeating it (a send: "
                "repeat it with the same idempotency key).",
                url=self.server,
            )
        return TransportError(
            f"Could not reach Inbots at {self.server} for {what} ({type(exc).__name__}: "
            f"{exc or 'no detail'}); check that the server is running and the URL points at it.",
            url=self.server,
        )


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def nothing(_: Any) -> None:
    return None
