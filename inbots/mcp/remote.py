"""The MCP tools' backend for ``inbots mcp`` (stdio): the REST API of a running Inbots, called with
the agent's key (see :mod:`inbots.mcp.backends`). It imports nothing of the server side (no
database, no services), so the bridge starts quickly."""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable
from typing import Any, TypeVar, cast

import httpx
from pydantic import BaseModel

from inbots import __version__, client
from inbots.deliveries.schemas import AckRequest
from inbots.errors import AlreadyAcknowledged, Expired, InbotsError, Invalid, NotFound, not_found
from inbots.kit.paging import clamp_limit
from inbots.limits import Limits
from inbots.mcp.backends import InboxQuery, Json
from inbots.messages import schemas as messages_schemas
from inbots.messages.schemas import DirectMessageCreate, MessageCreate
from inbots.search.schemas import SearchQuery
from inbots.threads.schemas import ThreadCreate

T = TypeVar("T")


def _error_classes() -> dict[str, type[InbotsError]]:
    found: dict[str, type[InbotsError]] = {}
    pending: list[type[InbotsError]] = [InbotsError]
    while pending:
        cls = pending.pop()
        found.setdefault(cls.code, cls)
        pending.extend(cls.__subclasses__())
    return found


_SAFE_ID = re.compile(r"[A-Za-z0-9_-]+")
USER_AGENT = f"inbots-mcp/{__version__}"


def _path_id(ident: str, what: str) -> str:
    """An id for a URL path. Ids are letters, digits and underscores; anything else names nothing
    (and could change the path). The client refuses such an id too, in its own words; the tools
    answer the service's not-found sentence, as over ``/mcp``."""
    if not _SAFE_ID.fullmatch(ident):
        raise not_found(what, ident)
    return ident


def _answer(model: BaseModel) -> Json:
    """A client answer as the HTTP API sent it: the fields the server gave, in its order (the
    client's models declare the API's fields in the API's order and keep the ones they do not
    declare), none of the client's defaults added."""
    return model.model_dump(mode="json", exclude_unset=True)


def _fields(request: MessageCreate) -> dict[str, Any]:
    """The fields the agent gave, by name, for ``client.send``, which takes the ones it knows
    as arguments and sends any other as a body field: a field added to ``MessageCreate``
    reaches the server with no edit here."""
    return request.model_dump(exclude_none=True)


