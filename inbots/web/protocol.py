"""uvicorn's HTTP/1.1 protocols with a cap on the request head, and the error envelope for
requests refused before the app sees them.

uvicorn reads the request line and headers into memory before the ASGI app runs, so a limit in
the app comes too late to protect memory: one 32 MB header or 100,000 small ones would already
be held. These subclasses count while the head arrives and answer ``431`` in the error envelope
as soon as it exceeds ``INBOTS_HTTP_HEADER_MAX_BYTES`` (request line and header fields together)
or ``HEADER_MAX_COUNT`` (100) fields, then close the connection. A head the parser refuses
(a control character such as DEL in a header value, a malformed request line) gets ``400
bad_request`` in the envelope instead of uvicorn's plain text.

The head also has a deadline: ``INBOTS_HTTP_HEADER_TIMEOUT_SECONDS`` from the connection's
start, and from the first byte of each later request on it. uvicorn has none (its keep-alive
timer runs only between requests), so a client dribbling a header byte every few seconds held
its connection for as long as it liked, and thousands of them held the server. A head still
incomplete at the deadline gets ``408 request_timeout`` in the envelope; a connection that sent
nothing is closed without a word. Either way it closes.

``inbots serve`` passes :func:`protocol_for` its settings; any other uvicorn takes
``--http inbots.web.protocol:InbotsHttpProtocol`` (httptools, which ``uvicorn[standard]``
brings and uvicorn's ``auto`` picks), which reads the settings on its first connection.
"""

from __future__ import annotations

import asyncio
import http
import json
import logging
from collections.abc import Callable
from typing import Any, ClassVar

import h11
import httptools
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from inbots.config import Settings, get_settings
from inbots.web.limits import CODE_TOO_LARGE, CODE_TOO_SLOW, HeadLimits

log = logging.getLogger(__name__)


def malformed(reason: str | None = None) -> str:
    detail = f" ({reason.rstrip('.')})" if reason else ""
    return (
        f"The request's HTTP head is malformed{detail}: a header name or value may hold a "
        "character HTTP does not allow, such as a control character or DEL. Fix the request "
        "line and headers and send it again."
    )


def refusal(
    status: int, code: str, message: str, default_headers: list[tuple[bytes, bytes]]
) -> bytes:
    """A whole HTTP/1.1 response carrying the error envelope; the connection closes after it."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    phrase = http.HTTPStatus(status).phrase.encode()
    head = [b"HTTP/1.1 %d %s\r\n" % (status, phrase)]
    head += [name + b": " + value + b"\r\n" for name, value in default_headers]
    head += [
        b"content-type: application/json\r\n",
        b"content-length: %d\r\n" % len(body),
        b"connection: close\r\n",
        b"\r\n",
    ]
    return b"".join(head) + body


class _Refused(Exception):
    """Raised from a parser callback to stop parsing: the head broke a limit."""


class _Limited:
    """What both protocols share: the limits, the head's deadline, and answering with the
    envelope."""

    limits: ClassVar[HeadLimits | None] = None  # bound by protocol_for(); else the settings
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    server_state: Any
    client: tuple[str, int] | None
    cycle: Any  # uvicorn's request-response cycle in progress, or None
    _deadline: asyncio.TimerHandle | None = None
    _head_begun = False  # a byte of the head the deadline runs for has arrived

    def _head_limits(self) -> HeadLimits:
        return self.limits or HeadLimits.of(get_settings())

    def _start_head_clock(self, timeout: float, *, begun: bool) -> None:
        """Start the head's deadline unless it runs already (a head that arrives in several
        reads has one deadline, from its first)."""
        self._head_begun = self._head_begun or begun
        if self._deadline is None and not self.transport.is_closing():
            self._deadline = self.loop.call_later(timeout, self._head_too_slow, timeout)

    def _stop_head_clock(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._head_begun = False

    def _head_too_slow(self, timeout: float) -> None:
        self._deadline = None
        if self.cycle is not None and not self.cycle.response_complete:
            # The next request's head began while this one's answer is still being made (a
            # long poll): the deadline restarts, and no answer is written into the middle of
            # another.
            self._start_head_clock(timeout, begun=False)
            return
        if self._head_begun:
            self._refuse(408, CODE_TOO_SLOW, self._head_limits().too_slow())
        elif not self.transport.is_closing():
            self.transport.close()  # nothing sent at all: nothing to answer

    def _refuse(self, status: int, code: str, message: str) -> None:
        if self.transport.is_closing():
            return
        log.info(  # the client's mistake, as a 4xx answer is: routine for the server
            "request refused before the app: %s",
            message,
            extra={"status_code": status, "client": self.client[0] if self.client else None},
        )
        self.transport.write(refusal(status, code, message, self.server_state.default_headers))
        self.transport.close()


class LimitedHttpToolsProtocol(_Limited, HttpToolsProtocol):
    """httptools (llhttp) with the head counted as it arrives.

    Two counts, because httptools hands over a header only once its whole value is in: an
    exact one from the callbacks (URL pieces, each header field), and one of the bytes
    received while the head is still incomplete, which stops a single huge header after a
    read or so instead of after all of it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._caps = self._head_limits()
        self._in_head = True
        self._head_bytes = 0  # exact: the URL and header fields of this request
        self._pending_bytes = 0  # received while this request's head is incomplete
        self._header_count = 0
        self._finished_in_read = False
        self._cause: tuple[int, str, str] | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_head_clock(self._caps.timeout_seconds, begun=False)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_clock()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        # uvicorn's own, except that a refused head is answered in the envelope, and bytes
        # of an unfinished head are counted.
        self._unset_keepalive_if_required()
        self._finished_in_read = False
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            status, code, message = self._cause or (400, "bad_request", malformed(str(exc)))
            self._refuse(status, code, message)
            return
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        # A read that finished one request and began the next cannot be split: skip it
        # (the exact count still runs when the next head's fields arrive).
        if self._in_head and not self._finished_in_read:
            self._pending_bytes += len(data)
            if self._pending_bytes > self._caps.max_bytes:
                self._refuse(431, CODE_TOO_LARGE, self._caps.too_large())

    def send_400_response(self, msg: str) -> None:
        self._refuse(400, "bad_request", malformed())

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = self._pending_bytes = self._header_count = 0
        self._start_head_clock(self._caps.timeout_seconds, begun=True)

    def on_url(self, url: bytes) -> None:
        self._count(len(url), 0)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4, 1)  # "name: value\r\n"
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._stop_head_clock()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head = True
        self._finished_in_read = True
        self._pending_bytes = 0
        super().on_message_complete()

    def _count(self, size: int, fields: int) -> None:
        self._head_bytes += size
        self._header_count += fields
        if self._head_bytes > self._caps.max_bytes:
            self._cause = (431, CODE_TOO_LARGE, self._caps.too_large())
        elif self._header_count > self._caps.max_count:
            self._cause = (431, CODE_TOO_LARGE, self._caps.too_many())
        else:
            return
        raise _Refused  # httptools stops parsing and feed_data raises


