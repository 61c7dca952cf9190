"""``inbots mcp``: a stdio relay to the server's own ``/mcp``, for harnesses that launch a command.

Each JSON-RPC message read from stdin (one a line) is posted as it is to ``{INBOTS_URL}/mcp``
with the agent's key (``Authorization: Bearer``), ``X-Inbots-Session`` and ``User-Agent:
inbots-mcp/<version>``, and the endpoint's answer (it is stateless and answers JSON) is written
to stdout as it came, one line. A notification, or a response, gets no answer (the endpoint
answers ``202`` with no body). The ``Mcp-Session-Id`` that the answer to ``initialize`` carries,
and the protocol version it settles, go with every later request; a request of the per-request
protocol (2026) carries the headers the transport routes it by (``MCP-Protocol-Version``,
``Mcp-Method``, ``Mcp-Name``), read from its own body. So the tools, their descriptions, schemas,
answers and error sentences are ``/mcp``'s, byte for byte: nothing here knows a tool.

Each message is handled in a task of its own (a ``wait_for_mail`` holds its POST for up to a
minute while other calls go on) over one httpx client, whose connection is kept and reused. A
``notifications/cancelled`` aborts the POST of the request it names, which then gets no answer.

Before serving, the relay asks the server once who the key is (``GET /v1/me``,
:meth:`Relay.check`): a key the server refuses (``401``/``403`` in Inbots' error envelope) or a
URL that answers but not as Inbots does is :class:`Refused`, one line naming ``INBOTS_API_KEY`` or
``INBOTS_URL`` (``inbots mcp`` exits 2 before any tool is listed); a server that cannot be reached
(or a proxy answering ``502``–``504`` for it) is only down, so the relay starts with one warning
line: while the server cannot be reached it answers ``initialize`` itself (the client's protocol
version echoed, ``serverInfo.name`` ``inbots``, the tools capability), so the harness's session
starts, and forwards everything else as usual, each call answering the error below until the
server is up.

What the relay answers itself, as a JSON-RPC error of the request (code ``-32000``, ``data.code``
saying which; one line on stderr too): the server cannot be reached or does not answer in time,
answers something that is not JSON (a web page: ``INBOTS_URL`` is not an Inbots server), or
refuses the request at the HTTP layer (``401`` for a key it does not know), with its sentence.

Why not the SDK's pieces: ``mcp.client.streamable_http`` sends the typed messages of a
``ClientSession``, which stamps the per-request headers, and brings SSE streams, resumption and
a GET stream that a stateless JSON endpoint never uses: it does not forward a raw message as it
is, so the HTTP side is httpx. ``mcp.server.stdio.stdio_server`` would fit, but it parses every
line into the SDK's models (a relay needs only a message's ``id`` and ``method``) and importing
it costs about a second of CPU (1.1 s against 0.2 s for httpx) on every agent session's start.
The one thing of it the relay needs is stdout kept for the protocol: :func:`claim_stdout`.

This module imports httpx, anyio and plain code only: no server side (no SQLAlchemy, no
services) and no MCP SDK, so ``inbots mcp`` starts quickly. Enrolment is :mod:`inbots.mcp.enrol`.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any, BinaryIO

import anyio
import anyio.to_thread
import httpx

from inbots import __version__

USER_AGENT_PREFIX = "inbots-mcp/"
USER_AGENT = f"{USER_AGENT_PREFIX}{__version__}"
SESSION_HEADER = "X-Inbots-Session"
# Which tools /mcp lists for this request: "all" (the rarely used account tools too) or
# "default"; without it, the server's INBOTS_MCP_TOOLS. ``inbots mcp --tools all`` sends it.
TOOLS_HEADER = "X-Inbots-Tools"
TOOL_SETS = ("default", "all")

# The Streamable HTTP transport's headers, and the per-request protocol's envelope key (as in
# mcp.shared.inbound and mcp_types; tests/test_mcp_stdio.py checks they still agree).
MCP_SESSION_ID = "Mcp-Session-Id"
MCP_PROTOCOL_VERSION = "MCP-Protocol-Version"
MCP_METHOD = "Mcp-Method"
MCP_NAME = "Mcp-Name"
PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
NAME_BEARING_METHODS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

RELAY_ERROR = -32000  # JSON-RPC's range for implementation-defined server errors
# A call answers within seconds; a long-poll within its timeout_seconds (at most the server's
# INBOTS_WAIT_MAX_SECONDS, 60 by default): allow that much and some.
READ_SECONDS = 90.0
WAIT_SLACK_SECONDS = 30.0
# When stdin closes, what is in flight may finish for this long before it is dropped.
EOF_GRACE_SECONDS = 2.0
# The check before serving: a server that has not answered by then counts as down.
CHECK_SECONDS = 10.0

Write = Callable[[bytes], Awaitable[None]]


class Refused(Exception):
    """``inbots mcp`` must not start: its one line names the variable to fix."""


def server_url(url: str) -> str:
    """The server's base URL: what ``INBOTS_URL`` gives, without a trailing ``/``, ``/v1`` or
    ``/mcp``."""
    return url.rstrip("/").removesuffix("/mcp").removesuffix("/v1")


def _decode(line: bytes) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None  # forwarded as it is: the endpoint answers its parse error


def _method(message: Any) -> str | None:
    """The method of a request or notification, or None."""
    method = message.get("method") if isinstance(message, dict) else None
    return method if isinstance(method, str) else None


def _request_id(message: Any) -> Any:
    """The id of a request (which the client awaits an answer to), or None for anything else."""
    if isinstance(message, dict) and isinstance(message.get("method"), str):
        return message.get("id")
    return None


def _header_value(value: str) -> str:
    """A value as an HTTP header carries it: verbatim when it is plain visible ASCII, else in the
    transport's ``=?base64?…?=`` form (as ``mcp.shared.inbound.encode_header_value``)."""
    plain = all(" " <= c <= "~" for c in value) and value == value.strip()
    if plain and not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode('ascii')}?="


