"""The inbox at a glance, for a harness hook: ``inbots mail hook`` runs before every prompt of an
agent, so its start-up is part of every prompt's latency.

:func:`glance` is :meth:`Client.inbox`'s first page (``GET /v1/inbox``, the same request: a
test compares the two) in one request that loads neither pydantic nor a connection pool. It
answers the server's JSON as a dict, builds no model (importing the client's models costs more
than importing httpx), and sends over :class:`OneShot`: one connection with the standard
library's ``http.client``, where httpx's own transport would import httpcore (and trio and
anyio, when they are installed) for a pool this one request never uses. Proxies named in the
environment are honoured by httpx as always (their transports are its own). Errors are the
client's: :class:`~inbots.client.InbotsError` and :class:`~inbots.client.TransportError`.
"""

from __future__ import annotations

import http.client
from collections.abc import Mapping
from typing import Any

import httpx

from inbots.client._base import Call, ClientConfig, query, tls_context

GLANCE_TIMEOUT = 2.0  # seconds: a hook must never hold its harness up for long


def glance(
    url: str,
    token: str,
    *,
    limit: int | None = None,
    timeout: float = GLANCE_TIMEOUT,
    headers: Mapping[str, str] | None = None,
    transport: httpx.BaseTransport | None = None,
) -> dict[str, Any]:
    """Your unacknowledged mail, first page, as the server's JSON (``items``, ``returned``,
    ``waiting``, ``more``, ``next_cursor``): urgent first, then oldest first, summaries only;
    it stamps them delivered, as :meth:`Client.inbox` does. One request, bounded by ``timeout``
    seconds."""
    config = ClientConfig.of(url, token, timeout, None, headers)
    call = Call("GET", "/inbox", _page, query(limit=limit))
    with httpx.Client(
        base_url=config.base_url,
        headers=config.headers,
        timeout=config.timeout,
        transport=transport or OneShot(),
    ) as http:
        try:
            response = http.request(call.method, call.path, params=call.params)
        except httpx.TransportError as exc:
            raise config.transport_error(exc, call) from exc
    return config.result(call, response)


def _page(answer: Any) -> dict[str, Any]:
    if not isinstance(answer, dict) or not isinstance(answer.get("items"), list):
        raise ValueError("not an inbox page")
    return answer


class OneShot(httpx.BaseTransport):
    """One request on a connection of its own, with ``http.client``; closed after the answer is
    read. For a process that makes one request and exits."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        limits = request.extensions.get("timeout", {})
        seconds = limits.get("read") or limits.get("connect")
        host = url.raw_host.decode("ascii")
        connection: http.client.HTTPConnection
        if url.scheme == "https":
            connection = http.client.HTTPSConnection(
                host, url.port, timeout=seconds, context=tls_context()
            )
        elif url.scheme == "http":
            connection = http.client.HTTPConnection(host, url.port, timeout=seconds)
        else:
            raise httpx.UnsupportedProtocol(f"{url.scheme!r} is not http or https", request=request)
        try:
            connection.connect()
        except TimeoutError as exc:
            connection.close()
            raise httpx.ConnectTimeout(str(exc) or "timed out", request=request) from exc
        except OSError as exc:  # refused, unreachable, DNS, TLS
            connection.close()
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
        try:
            connection.putrequest(
                request.method,
                url.raw_path.decode("ascii"),
                skip_host=True,
                skip_accept_encoding=True,
            )
            for name, value in request.headers.raw:
                connection.putheader(name.decode("latin-1"), value.decode("latin-1"))
            connection.endheaders(request.read() or None)
            answer = connection.getresponse()
            content = answer.read()
        except TimeoutError as exc:
            raise httpx.ReadTimeout(str(exc) or "timed out", request=request) from exc
        except http.client.HTTPException as exc:
            raise httpx.RemoteProtocolError(
                str(exc) or type(exc).__name__, request=request
            ) from exc
        except OSError as exc:  # reset
            raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc
        finally:
            connection.close()
        return httpx.Response(
            answer.status,
            headers=answer.getheaders(),
            stream=httpx.ByteStream(content),
            extensions={"reason_phrase": answer.reason.encode("latin-1")},
        )
