"""What the MCP tools call: one interface, :class:`Backend`, and two implementations, each in
its own module so that ``inbots mcp`` (the stdio bridge) never imports the server side:

- :class:`inbots.mcp.local.LocalBackend` (Streamable HTTP at ``/mcp``) runs the same service
  functions as the HTTP routes, each in its own unit of work on a worker thread, with the same
  read/write modes.
- :class:`inbots.mcp.remote.HttpBackend` (``inbots mcp`` over stdio) calls those HTTP routes with
  the agent's key, through the package's own client (:class:`inbots.client.AsyncClient`).

Both answer with the JSON the HTTP API would send (same field names, RFC 3339 times) and raise
:class:`~inbots.errors.InbotsError` carrying the HTTP error's sentence, so a tool cannot tell them
apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from inbots.deliveries.schemas import AckRequest
from inbots.messages.schemas import DirectMessageCreate, MessageCreate
from inbots.search.schemas import SearchQuery
from inbots.threads.schemas import ThreadCreate
from inbots.vocabulary import URGENT

Json = dict[str, Any]


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
    async def search_messages(self, request: SearchQuery) -> Json: ...
    async def list_keys(self) -> Json: ...
    async def list_sessions(self) -> Json: ...
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
