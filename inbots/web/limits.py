"""Request limits in the app (pure ASGI): the body cap, enforced before the body is parsed and
streaming-safe, and the head cap (size and count of headers).

The head cap here is the second line: under ``inbots serve`` or the Procfile's uvicorn the
protocol (:mod:`inbots.web.protocol`) refuses an oversized head while it arrives, before it is
held in memory; this check gives the same answer behind any other ASGI server."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from inbots.config import ATTACHMENT_OVERHEAD_BYTES, Settings
from inbots.errors import PayloadTooLarge

CODE_TOO_LARGE = "headers_too_large"
CODE_TOO_SLOW = "request_timeout"  # 408: the head did not arrive in time
HEADER_MAX_COUNT = 100  # header fields in one request; more is 431 headers_too_large


@dataclass(frozen=True)
class HeadLimits:
    max_bytes: int
    max_count: int
    timeout_seconds: float  # enforced by the protocol only (inbots.web.protocol)

    @classmethod
    def of(cls, settings: Settings) -> HeadLimits:
        return cls(
            settings.http_header_max_bytes, HEADER_MAX_COUNT, settings.http_header_timeout_seconds
        )

    def too_large(self) -> str:
        return (
            f"The request's headers are larger than {self.max_bytes} bytes in all (the URL "
            "counts too); send fewer or shorter headers."
        )

    def too_many(self) -> str:
        return f"The request has more than {self.max_count} header fields; send fewer."

    def too_slow(self) -> str:
        return (
            f"The request line and headers did not all arrive within {self.timeout_seconds:g} "
            "seconds, so the connection is closed; send the whole head at once."
        )

    def check(self, scope: Scope) -> str | None:
        """Why an ASGI request's head breaks the limits, or None."""
        headers = scope.get("headers") or []
        if len(headers) > self.max_count:
            return self.too_many()
        size = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
        size += sum(len(name) + len(value) + 4 for name, value in headers)
        return self.too_large() if size > self.max_bytes else None


async def _read_whole(receive: Receive, max_bytes: int) -> bytes | None:
    """The request's body, read as it streams in; None once it passes ``max_bytes`` (the rest
    is never read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client went away: the app sees an empty remainder
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes) -> Receive:
    """A ``receive`` that hands the app ``body`` whole, then waits as the server's would."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


def _attachment_bytes(body: bytes) -> int:
    """What a send's body may hold beyond the usual cap: its attachments' base64 and a little
    for each one's name and type. Read from the body's ``attachments`` (a send) or its
    ``params.arguments.attachments`` (an MCP ``tools/call``); 0 for anything else, so a body
    over the usual cap without attachments is refused as it always was."""
    if len(body) <= 2:
        return 0
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested too deep: the app says which
        return 0
    if not isinstance(document, dict):
        return 0
    params = document.get("params")
    if isinstance(params, dict) and isinstance(params.get("arguments"), dict):
        document = params["arguments"]
    attachments = document.get("attachments")
    if not isinstance(attachments, list):
        return 0
    return sum(
        len(item["data"]) + ATTACHMENT_OVERHEAD_BYTES
        for item in attachments
        if isinstance(item, dict) and isinstance(item.get("data"), str)
    )


class BodyTooLarge(HTTPException):
    """Raised from inside the body stream; FastAPI lets HTTPExceptions through its body parsing,
    and the app's handler renders it as ``payload_too_large`` (``/mcp``, which reads its body
    itself, answers it with :func:`jsonrpc_refusal`)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"The request body is larger than {max_bytes} bytes.")


def _unstorable_url(scope: Scope) -> bool:
    """NUL or an unpaired surrogate in the path or query: no id or filter can contain them."""
    path = scope.get("path", "")
    query = scope.get("query_string", b"").lower()
    if "\x00" in path or b"%00" in query or b"\x00" in query:
        return True
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


# JSON-RPC's "Invalid Request": what an MCP client is told when its request is refused whole.
JSONRPC_INVALID_REQUEST = -32600


def jsonrpc_refusal(code: str, message: str) -> dict[str, Any]:
    """A whole request refused, as a JSON-RPC error: ``id`` null (the request was not read), the
    sentence as its message and the HTTP API's code as ``data.code``. The official MCP client
    raises it with that sentence; a bare HTTP error reaches it only as "Server returned an error
    response"."""
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": JSONRPC_INVALID_REQUEST, "message": message, "data": {"code": code}},
    }


