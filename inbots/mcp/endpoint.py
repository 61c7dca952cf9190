"""``/mcp``: the agent tools over Streamable HTTP, on the same server as the HTTP API.

:class:`McpEndpoint` is a plain ASGI app. It resolves ``Authorization: Bearer agt_…`` to one agent
*before* the MCP SDK sees the request: a missing, malformed, unknown or archived key is answered
``401`` (with ``WWW-Authenticate: Bearer``) and the operator token ``403`` (it is not an agent),
in the HTTP API's error envelope. The caller is stored in the ASGI scope, where each tool call
finds it through the SDK's request context; no tool takes the caller's id.

The SDK's session manager runs *stateless* with JSON responses: every POST is authenticated and
served on its own, so nothing is kept between requests and any web process can answer any call.
GET (a server-push stream) and DELETE (ending a session) are answered 405, as the transport
allows: there is nothing to push and no session to end.

Sessions of the agent (``GET /v1/me/sessions``) are only bookkeeping: the answer to an
``initialize`` carries an ``Mcp-Session-Id`` (``ses_…``) that clients send back, and each request
notes that session (or, for clients of the stateless protocol era, one session per clientInfo
name/version; or the ``X-Inbots-Session`` label when the client sends one) with the clientInfo
the request carries (``inbots mcp``, which relays a harness's messages here, is listed as
``inbots-mcp/<version>``, its User-Agent). Nothing else depends on it: a request without one is
served the same.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.to_thread
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from inbots.auth import service as auth
from inbots.caller import Caller, SessionSeen
from inbots.config import Settings
from inbots.db.engine import Database
from inbots.dispatch.effects import Dispatch
from inbots.errors import Forbidden, InbotsError, Invalid, PayloadTooLarge, Unauthorized
from inbots.kit.ids import new_id
from inbots.limits import Limits
from inbots.mcp.stdio import TOOL_SETS, TOOLS_HEADER, USER_AGENT_PREFIX
from inbots.web.errors import envelope, error_response
from inbots.web.limits import BodyTooLarge, jsonrpc_refusal

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from inbots.mcp.spec import ToolContext

MCP_PATH = "/mcp"
MCP_SESSION_HEADER = "mcp-session-id"
CALLER = "inbots.caller"
"""The ASGI scope key holding the authenticated :class:`~inbots.caller.Caller`."""
ALL_TOOLS = "inbots.all_tools"
"""The ASGI scope key saying whether the request's ``tools/list`` shows every tool."""


def _client_of(body: bytes) -> tuple[str | None, str | None]:
    """The JSON-RPC method of a request body and the client it names (``name/version``, from
    ``initialize``'s clientInfo or the stateless era's ``_meta``); Nones when there is none."""
    try:
        data = json.loads(body) if body else None
    except (ValueError, RecursionError):  # the SDK answers it with its JSON-RPC parse error
        return None, None
    if isinstance(data, list):
        data = data[0] if data else None
    if not isinstance(data, dict):
        return None, None
    method = data.get("method")
    params = data.get("params")
    info = None
    if isinstance(params, dict):
        from mcp_types import CLIENT_INFO_META_KEY  # loaded with the SDK by the first request

        info = params.get("clientInfo")
        meta = params.get("_meta")
        if info is None and isinstance(meta, dict):
            info = meta.get(CLIENT_INFO_META_KEY)
    client = None
    if isinstance(info, dict) and isinstance(info.get("name"), str):
        version = info.get("version")
        client = info["name"] + (f"/{version}" if isinstance(version, str) and version else "")
    return (method if isinstance(method, str) else None), client