class Relay:
    """Posts JSON-RPC messages to ``{url}/mcp`` as the agent of ``api_key`` and hands back the
    answers (see the module's docstring). :meth:`serve` runs it over any pair of line streams:
    stdin and stdout in ``inbots mcp``, memory streams in the tests."""

    def __init__(
        self,
        url: str,
        api_key: str,
        session: str | None = None,
        *,
        tools: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.server = server_url(url)
        headers = {
            "Authorization": f"Bearer {api_key}",
            "User-Agent": USER_AGENT,
            "Accept": "application/json",  # JSON answers only: the relay reads no SSE stream
            "Content-Type": "application/json",
        }
        if session:
            headers[SESSION_HEADER] = session  # the agent's sessions list the bridge by it
        if tools:
            headers[TOOLS_HEADER] = tools  # "all": the rarely used tools are listed too
        self._http = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(30.0, read=READ_SECONDS),
            transport=transport,
        )
        self._session_id: str | None = None  # from the answer to initialize
        self._version: str | None = None  # the protocol version initialize settled
        self._running: dict[str, anyio.CancelScope] = {}  # requests in flight, by id

    async def __aenter__(self) -> Relay:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()

    async def check(self) -> str | None:
        """Ask the server once who the key is (``GET /v1/me``) before serving: None when it
        answers as Inbots does, with the agent; a warning (to print, then serve) when it is only
        down; :class:`Refused` when the key is refused or the URL is not an Inbots server."""
        try:
            response = await self._http.get(f"{self.server}/v1/me", timeout=CHECK_SECONDS)
        except httpx.TimeoutException:
            return (
                f"Inbots at {self.server} did not answer within {CHECK_SECONDS:g} s; starting "
                "anyway, and each call says so until it answers."
            )
        except httpx.HTTPError as exc:
            return (
                f"could not reach Inbots at {self.server} ({type(exc).__name__}); starting "
                "anyway, and each call says so until it is up."
            )
        status, answer = response.status_code, _decode(response.content)
        if status == 200 and isinstance(answer, dict) and isinstance(answer.get("username"), str):
            return None
        error = answer.get("error") if isinstance(answer, dict) else None
        if isinstance(error, dict) and isinstance(error.get("code"), str):  # Inbots' envelope
            said = str(error.get("message") or error["code"])
            if status in (401, 403):
                raise Refused(f"INBOTS_API_KEY is refused by Inbots at {self.server}: {said}")
            return f"Inbots at {self.server} answered HTTP {status}: {said} Starting anyway."
        if status in (502, 503, 504):  # a proxy in front of a server that is down
            return (
                f"Inbots at {self.server} is not answering (HTTP {status}); starting anyway, "
                "and each call says so until it is up."
            )
        kind = response.headers.get("content-type", "").split(";")[0] or "no content type"
        raise Refused(
            f"INBOTS_URL ({self.server}) is not an Inbots server: GET /v1/me answered HTTP "
            f"{status} with {kind}. Give the base URL of Inbots, like http://127.0.0.1:8000."
        )

    async def serve(self, lines: AsyncIterable[bytes], write: Write) -> None:
        """Relay every message of ``lines`` (one JSON-RPC message each), each in a task of its
        own, and ``write`` each answer (one line, without its newline), until ``lines`` ends."""
        writing = anyio.Lock()

        async def relay(line: bytes, message: Any, scope: anyio.CancelScope) -> None:
            with scope:
                answer = await self._forward(line, message)
                if answer is not None:
                    async with writing:
                        await write(answer)
            key = json.dumps(_request_id(message))
            if self._running.get(key) is scope:
                del self._running[key]

        async with anyio.create_task_group() as tasks:
            async for line in lines:
                line = line.strip()
                if not line:
                    continue
                message = _decode(line)
                if self._cancelled(message):
                    continue
                scope = anyio.CancelScope()
                if _request_id(message) is not None:
                    self._running[json.dumps(message["id"])] = scope
                tasks.start_soon(relay, line, message, scope)
            tasks.cancel_scope.deadline = anyio.current_time() + EOF_GRACE_SECONDS

    def _cancelled(self, message: Any) -> bool:
        """A ``notifications/cancelled`` is the relay's: the POST of the request it names is
        aborted (the stateless endpoint has nothing else to cancel), and that request is not
        answered, as the protocol asks."""
        if not isinstance(message, dict) or message.get("method") != "notifications/cancelled":
            return False
        params = message.get("params")
        if isinstance(params, dict):
            scope = self._running.pop(json.dumps(params.get("requestId")), None)
            if scope is not None:
                scope.cancel()
        return True

    async def _forward(self, line: bytes, message: Any) -> bytes | None:
        """Post one message (``line``, decoded as ``message``: None when it is not JSON) and
        return the line to answer it with, or None when there is nothing to answer."""
        try:
            response = await self._http.post(
                f"{self.server}/mcp",
                content=line,
                headers=self._headers(message),
                timeout=self._timeout(message) or self._http.timeout,
            )
        except httpx.TimeoutException:
            if _method(message) == "initialize" and _request_id(message) is not None:
                return self._initialized_here(message)
            return self._error(
                message,
                "timeout",
                f"Inbots at {self.server} did not answer in time; the call may or may not have "
                "taken effect. Check before repeating it (send_message: repeat with the same "
                "idempotency_key).",
            )
        except httpx.HTTPError as exc:
            if _method(message) == "initialize" and _request_id(message) is not None:
                return self._initialized_here(message)
            return self._error(
                message,
                "unreachable",
                f"Could not reach Inbots at {self.server} ({type(exc).__name__}); check that the "
                "server is running and that INBOTS_URL points at it.",
            )
        return self._answer(message, response)

    def _headers(self, message: Any) -> dict[str, str]:
        headers: dict[str, str] = {}
        if not isinstance(message, dict):
            return headers
        method = message.get("method")
        if method == "initialize":  # a new handshake: no session or version carried over
            return headers
        if self._session_id is not None:
            headers[MCP_SESSION_ID] = self._session_id
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
        if isinstance(version, str) and isinstance(method, str):
            # The per-request protocol: the routing headers mirror the body.
            headers[MCP_PROTOCOL_VERSION] = version
            headers[MCP_METHOD] = method
            name = params.get(NAME_BEARING_METHODS.get(method, "")) if params else None
            if isinstance(name, str):
                headers[MCP_NAME] = _header_value(name)
        elif self._version is not None:
            headers[MCP_PROTOCOL_VERSION] = self._version
        return headers

    @staticmethod
    def _timeout(message: Any) -> httpx.Timeout | None:
        """A tool call that says how long it may wait (``timeout_seconds``) may take that long
        and some; None for the usual timeouts."""
        params = message.get("params") if isinstance(message, dict) else None
        arguments = params.get("arguments") if isinstance(params, dict) else None
        seconds = arguments.get("timeout_seconds") if isinstance(arguments, dict) else None
        if isinstance(seconds, str):
            try:
                seconds = float(seconds)
            except ValueError:
                return None
        if not isinstance(seconds, int | float) or seconds + WAIT_SLACK_SECONDS <= READ_SECONDS:
            return None
        return httpx.Timeout(30.0, read=min(seconds, 86_400.0) + WAIT_SLACK_SECONDS)

    def _answer(self, message: Any, response: httpx.Response) -> bytes | None:
        body = response.content
        if not body.strip():
            if response.is_success:
                return None  # 202: a notification or a response, taken
            return self._error(
                message,
                f"http_{response.status_code}",
                f"Inbots at {self.server} answered HTTP {response.status_code} without a "
                "message; check that INBOTS_URL is the server's base URL.",
                status=response.status_code,
            )
        answer = _decode(body)
        if isinstance(answer, dict) and "jsonrpc" in answer:
            if message is not None and answer.get("method") is None:
                self._settle(message, answer, response)
            request_id = _request_id(message)
            if answer.get("id") is None and request_id is not None:
                # A refusal before the endpoint read the request (a body over the limit): the
                # client is waiting for an answer to this id.
                answer["id"] = request_id
                return json.dumps(answer, ensure_ascii=False).encode()
        elif isinstance(answer, dict) and isinstance(answer.get("error"), dict):
            # The HTTP layer refused it (401 a key the server does not know, 403, 503 …): the
            # HTTP API's error envelope, its sentence as the JSON-RPC error's message.
            error = answer["error"]
            return self._error(
                message,
                str(error.get("code") or f"http_{response.status_code}"),
                str(error.get("message") or f"HTTP {response.status_code}"),
                status=response.status_code,
                retry_after=response.headers.get("retry-after"),
            )
        elif not isinstance(answer, list):
            kind = response.headers.get("content-type", "").split(";")[0] or "an answer"
            return self._error(
                message,
                "not_mcp",
                f"Inbots at {self.server} answered POST /mcp with {kind} that is not MCP "
                f"(HTTP {response.status_code}); is INBOTS_URL the base URL of an Inbots server?",
                status=response.status_code,
            )
        if b"\n" in body or b"\r" in body:  # one message a line
            return json.dumps(answer, ensure_ascii=False).encode()
        return body

    def _initialized_here(self, message: Any) -> bytes:
        """The answer to an ``initialize`` the server cannot take now (it is down): a minimal
        one of the relay's own, so that the harness's session starts; every later request is
        posted as usual (and answered with the server's error until it is up)."""
        params = message.get("params") if isinstance(message, dict) else None
        version = params.get("protocolVersion") if isinstance(params, dict) else None
        self._session_id = None
        self._version = version if isinstance(version, str) else None
        result = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "inbots", "version": __version__},
        }
        return json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()

    def _settle(self, message: Any, answer: dict[str, Any], response: httpx.Response) -> None:
        """What the answer to ``initialize`` settles for the requests after it."""
        if not isinstance(message, dict) or message.get("method") != "initialize":
            return
        result = answer.get("result")
        if not isinstance(result, dict):
            return
        self._session_id = response.headers.get(MCP_SESSION_ID)
        version = result.get("protocolVersion")
        self._version = version if isinstance(version, str) else None

    def _error(
        self,
        message: Any,
        code: str,
        text: str,
        *,
        status: int | None = None,
        retry_after: str | None = None,
    ) -> bytes | None:
        """A JSON-RPC error answering ``message`` with ``text``; None (and the line on stderr
        only) when ``message`` is not a request, which no answer can go to."""
        print(f"inbots mcp: {text}", file=sys.stderr, flush=True)
        request_id = _request_id(message)
        if request_id is None:
            return None
        data: dict[str, Any] = {"code": code}
        if status is not None:
            data["status"] = status
        if retry_after:
            data["retry_after"] = retry_after
        error = {"code": RELAY_ERROR, "message": text, "data": data}
        return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


