"""What the MCP tools call. One interface, two implementations:

- :class:`LocalBackend` (Streamable HTTP at ``/mcp``) runs the same service functions as the HTTP
  routes, each in its own unit of work on a worker thread, with the same read/write modes.
- :class:`HttpBackend` (``inbots mcp`` over stdio) calls those HTTP routes with the agent's key.

Both answer with the JSON the HTTP API would send (same field names, RFC 3339 times) and raise
:class:`~inbots.errors.InbotsError` carrying the HTTP error's sentence, so a tool cannot tell them
apart.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar
from urllib.parse import quote

import anyio
import anyio.to_thread
import httpx
from pydantic import BaseModel
from sqlalchemy.exc import DataError

from inbots import __version__
from inbots.agents import service as agents
from inbots.agents.schemas import BriefUpdate, Directory
from inbots.auth.service import Caller
from inbots.config import Settings
from inbots.db.engine import Database
from inbots.db.uow import UnitOfWork, run_unit
from inbots.deliveries import service as deliveries
from inbots.deliveries import wait
from inbots.deliveries.schemas import AckRequest
from inbots.dispatch.effects import Dispatch
from inbots.errors import AlreadyAcknowledged, InbotsError, Invalid, NotFound, not_found
from inbots.kit.paging import clamp_limit
from inbots.limits import Limits
from inbots.messages import schemas as messages_schemas
from inbots.messages import service as messages
from inbots.messages.models import URGENT
from inbots.messages.schemas import DirectMessageCreate, MessageCreate
from inbots.threads import service as threads
from inbots.threads.schemas import ThreadCreate, ThreadList

Json = dict[str, Any]
T = TypeVar("T")
P = ParamSpec("P")


class Backend(Protocol):
    """One agent's view of Inbots. Every method answers the HTTP API's JSON for that call."""

    async def whoami(self) -> Json: ...
    async def list_agents(self, query: str | None, active_only: bool) -> Json: ...
    async def list_threads(self, ref: str | None, query: str | None) -> Json: ...
    async def open_thread(self, request: ThreadCreate) -> Json: ...
    async def add_participant(self, thread_id: str, username: str) -> Json: ...
    async def send_message(
        self, thread_id: str, request: MessageCreate, idempotency_key: str | None
    ) -> Json: ...
    async def send_direct(
        self, request: DirectMessageCreate, idempotency_key: str | None
    ) -> Json: ...
    async def check_inbox(self, query: InboxQuery) -> Json: ...
    async def read_message(
        self, ident: str, acknowledge: str | None = None, note: str | None = None
    ) -> Json: ...
    async def read_thread(
        self, thread_id: str, since: str | None, limit: int | None, cursor: str | None
    ) -> Json: ...
    async def acknowledge(self, request: AckRequest) -> Json: ...
    async def wait_for_mail(self, timeout_seconds: float | None, receipts: bool) -> Json: ...
    async def check_sent(
        self, state: str | None, thread_id: str | None, cursor: str | None
    ) -> Json: ...
    async def request_close(self, thread_id: str) -> Json: ...
    async def read_brief(self, username: str) -> Json: ...
    async def set_brief(self, text: str) -> Json: ...
    async def mark_working(self, ids: list[str], note: str | None) -> Json: ...


@dataclass(frozen=True)
class InboxQuery:
    """``check_inbox``'s arguments (the page of ``GET /v1/inbox`` it asks for)."""

    limit: int | None = None
    cursor: str | None = None
    include_bodies: bool = False
    status: str | None = None
    urgent_only: bool = False

    @property
    def include(self) -> str | None:
        return "body" if self.include_bodies else None

    @property
    def priority(self) -> str | None:
        return URGENT if self.urgent_only else None


def _json(model: BaseModel) -> Json:
    return model.model_dump(mode="json")


def wait_seconds(raw: float | None, default: float, maximum: float) -> float:
    """The long-poll rule: missing or not a number means the default; 1 s at least; capped."""
    value = default if raw is None or math.isnan(raw) else raw
    return min(max(value, 1.0), maximum)