# The page a browser is shown for a refused body: given the request and the sentence.
HtmlPage = Callable[[Request, str], Awaitable[Response]]


def _from_a_browser(scope: Scope) -> bool:
    """A page's request (a dashboard form): it accepts HTML and is not for the API."""
    path = scope.get("path", "")
    if path == "/v1" or path.startswith("/v1/"):
        return False
    accept = Headers(scope=scope).get("accept", "")
    return "text/html" in accept


async def _no_body() -> Message:
    """The receive channel of an answer given without reading the request (it is not read)."""
    return {"type": "http.disconnect"}


class BodyLimit:
    """The body and head caps. On ``jsonrpc_paths`` (``/mcp``) a refusal is a JSON-RPC error
    (:func:`jsonrpc_refusal`) at the same HTTP status; a body refused to a browser (it accepts
    ``text/html``, outside ``/v1``: a dashboard form) is ``html_page``'s answer; anything else
    gets the HTTP API's error envelope."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        head: HeadLimits | None = None,
        jsonrpc_paths: tuple[str, ...] = (),
        html_page: HtmlPage | None = None,
        send_paths: tuple[str, ...] = (),
        send_max_bytes: int = 0,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        # POSTs whose body may carry attachments (the sends, and /mcp's send_message): a larger
        # cap, still enforced before the body is read whole. Patterns of whole paths.
        self.send_paths = (
            re.compile("|".join(f"(?:{p})" for p in send_paths)) if send_paths else None
        )
        self.send_max_bytes = max(send_max_bytes, max_bytes)
        self.head = head
        self.jsonrpc_paths = frozenset(jsonrpc_paths)
        self.html_page = html_page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.head is not None:
            refused = self.head.check(scope)
            if refused is not None:
                await self._send_error(scope, send, 431, CODE_TOO_LARGE, refused)
                return
        if _unstorable_url(scope):
            await self._send_error(
                scope, send, 422, "validation_error", "The URL must not contain NUL characters."
            )
            return
        max_bytes = self._max_bytes_of(scope)
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > max_bytes:
                    await self._too_large(scope, send, max_bytes)
                    return
        if max_bytes > self.max_bytes:  # a send: what passes the usual cap is for attachments
            body = await _read_whole(receive, max_bytes)
            if body is None:
                await self._too_large(scope, send, max_bytes)
                return
            if len(body) > self.max_bytes + _attachment_bytes(body):
                await self._too_large(scope, send, self.max_bytes)
                return
            receive = _replay(body)
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > max_bytes:
                    raise BodyTooLarge(max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._too_large(scope, send, max_bytes)

    def _max_bytes_of(self, scope: Scope) -> int:
        sends = self.send_paths
        if sends is not None and scope.get("method") == "POST" and sends.fullmatch(scope["path"]):
            return self.send_max_bytes
        return self.max_bytes

    async def _too_large(self, scope: Scope, send: Send, max_bytes: int) -> None:
        error = PayloadTooLarge(f"The request body is larger than {max_bytes} bytes.")
        if self.html_page is not None and _from_a_browser(scope):
            page = await self.html_page(Request(scope), error.message)
            await page(scope, _no_body, send)
            return
        await self._send_error(scope, send, error.status, error.code, error.message)

    async def _send_error(
        self, scope: Scope, send: Send, status: int, code: str, message: str
    ) -> None:
        body: dict[str, Any]
        if scope.get("path") in self.jsonrpc_paths:
            body = jsonrpc_refusal(code, message)
        else:
            body = {"error": {"code": code, "message": message}}
        raw = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(raw)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": raw})