class HttpBackend:
    """The caller's tools call the REST API of a running Inbots with the agent's key, through
    :class:`inbots.client.AsyncClient` (``User-Agent: inbots-mcp/<version>``)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        limits: Limits | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        session: str | None = None,
    ) -> None:
        self.limits = limits or Limits.defaults()
        self._errors = _error_classes()
        self._client = client.AsyncClient(
            base_url,
            api_key or None,  # none only to register (POST /v1/register)
            session_label=session,  # the agent's sessions list this bridge under that label
            # A long-poll answers within its capped timeout; allow it that long plus slack.
            timeout=httpx.Timeout(30.0, read=self.limits.wait_max_seconds + 30.0),
            headers={"User-Agent": USER_AGENT},
            transport=transport,
        )
        self.base_url = self._client.url

    async def __aenter__(self) -> HttpBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    async def _call(self, answer: Awaitable[T]) -> T:
        """The client's answer; its failure as the :class:`InbotsError` the service would raise
        (the class by the error's ``code``), so the tool's sentence is the HTTP API's."""
        try:
            return await answer
        except client.Timeout:
            raise InbotsError(
                f"Inbots at {self.base_url} did not answer in time; the call may or may not have "
                "taken effect. Check before repeating it (send_message: repeat with the same "
                "idempotency_key)."
            ) from None
        except client.TransportError as exc:
            cause = type(exc.__cause__ or exc).__name__
            raise InbotsError(
                f"Could not reach Inbots at {self.base_url} ({cause}); check that the server is "
                "running and that INBOTS_URL points at it."
            ) from None
        except client.InbotsError as exc:
            raise self._error(exc) from None

    def _error(self, exc: client.InbotsError) -> InbotsError:
        if exc.code == f"http_{exc.status}":  # an answer without the error envelope
            return InbotsError(
                f"Inbots at {self.base_url} answered HTTP {exc.status} without an error message."
            )
        cls = self._errors.get(exc.code, InbotsError)
        error = cls(exc.message, field=exc.field)
        if exc.retry_after is not None:  # the server's Retry-After, for the tool's error
            error.retry_after = math.ceil(exc.retry_after)  # type: ignore[misc]
        return error

    async def server_limits(self) -> Limits:
        """The limits the server enforces (``GET /v1/limits``); InbotsError if it cannot tell."""
        return Limits.from_answer(_answer(await self._call(self._client.limits())))

    async def register(self, enrollment_token: str, name: str, description: str | None) -> Json:
        """``POST /v1/register``: an agent registers itself with an enrolment token."""
        registered = self._client.register(enrollment_token, name, description)
        return _answer(await self._call(registered))

    async def whoami(self) -> Json:
        return _answer(await self._call(self._client.me()))

    async def list_agents(self, query: str | None, active_only: bool) -> Json:
        found = await self._call(self._client.directory(query, active_only))
        return {"items": [_answer(entry) for entry in found]}

    async def list_threads(self, ref: str | None, query: str | None) -> Json:
        page = await self._call(self._client.threads(ref=ref or None, query=query or None))
        return {"items": [_answer(thread) for thread in page.items]}  # the first page, no cursor

    async def open_thread(self, request: ThreadCreate) -> Json:
        opened = self._client.open_thread(
            request.title, request.participants, request.goal, ref=request.ref
        )
        return _answer(await self._call(opened))

    async def add_participant(self, thread_id: str, username: str) -> Json:
        added = self._client.add_participant(_path_id(thread_id, "thread"), username)
        return _answer(await self._call(added))

    async def send_message(
        self, thread_id: str, request: MessageCreate, idempotency_key: str | None
    ) -> Json:
        # Checked before it goes out: a key the rule refuses may not even be sendable as a header.
        key = messages_schemas.idempotency_key(idempotency_key, self.limits.idempotency_key_max)
        sent = self._client.send(
            _path_id(thread_id, "thread"), idempotency_key=key, **_fields(request)
        )
        return _answer(await self._call(sent))

    async def send_direct(self, request: DirectMessageCreate, idempotency_key: str | None) -> Json:
        key = messages_schemas.idempotency_key(idempotency_key, self.limits.idempotency_key_max)
        # (A reply_to is sent too: the server answers it with the sentence saying where it
        # belongs.)
        sent = self._client.send(idempotency_key=key, **_fields(request))
        return _answer(await self._call(sent))

    async def check_inbox(self, query: InboxQuery) -> Json:
        # GET /v1/inbox applies the listing limits; the tool's are narrower, so apply them here.
        limits = self.limits
        count = clamp_limit(query.limit, limits.check_inbox_default, limits.check_inbox_max)
        inbox = self._client.inbox(
            count,
            cursor=query.cursor,
            include=cast(client.Include | None, query.include),
            status=cast(client.InboxStatus | None, query.status),
            priority=cast(client.Priority | None, query.priority),
        )
        return _answer(await self._call(inbox))

    async def read_message(
        self, ident: str, acknowledge: str | None = None, note: str | None = None
    ) -> Json:
        ack = cast(client.Outcome | None, acknowledge)
        # A note without an acknowledgement goes too: the server answers it with its sentence.
        read = self._client.read(_path_id(ident, "message"), ack=ack, note=note)
        return _answer(await self._call(read))

    async def read_thread(
        self, thread_id: str, since: str | None, limit: int | None, cursor: str | None
    ) -> Json:
        history = self._client.history(_path_id(thread_id, "thread"), since, limit, cursor)
        return _answer(await self._call(history))

    async def acknowledge(self, request: AckRequest) -> Json:
        outcome = cast(client.Outcome | None, request.outcome)
        acked = self._client.acknowledge(request.ids, outcome, request.note)
        return _answer(await self._call(acked))

    async def wait_for_mail(self, timeout_seconds: float | None, receipts: bool) -> Json:
        waited = self._client.wait(timeout_seconds, events="receipts" if receipts else None)
        return _answer(await self._call(waited))

    async def check_sent(
        self, state: str | None, thread_id: str | None, cursor: str | None
    ) -> Json:
        return _answer(await self._call(self._client.outbox(state, thread_id, cursor)))

    async def request_close(self, thread_id: str) -> Json:
        closing = self._client.close_request(_path_id(thread_id, "thread"))
        return _answer(await self._call(closing))

    async def search_messages(self, request: SearchQuery) -> Json:
        found = self._client.search(
            request.q,
            sender=request.sender,
            thread=request.thread,
            kind=request.kind,  # type: ignore[arg-type]  # checked by the server, with its sentence
            since=request.since,
            until=request.until,
            limit=request.limit,
            cursor=request.cursor,
        )
        return _answer(await self._call(found))

    async def list_keys(self) -> Json:
        return {"items": [_answer(key) for key in await self._call(self._client.keys())]}

    async def list_sessions(self) -> Json:
        found = await self._call(self._client.sessions())
        return {"items": [_answer(session) for session in found]}

    async def read_brief(self, username: str) -> Json:
        return _answer(await self._call(self._client.brief(_path_id(username, "agent"))))

    async def set_brief(self, text: str) -> Json:
        return _answer(await self._call(self._client.set_brief(text)))

    async def mark_working(self, ids: list[str], note: str | None) -> Json:
        """``POST /v1/deliveries/{id}/working`` for each id, answered per id as the service's
        batch is (a 404 or 409 for one id does not stop the others)."""
        wanted = list(dict.fromkeys(ids))
        if not 1 <= len(wanted) <= self.limits.ack_batch_max:
            raise Invalid(
                f"ids must hold 1 to {self.limits.ack_batch_max} ids (got {len(wanted)}).",
                field="ids",
            )
        working: list[Json] = []
        acked: list[str] = []
        missing: list[str] = []
        expired: list[str] = []
        for ident in wanted:
            try:
                beat = self._client.working(_path_id(ident, "delivery"), note)
                working.append(_answer(await self._call(beat)))
            except AlreadyAcknowledged:
                acked.append(ident)
            except NotFound:
                missing.append(ident)
            except Expired:
                expired.append(ident)
        return {
            "working": working,
            "already_acknowledged": acked,
            "not_found": missing,
            "expired": expired,
        }