class McpEndpoint:
    """The SDK (a few tenths of a second of imports and tool schemas) is loaded by the first
    request to ``/mcp``, not at start-up: most processes never serve one."""

    def __init__(self, db: Database, dispatch: Dispatch, settings: Settings) -> None:
        self.db = db
        self.dispatch = dispatch
        self.settings = settings
        self._tasks: anyio.abc.TaskGroup | None = None
        self._stop: anyio.Event | None = None
        self._starting: anyio.Lock | None = None
        self._manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Keep the SDK's session manager (once started) running; enter this inside the app's
        lifespan."""
        stop = self._stop = anyio.Event()
        self._starting = anyio.Lock()
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            try:
                yield
            finally:
                self._tasks = None
                self._starting = None
                self._manager = None
                stop.set()

    async def _started(self) -> StreamableHTTPSessionManager | None:
        """The running session manager, started by the first caller; None outside the lifespan."""
        starting = self._starting
        if starting is None:
            return None
        async with starting:
            tasks = self._tasks
            if self._manager is None and tasks is not None:
                self._manager = await tasks.start(self._run_manager)
        return self._manager

    async def _run_manager(self, *, task_status: anyio.abc.TaskStatus[Any]) -> None:
        stop = self._stop
        manager = await anyio.to_thread.run_sync(self._new_manager)
        async with manager.run():
            task_status.started(manager)
            if stop is not None:
                await stop.wait()

    def _new_manager(self) -> StreamableHTTPSessionManager:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        from inbots.mcp.server import build_server

        server = build_server(self._context_for, Limits.of(self.settings), self._wants_all)
        return StreamableHTTPSessionManager(app=server, stateless=True, json_response=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = None
        if scope["type"] == "http":
            manager = self._manager or await self._started()
        if manager is None:
            response = envelope(
                503,
                "service_unavailable",
                "The MCP endpoint is not running; try again in a moment.",
                headers={"Retry-After": "1"},
            )
            await response(scope, receive, send)
            return
        headers = Headers(scope=scope)
        received: list[Message] = []
        if scope["method"] == "POST":
            try:
                while True:  # the body is capped by the BodyLimit middleware
                    message = await receive()
                    received.append(message)
                    if message["type"] != "http.request" or not message.get("more_body", False):
                        break
            except BodyTooLarge as too_large:  # a body without Content-Length, over the cap
                refusal = jsonrpc_refusal(PayloadTooLarge.code, str(too_large.detail))
                await JSONResponse(refusal, status_code=too_large.status_code)(scope, receive, send)
                return
        method, client = _client_of(b"".join(m.get("body", b"") for m in received))
        mcp_key = headers.get(MCP_SESSION_HEADER)
        minted = None
        if mcp_key is None or not auth.MCP_SESSION_ID.fullmatch(mcp_key):
            mcp_key = None
            if method == "initialize":
                mcp_key = minted = new_id("ses")
            elif client is not None:
                mcp_key = f"client:{client}"

        # ``inbots mcp`` relays a harness's messages as they are: its session names the bridge
        # (``inbots-mcp/<version>``), as it did when the bridge called the HTTP API.
        agent = headers.get("user-agent", "")
        seen_as = agent if agent.startswith(USER_AGENT_PREFIX) else client

        def session() -> SessionSeen | None:
            return auth.session_seen(
                self.settings,
                headers.get(auth.SESSION_HEADER),
                mcp_key=mcp_key,
                mcp_client=seen_as,
                minted=minted is not None,
            )

        try:
            caller = await anyio.to_thread.run_sync(
                self._authenticate,
                auth.one_authorization(headers.getlist("authorization")),
                session,
            )
            everything = self._tool_set(headers.get(TOOLS_HEADER)) == "all"
        except InbotsError as exc:
            await error_response(exc)(scope, receive, send)
            return
        if scope["method"] != "POST":
            # Stateless: no session to resume or delete, and nothing is ever pushed on a GET
            # stream. The transport spec allows 405 for both; clients then just POST.
            response = envelope(
                405,
                "method_not_allowed",
                "The MCP endpoint takes JSON-RPC messages by POST; it offers no GET stream "
                "and no sessions to delete.",
                headers={"Allow": "POST"},
            )
            await response(scope, receive, send)
            return
        scope[CALLER] = caller
        scope[ALL_TOOLS] = everything

        async def replay() -> Message:
            return received.pop(0) if received else await receive()

        async def send_with_session(message: Message) -> None:
            if minted is not None and message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": [
                        *message.get("headers", []),
                        (MCP_SESSION_HEADER.encode(), minted.encode()),
                    ],
                }
            await send(message)

        await manager.handle_request(scope, replay, send_with_session)

    def _authenticate(
        self, authorization: str | None, session: Callable[[], SessionSeen | None]
    ) -> Caller:
        """The agent behind the bearer key, as the HTTP API resolves it (and its activity and
        session stamped), or 401; the operator token is 403."""
        caller = auth.resolve(self.db, self.dispatch, authorization, session)
        if caller.is_operator:
            raise Forbidden(
                "The MCP tools are for agents: connect with an agent key (agt_…), not the "
                "operator token."
            )
        return caller

    def _tool_set(self, asked: str | None) -> str:
        """The tools this request lists: its ``X-Inbots-Tools`` header, else the setting."""
        if asked is None:
            return self.settings.mcp_tools
        if asked.strip().lower() not in TOOL_SETS:
            raise Invalid(
                f"The {TOOLS_HEADER} header takes default or all (got {asked[:40]!r}).",
                field=TOOLS_HEADER,
            )
        return asked.strip().lower()

    def _wants_all(self, ctx: ServerRequestContext[Any, Any]) -> bool:
        request = ctx.request
        if request is None:
            return self.settings.mcp_tools == "all"
        return bool(request.scope.get(ALL_TOOLS, self.settings.mcp_tools == "all"))

    def _context_for(self, ctx: ServerRequestContext[Any, Any]) -> ToolContext:
        from inbots.mcp.spec import ToolContext

        request = ctx.request
        caller = request.scope.get(CALLER) if request is not None else None
        if not isinstance(caller, Caller):  # cannot happen behind __call__; refuse, never guess
            raise Unauthorized("Send an Authorization: Bearer <token> header.")
        return ToolContext(self.db, self.dispatch, self.settings, caller)