class _LimitedConnection(h11.Connection):
    """h11 already caps an incomplete head (``max_incomplete_event_size``: 431); this adds the
    count of header fields and remembers why it refused."""

    def __init__(self, caps: HeadLimits, on_head: Callable[[], None]) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=caps.max_bytes)
        self.caps = caps
        self.on_head = on_head  # called when a whole head has arrived
        self.refused: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as exc:
            self.refused = exc
            raise
        if isinstance(event, h11.Request):
            self.on_head()
            if len(event.headers) > self.caps.max_count:
                self.refused = h11.RemoteProtocolError(self.caps.too_many(), error_status_hint=431)
                raise self.refused
        return event


class LimitedH11Protocol(_Limited, H11Protocol):
    """h11 with the head capped by the settings, and every refusal in the envelope."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._caps = self._head_limits()
        self.conn = _LimitedConnection(self._caps, self._stop_head_clock)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_head_clock(self._caps.timeout_seconds, begun=False)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_clock()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if data and self.conn.their_state is h11.IDLE:  # a request's head, not its body
            self._start_head_clock(self._caps.timeout_seconds, begun=True)
        super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        conn = self.conn
        refused = conn.refused if isinstance(conn, _LimitedConnection) else None
        if refused is not None and refused.error_status_hint == 431:
            caps = self._head_limits()
            many = str(refused) == caps.too_many()
            self._refuse(431, CODE_TOO_LARGE, caps.too_many() if many else caps.too_large())
            return
        # h11's reasons can quote the offending bytes (a token, say): never echo them.
        self._refuse(400, "bad_request", malformed())


InbotsHttpProtocol = LimitedHttpToolsProtocol  # for uvicorn --http inbots.web.protocol:…


def protocol_for(settings: Settings, implementation: str = "httptools") -> type[asyncio.Protocol]:
    """The protocol class for uvicorn's ``http=``, with ``settings``' limits bound to it.
    ``implementation``: ``httptools`` (uvicorn's choice when it is installed) or ``h11``."""
    base: type[_Limited] = (
        LimitedH11Protocol if implementation == "h11" else LimitedHttpToolsProtocol
    )
    return type(base.__name__, (base,), {"limits": HeadLimits.of(settings)})