class LocalBackend:
    """The caller's tools run in this process: the HTTP routes' service calls, one unit of work
    each, on a worker thread (the event loop never blocks on the database)."""

    def __init__(
        self, db: Database, dispatch: Dispatch, settings: Settings, caller: Caller
    ) -> None:
        self.db = db
        self.dispatch = dispatch
        self.settings = settings
        self.caller = caller

    async def _run(
        self,
        fn: Callable[Concatenate[UnitOfWork, Caller, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        call = functools.partial(run_unit, self.db, self.dispatch, fn, self.caller, *args, **kwargs)
        try:
            return await anyio.to_thread.run_sync(call)
        except DataError:
            # As the HTTP layer answers it: a value the database cannot hold is still input.
            raise Invalid("A value in the request cannot be stored.") from None

    async def whoami(self) -> Json:
        return _json(await self._run(agents.me))

    async def list_agents(self, query: str | None, active_only: bool) -> Json:
        found = await self._run(agents.directory, query, active_only)
        return _json(Directory(items=found))

    async def list_threads(self, ref: str | None, query: str | None) -> Json:
        found = await self._run(threads.list_threads, None, None, ref=ref, query=query)
        return _json(ThreadList(items=found))

    async def open_thread(self, request: ThreadCreate) -> Json:
        return _json(await self._run(threads.open_thread, request))

    async def add_participant(self, thread_id: str, username: str) -> Json:
        return _json(await self._run(threads.add_participant, thread_id, username))

    async def send_message(
        self, thread_id: str, request: MessageCreate, idempotency_key: str | None
    ) -> Json:
        return _json(await self._run(messages.send_message, thread_id, request, idempotency_key))

    async def send_direct(self, request: DirectMessageCreate, idempotency_key: str | None) -> Json:
        return _json(await self._run(messages.send_direct, request, idempotency_key))

    async def check_inbox(self, query: InboxQuery) -> Json:
        s = self.settings
        inbox = await self._run(
            deliveries.inbox,
            query.limit,
            cursor=query.cursor,
            include=query.include,
            status=query.status,
            priority=query.priority,
            maximum=s.check_inbox_max,
            default=s.check_inbox_default,
        )
        return _json(inbox)

    async def read_message(
        self, ident: str, acknowledge: str | None = None, note: str | None = None
    ) -> Json:
        if acknowledge is None:
            return _json(await self._run(messages.read_message, ident))
        return _json(await self._run(messages.read_and_acknowledge, ident, acknowledge, note))

    async def read_thread(
        self, thread_id: str, since: str | None, limit: int | None, cursor: str | None
    ) -> Json:
        found = await self._run(messages.history, thread_id, since, limit, cursor)
        return _json(found)

    async def acknowledge(self, request: AckRequest) -> Json:
        return _json(await self._run(deliveries.acknowledge, request))

    async def wait_for_mail(self, timeout_seconds: float | None, receipts: bool) -> Json:
        """As ``GET /v1/inbox/wait``: sleeps on the wake-up hub's event between checks, so the
        wait holds neither a database connection nor a thread."""
        seconds = wait.wait_seconds(timeout_seconds, self.settings)
        hub = self.dispatch.wakeups
        found = await wait.wait_for_mail(self._run, hub, self.caller, seconds, receipts=receipts)
        return _json(found)

    async def check_sent(
        self, state: str | None, thread_id: str | None, cursor: str | None
    ) -> Json:
        return _json(await self._run(messages.outbox, state, thread_id, None, cursor))

    async def request_close(self, thread_id: str) -> Json:
        return _json(await self._run(threads.request_close, thread_id))

    async def read_brief(self, username: str) -> Json:
        return _json(await self._run(agents.read_brief, username))

    async def set_brief(self, text: str) -> Json:
        return _json(await self._run(agents.set_own_brief, BriefUpdate(brief=text)))

    async def mark_working(self, ids: list[str], note: str | None) -> Json:
        return _json(await self._run(deliveries.mark_working, ids, note))


def _error_classes() -> dict[str, type[InbotsError]]:
    found: dict[str, type[InbotsError]] = {}
    pending: list[type[InbotsError]] = [InbotsError]
    while pending:
        cls = pending.pop()
        found.setdefault(cls.code, cls)
        pending.extend(cls.__subclasses__())
    return found


_SAFE_ID = re.compile(r"[A-Za-z0-9_-]+")


def _segment(ident: str, what: str) -> str:
    """An id for a URL path. Ids are letters, digits and underscores; anything else names nothing
    (and could change the path), so it answers not found here, as the service would."""
    if not _SAFE_ID.fullmatch(ident):
        raise not_found(what, ident)
    return quote(ident, safe="")


class HttpBackend:
    """The caller's tools call the REST API of a running Inbots with the agent's key."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        limits: Limits | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.limits = limits or Limits.defaults()
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self._errors = _error_classes()
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers={
                "Authorization": f"Bearer {api_key}",
                "User-Agent": f"inbots-mcp/{__version__}",
            },
            # A long-poll answers within its capped timeout; allow it that long plus slack.
            timeout=httpx.Timeout(30.0, read=self.limits.wait_max_seconds + 30.0),
            transport=transport,
        )

    async def __aenter__(self) -> HttpBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Json | None = None,
        headers: dict[str, str] | None = None,
    ) -> Json:
        try:
            response = await self._client.request(
                method, "/v1" + path, params=params, json=body, headers=headers
            )
        except httpx.TimeoutException:
            raise InbotsError(
                f"Inbots at {self.base_url} did not answer in time; the call may or may not have "
                "taken effect. Check before repeating it (send_message: repeat with the same "
                "idempotency_key)."
            ) from None
        except httpx.HTTPError as exc:
            raise InbotsError(
                f"Could not reach Inbots at {self.base_url} ({type(exc).__name__}); check that "
                "the server is running and that INBOTS_URL points at it."
            ) from None
        if response.is_success:
            answer: Json = response.json()
            return answer
        raise self._error(response)

    def _error(self, response: httpx.Response) -> InbotsError:
        try:
            error = response.json()["error"]
            code, message = str(error["code"]), str(error["message"])
        except (ValueError, KeyError, TypeError):
            return InbotsError(
                f"Inbots at {self.base_url} answered HTTP {response.status_code} without an "
                "error message."
            )
        cls = self._errors.get(code, InbotsError)
        field = error.get("field")
        return cls(message, field=field if isinstance(field, str) else None)

    async def server_limits(self) -> Limits:
        """The limits the server enforces (``GET /v1/limits``); InbotsError if it cannot tell."""
        return Limits.from_answer(await self._call("GET", "/limits"))

    async def whoami(self) -> Json:
        return await self._call("GET", "/me")

    async def list_agents(self, query: str | None, active_only: bool) -> Json:
        params = {"query": query} if query is not None else {}
        if active_only:
            params["active"] = "true"
        return await self._call("GET", "/directory", params=params)

    async def list_threads(self, ref: str | None, query: str | None) -> Json:
        params = {name: value for name, value in (("ref", ref), ("query", query)) if value}
        page = await self._call("GET", "/threads", params=params)
        return {"items": page.get("items", [])}  # the tool's shape: the first page, no cursor

    async def open_thread(self, request: ThreadCreate) -> Json:
        return await self._call("POST", "/threads", body=request.model_dump(exclude_none=True))

    async def add_participant(self, thread_id: str, username: str) -> Json:
        path = f"/threads/{_segment(thread_id, 'thread')}/participants"
        return await self._call("POST", path, body={"username": username})

    async def send_message(
        self, thread_id: str, request: MessageCreate, idempotency_key: str | None
    ) -> Json:
        # Checked before it goes out: a key the rule refuses may not even be sendable as a header.
        key = messages_schemas.idempotency_key(idempotency_key, self.limits.idempotency_key_max)
        headers = {"Idempotency-Key": key} if key is not None else {}
        path = f"/threads/{_segment(thread_id, 'thread')}/messages"
        body = request.model_dump(exclude_none=True)
        return await self._call("POST", path, body=body, headers=headers)

    async def send_direct(self, request: DirectMessageCreate, idempotency_key: str | None) -> Json:
        key = messages_schemas.idempotency_key(idempotency_key, self.limits.idempotency_key_max)
        headers = {"Idempotency-Key": key} if key is not None else {}
        body = request.model_dump(exclude_none=True)
        return await self._call("POST", "/messages", body=body, headers=headers)

    async def check_inbox(self, query: InboxQuery) -> Json:
        # GET /v1/inbox applies the listing limits; the tool's are narrower, so apply them here.
        limits = self.limits
        count = clamp_limit(query.limit, limits.check_inbox_default, limits.check_inbox_max)
        params = {"limit": str(count)}
        for name, value in (
            ("cursor", query.cursor),
            ("include", query.include),
            ("status", query.status),
            ("priority", query.priority),
        ):
            if value is not None:
                params[name] = value
        return await self._call("GET", "/inbox", params=params)

    async def read_message(
        self, ident: str, acknowledge: str | None = None, note: str | None = None
    ) -> Json:
        params = {"ack": acknowledge} if acknowledge is not None else {}
        if acknowledge is not None and note is not None:
            params["note"] = note
        return await self._call("GET", f"/messages/{_segment(ident, 'message')}", params=params)

    async def read_thread(
        self, thread_id: str, since: str | None, limit: int | None, cursor: str | None
    ) -> Json:
        params = {
            name: str(value)
            for name, value in (("since", since), ("limit", limit), ("cursor", cursor))
            if value is not None
        }
        path = f"/threads/{_segment(thread_id, 'thread')}/messages"
        return await self._call("GET", path, params=params)

    async def acknowledge(self, request: AckRequest) -> Json:
        return await self._call("POST", "/acks", body=request.model_dump(exclude_none=True))

    async def wait_for_mail(self, timeout_seconds: float | None, receipts: bool) -> Json:
        params = {"timeout": str(timeout_seconds)} if timeout_seconds is not None else {}
        if receipts:
            params["events"] = "receipts"
        return await self._call("GET", "/inbox/wait", params=params)

    async def check_sent(
        self, state: str | None, thread_id: str | None, cursor: str | None
    ) -> Json:
        params = {
            name: value
            for name, value in (("state", state), ("thread", thread_id), ("cursor", cursor))
            if value is not None
        }
        return await self._call("GET", "/outbox", params=params)

    async def request_close(self, thread_id: str) -> Json:
        return await self._call("POST", f"/threads/{_segment(thread_id, 'thread')}/close-request")

    async def read_brief(self, username: str) -> Json:
        return await self._call("GET", f"/agents/{_segment(username, 'agent')}/brief")

    async def set_brief(self, text: str) -> Json:
        return await self._call("PUT", "/me/brief", body={"brief": text})

    async def mark_working(self, ids: list[str], note: str | None) -> Json:
        """``POST /v1/deliveries/{id}/working`` for each id, answered per id as the service's
        batch is (a 404 or 409 for one id does not stop the others)."""
        wanted = list(dict.fromkeys(ids))
        if not 1 <= len(wanted) <= self.limits.ack_batch_max:
            raise Invalid(
                f"ids must hold 1 to {self.limits.ack_batch_max} ids (got {len(wanted)}).",
                field="ids",
            )
        body = {"note": note} if note is not None else {}
        working: list[Json] = []
        acked: list[str] = []
        missing: list[str] = []
        for ident in wanted:
            try:
                path = f"/deliveries/{_segment(ident, 'delivery')}/working"
                working.append(await self._call("POST", path, body=body))
            except AlreadyAcknowledged:
                acked.append(ident)
            except NotFound:
                missing.append(ident)
        return {"working": working, "already_acknowledged": acked, "not_found": missing}
