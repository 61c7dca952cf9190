"""The MCP tools' backend for ``/mcp`` (Streamable HTTP, on the server): the HTTP routes' service
calls, in this process (see :mod:`inbots.mcp.backends`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

import anyio
import anyio.to_thread
from pydantic import BaseModel
from sqlalchemy.exc import DataError

from inbots.agents import keys, sessions
from inbots.agents import service as agents
from inbots.agents.schemas import BriefUpdate, Directory, KeyList, SessionList
from inbots.caller import Caller
from inbots.config import Settings
from inbots.db.engine import Database
from inbots.db.uow import UnitOfWork, run_unit
from inbots.deliveries import service as deliveries
from inbots.deliveries import wait
from inbots.deliveries.schemas import AckRequest
from inbots.dispatch.effects import Dispatch
from inbots.errors import Invalid
from inbots.mcp.backends import InboxQuery, Json
from inbots.messages import service as messages
from inbots.messages.schemas import DirectMessageCreate, MessageCreate
from inbots.search import service as search
from inbots.search.schemas import SearchQuery
from inbots.threads import service as threads
from inbots.threads.schemas import ThreadCreate, ThreadList

T = TypeVar("T")
P = ParamSpec("P")


def _json(model: BaseModel) -> Json:
    return model.model_dump(mode="json")


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
        if acknowledge is None and note is None:
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

    async def search_messages(self, request: SearchQuery) -> Json:
        return _json(await self._run(search.search, request))

    async def list_keys(self) -> Json:
        return _json(KeyList(items=await self._run(keys.list_keys, None)))

    async def list_sessions(self) -> Json:
        return _json(SessionList(items=await self._run(sessions.list_sessions, None)))

    async def read_brief(self, username: str) -> Json:
        return _json(await self._run(agents.read_brief, username))

    async def set_brief(self, text: str) -> Json:
        return _json(await self._run(agents.set_own_brief, BriefUpdate(brief=text)))

    async def mark_working(self, ids: list[str], note: str | None) -> Json:
        return _json(await self._run(deliveries.mark_working, ids, note))