def claim_stdout() -> BinaryIO:
    """Stdout for the protocol alone: a handle of its own on it, and fd 1 pointed at stderr from
    here on, so that a stray print (or a child's output) cannot break the stream."""
    sys.stdout.flush()
    wire = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    return wire


async def serve_stdio(
    url: str, api_key: str, session: str | None = None, tools: str | None = None
) -> None:
    """Check the server (:meth:`Relay.check`: :class:`Refused` stops here, before anything is
    read), then relay stdin to ``{url}/mcp`` and the answers to stdout until stdin closes."""
    async with Relay(url, api_key, session, tools=tools) as relay:
        warning = await relay.check()
        if warning is not None:
            print(f"inbots mcp: warning: {warning}", file=sys.stderr, flush=True)
        stdout = claim_stdout()
        stdin = anyio.wrap_file(sys.stdin.buffer)

        def write_line(line: bytes) -> None:
            stdout.write(line + b"\n")
            stdout.flush()

        async def write(line: bytes) -> None:  # on a worker thread: a full pipe blocks no request
            await anyio.to_thread.run_sync(write_line, line)

        await relay.serve(stdin, write)


def run(url: str, api_key: str, session: str | None = None, tools: str | None = None) -> None:
    anyio.run(serve_stdio, url, api_key, session, tools)
