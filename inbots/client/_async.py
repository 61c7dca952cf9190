"""The asynchronous client: :mod:`inbots.client._client`'s class with ``async`` methods. Keep the
two in step (``tests/test_client.py`` compares their signatures)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, TypeVar, overload

import httpx

from inbots.client import _calls
from inbots.client._async_operator import AsyncOperatorCalls
from inbots.client._base import DEFAULT_TIMEOUT, Call, ClientConfig, tls_context
from inbots.client._errors import NotFound
from inbots.client._feed import Feed
from inbots.client._models import (
    AckResult,
    Agent,
    Brief,
    Delivery,
    DirectoryEntry,
    Inbox,
    InboxItem,
    Key,
    Limits,
    Message,
    OutboxItem,
    Page,
    ReadResult,
    RegisteredAgent,
    SearchHit,
    SendResult,
    Session,
    Thread,
    Webhook,
)
from inbots.client._types import Events, InboxStatus, Include, Kind, Outcome, Priority, When

T = TypeVar("T")


class AsyncClient(AsyncOperatorCalls):
    """One caller's view of an Inbots server: an agent's key (``agt_…``) or the operator's
    token (``ops_…``).

    ::

        async with AsyncClient("http://127.0.0.1:8000", "agt_…") as inbots:
            async for item in inbots.messages():
                message = (await inbots.read(item.delivery_id)).message
                ...
                await inbots.acknowledge(item.delivery_id, "done")

    ``timeout`` (seconds, or an ``httpx.Timeout``) bounds each call; a long-poll is allowed its
    own wait on top. ``session_label`` names this client as a session of the agent
    (``X-Inbots-Session``). ``headers`` are sent with every call (a ``User-Agent`` given here
    replaces ``inbots-client/<version>``). ``transport`` replaces httpx's (tests, retries).

    Every method returns a typed answer or raises :class:`~inbots.client.InbotsError` (the server
    refused) or :class:`~inbots.client.TransportError` (no answer). Methods marked "Operator"
    need the operator token.
    """

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        session_label: str | None = None,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._config = ClientConfig.of(url, token, timeout, session_label, headers)
        self._http = httpx.AsyncClient(
            base_url=self._config.base_url,
            headers=self._config.headers,
            timeout=self._config.timeout,
            transport=transport,
            verify=tls_context(),
        )

    @property
    def url(self) -> str:
        """The server's URL, without ``/v1``."""
        return self._config.server

    async def aclose(self) -> None:
        """Close the connections. The client cannot be used afterwards."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, call: Call[T]) -> T:
        try:
            response = await self._http.request(
                call.method,
                call.path,
                params=call.params,
                json=call.json,
                headers=call.headers,
                timeout=self._config.timeout_for(call),
            )
        except httpx.TransportError as exc:
            raise self._config.transport_error(exc, call) from exc
        return self._config.result(call, response)

    # Who is who

    async def me(self) -> Agent:
        """The calling agent (``GET /v1/me``)."""
        return await self._send(_calls.me())

    async def directory(
        self, query: str | None = None, active_only: bool = False
    ) -> list[DirectoryEntry]:
        """Others you can write to, most recently active first; ``query`` matches usernames and
        descriptions, ``active_only`` keeps those seen recently."""
        return await self._send(_calls.directory(query, active_only))

    async def keys(self) -> list[Key]:
        """Your keys, without the keys themselves (``current`` marks this one)."""
        return await self._send(_calls.my_keys())

    async def sessions(self) -> list[Session]:
        """Your sessions (MCP sessions, ``X-Inbots-Session`` clients), latest first."""
        return await self._send(_calls.my_sessions())

    async def brief(self, username: str) -> Brief:
        """An agent's brief (what it does, how to work with it)."""
        return await self._send(_calls.brief(username))

    async def set_brief(self, text: str) -> Brief:
        """Set your own brief (Markdown)."""
        return await self._send(_calls.set_brief(text))

    async def limits(self) -> Limits:
        """The limits this server enforces: body and summary lengths, list sizes, waits."""
        return await self._send(_calls.limits())

    # Threads

    async def threads(
        self,
        *,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        ref: str | None = None,
        query: str | None = None,
    ) -> Page[Thread]:
        """Your threads that are not closed (the operator: all, or by ``status``), most recent
        activity first. ``ref`` finds threads by task reference, ``query`` by words in their
        title or goal (any case, taken literally)."""
        return await self._send(_calls.threads(status, limit, cursor, ref, query))

    async def thread(self, thread_id: str) -> Thread:
        """One thread with its participants (the operator: with every message and receipt)."""
        return await self._send(_calls.thread(thread_id))

    async def open_thread(
        self,
        title: str,
        participants: Sequence[str],
        goal: str | None = None,
        *,
        ref: str | None = None,
        **extra: Any,
    ) -> Thread:
        """Open a thread for one task with these usernames (``["*"]``: everyone); you are its
        opener. ``ref`` is a task reference such as a ticket id."""
        return await self._send(_calls.open_thread(title, participants, goal, ref, extra))

    async def add_participant(self, thread_id: str, username: str) -> Thread:
        """Add someone to a thread (idempotent)."""
        return await self._send(_calls.add_participant(thread_id, username))

    async def close_request(self, thread_id: str) -> Thread:
        """Ask the operator to close a thread you opened."""
        return await self._send(_calls.close_request(thread_id))

    # Sending

    @overload
    async def send(
        self,
        thread_id: str,
        body: str,
        summary: str | None = None,
        kind: Kind | None = None,
        reply_to: str | None = None,
        idempotency_key: str | None = None,
        *,
        priority: Priority | None = None,
        **extra: Any,
    ) -> SendResult: ...

    @overload
    async def send(
        self,
        thread_id: None = None,
        *,
        to: Sequence[str],
        body: str,
        summary: str | None = None,
        kind: Kind | None = None,
        idempotency_key: str | None = None,
        title: str | None = None,
        ref: str | None = None,
        priority: Priority | None = None,
        **extra: Any,
    ) -> SendResult: ...

    async def send(
        self,
        thread_id: str | None = None,
        body: str | None = None,
        summary: str | None = None,
        kind: Kind | None = None,
        reply_to: str | None = None,
        idempotency_key: str | None = None,
        *,
        priority: Priority | None = None,
        to: Sequence[str] | None = None,
        title: str | None = None,
        ref: str | None = None,
        **extra: Any,
    ) -> SendResult:
        """Post ``body`` to a thread. Bodies longer than the server's ``summary_required_over``
        need a one-line ``summary``. Repeating an ``idempotency_key`` answers the original with
        ``duplicate=True``, so a send that timed out can be repeated safely.

        ``to=[usernames]`` (no thread id) opens a thread with them and posts in one
        call (``title`` defaults to the summary, ``ref`` is a task reference); ``priority`` is
        ``"normal"`` or ``"urgent"``. Other keyword arguments are sent as body fields as given;
        ``attachments=[{"name", "content_type", "data"}]`` takes ``data`` as bytes (sent in
        base64) or as a base64 string.
        """
        if body is None:
            raise TypeError("send() needs a body")
        call = _calls.send(
            thread_id,
            body,
            summary=summary,
            kind=kind,
            reply_to=reply_to,
            idempotency_key=idempotency_key,
            priority=priority,
            to=to,
            title=title,
            ref=ref,
            extra=extra,
        )
        return await self._send(call)

    async def history(
        self,
        thread_id: str,
        since: When | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Message]:
        """A thread's messages with their bodies, oldest first; ``since`` is a message id or a
        time. Marks your deliveries among them fetched."""
        return await self._send(_calls.history(thread_id, since, limit, cursor))

    async def outbox(
        self,
        state: str | None = None,
        thread: str | None = None,
        cursor: str | None = None,
        *,
        limit: int | None = None,
    ) -> Page[OutboxItem]:
        """Messages you sent, newest first, with every recipient's receipt;
        ``state`` keeps those with a receipt in that state, ``thread`` those of one thread."""
        return await self._send(_calls.outbox(state, thread, cursor, limit))

    async def search(
        self,
        q: str,
        *,
        sender: str | None = None,
        thread: str | None = None,
        kind: Kind | None = None,
        since: When | None = None,
        until: When | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[SearchHit]:
        """Messages you may read matching the words of ``q`` (plain text, never
        query syntax), best first."""
        call = _calls.search(
            q,
            sender=sender,
            thread_id=thread,
            kind=kind,
            since=since,
            until=until,
            limit=limit,
            cursor=cursor,
        )
        return await self._send(call)

    # Receiving

    async def inbox(
        self,
        limit: int | None = None,
        *,
        cursor: str | None = None,
        include: Include | None = None,
        status: InboxStatus | None = None,
        priority: Priority | None = None,
        since: When | None = None,
    ) -> Inbox:
        """Your unacknowledged mail, summaries only, urgent first, then oldest first; marks it
        delivered.

        ``cursor`` pages on without acknowledging (answers carry ``next_cursor``);
        ``include="body"`` adds bodies (and marks them fetched); ``status`` is ``"unacked"``,
        ``"acked"`` or ``"all"``; ``priority="urgent"`` keeps urgent mail; ``since`` a delivery
        id or a time.
        """
        call = _calls.inbox(
            limit, cursor=cursor, include=include, status=status, priority=priority, since=since
        )
        return await self._send(call)

    async def wait(self, timeout: float | None = None, *, events: Events | None = None) -> Inbox:
        """Long-poll: answers as soon as you have mail not shown before (listing only that), or
        empty after ``timeout`` seconds (the server's default without one; it caps it).
        ``events="receipts"`` also wakes for receipts of mail you sent."""
        return await self._send(_calls.wait(timeout, events))

    async def attachment(self, attachment_id: str) -> bytes:
        """An attachment's bytes (``att_…``, as a message lists it in ``attachments``), exactly
        as sent; stamps nothing."""
        return await self._send(_calls.attachment(attachment_id))

    async def read(
        self, id: str, *, ack: Outcome | None = None, note: str | None = None
    ) -> ReadResult:
        """One message with its body, by message or delivery id; marks your delivery fetched.
        ``ack`` acknowledges it in the same call, with ``note`` for the sender."""
        return await self._send(_calls.read(id, ack, note))

    async def acknowledge(
        self, ids: str | Sequence[str], outcome: Outcome | None = None, note: str | None = None
    ) -> AckResult:
        """Say you are done with messages (``"done"``) or declined them, with an optional note
        for the sender. Takes message or delivery ids; idempotent."""
        return await self._send(_calls.acknowledge(ids, outcome, note))

    async def received(self, delivery_id: str) -> Delivery:
        """A webhook handler confirms its agent was told: marks the delivery delivered."""
        return await self._send(_calls.received(delivery_id))

    async def working(self, delivery_id: str, note: str | None = None) -> Delivery:
        """Say you are working on it (a heartbeat; not stalled while it beats)."""
        return await self._send(_calls.working(delivery_id, note))

    async def mark_working(
        self, ids: str | Sequence[str], note: str | None = None
    ) -> list[Delivery]:
        """The heartbeat for one or more deliveries you are working on (delivery or
        message ids), each as :meth:`working`; call it again while the work goes on. Raises at
        the first id that is not yours (:class:`~inbots.client.NotFound`) or already
        acknowledged (:class:`~inbots.client.Conflict`)."""
        wanted = [ids] if isinstance(ids, str) else list(ids)
        return [await self._send(_calls.working(i, note)) for i in dict.fromkeys(wanted)]

    async def messages(
        self,
        *,
        wait: float | None = 30.0,
        limit: int | None = None,
        include_body: bool = False,
        forever: bool = True,
    ) -> AsyncIterator[InboxItem]:
        """Your mail as it comes: first the inbox as it stands, then each new item as a
        long-poll (``wait`` seconds each) returns it. No item is yielded twice by one iterator;
        nothing is acknowledged for you. ``include_body`` fills each item's ``body`` (reading it
        marks it fetched; an item whose thread closed before it could be read is skipped). With
        ``forever=False`` it ends after a wait that brought nothing.
        """
        feed = Feed(limit=limit, include="body" if include_body else None, wait=wait)
        while True:
            for item in feed.take(await self._send(feed.next_call())):
                if include_body and item.body is None:
                    try:
                        reading = await self.read(item.delivery_id)
                    except NotFound:
                        continue  # gone since it was listed (its thread closed)
                    item.body = reading.message.body
                yield item
            if feed.idle and not forever:
                return

    # Your webhook

    async def webhook(self) -> Webhook | None:
        """Your webhook's URL and signing secret; None when you have none."""
        try:
            return await self._send(_calls.webhook())
        except NotFound:
            return None

    async def set_webhook(self, url: str, *, events: Sequence[str] | None = None) -> Webhook:
        """Set or change your webhook URL (a secret is minted the first time). ``events``
        chooses the notification types, e.g. ``["message.created"]``."""
        return await self._send(_calls.set_webhook(url, events))

    async def remove_webhook(self) -> None:
        """Remove your webhook and discard its secret."""
        await self._send(_calls.remove_webhook())

    async def rotate_webhook(self) -> Webhook:
        """A new signing secret; the previous one keeps signing for a day."""
        return await self._send(_calls.rotate_webhook())

    async def register(
        self,
        enrollment_token: str,
        name: str,
        description: str | None = None,
        webhook_url: str | None = None,
    ) -> RegisteredAgent:
        """Register a new agent with an enrolment token from the operator (``enr_…``;
        ``POST /v1/register``, no other credentials: make the client with ``token=None``). Its
        ``api_key`` is in this answer only."""
        return await self._send(_calls.register(enrollment_token, name, description, webhook_url))
