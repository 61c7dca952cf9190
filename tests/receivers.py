"""Real HTTP receivers on loopback for webhook tests: each records every request it gets."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

# Webhook timings for embedded-default tests: the whole retry sequence in about 1.5 s.
FAST = {"retry_schedule": "0.2,0.4,0.8", "webhook_timeout_seconds": 1.0, "publish_lost_seconds": 8}


@dataclass
class Received:
    at: float  # time.monotonic() when the request arrived
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


# A behaviour gets the request number (1-based) and answers (status, body), or sleeps first.
Behaviour = Callable[[int], tuple[int, bytes]]


def always(status: int, body: bytes = b"ok") -> Behaviour:
    return lambda _n: (status, body)


def hang(seconds: float) -> Behaviour:
    def behave(_n: int) -> tuple[int, bytes]:
        time.sleep(seconds)
        return 200, b"too late"

    return behave


def fail_then_ok(failures: int, status: int = 500) -> Behaviour:
    return lambda n: (status, b"not yet") if n <= failures else (200, b"ok")


@dataclass
class Receiver:
    behaviour: Behaviour
    requests: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            time.sleep(0.02)
        with self.lock:
            raise AssertionError(f"expected {count} requests, got {len(self.requests)}")


@contextmanager
def receiver(behaviour: Behaviour) -> Iterator[Receiver]:
    state = Receiver(behaviour)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            with state.lock:
                state.requests.append(
                    Received(time.monotonic(), self.path, dict(self.headers.items()), body)
                )
                number = len(state.requests)
            status, answer = state.behaviour(number)
            try:
                self.send_response(status)
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the sender gave up (a timeout test)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


# Not passed on by the relay: it answers with a body of its own length, decoded.
_HOP_BY_HOP = ("content-length", "content-encoding", "transfer-encoding", "connection")


@contextmanager
def relay(target: str, port: int = 0) -> Iterator[Receiver]:
    """A loopback HTTP proxy to ``target`` (on ``port``, or any free one) that records every
    request it passes on (what a client sent, as the server would see it); the answers are the
    target's."""
    state = Receiver(always(502))
    upstream = httpx.Client(base_url=target, timeout=120.0)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _relay(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            with state.lock:
                state.requests.append(Received(time.monotonic(), self.path, headers, body))
            answer = upstream.request(self.command, self.path, headers=headers, content=body)
            self.send_response(answer.status_code)
            for name, value in answer.headers.items():
                if name.lower() not in _HOP_BY_HOP:
                    self.send_header(name, value)
            self.send_header("content-length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        do_GET = do_POST = do_PUT = do_DELETE = _relay

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        upstream.close()


@contextmanager
def not_inbots() -> Iterator[str]:
    """A loopback web server that answers every request 200 with a page, not Inbots' JSON."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            page = b"<html><body>Welcome to nginx!</body></html>"
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    web = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    web.daemon_threads = True
    threading.Thread(target=web.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{web.server_address[1]}"
    finally:
        web.shutdown()
        web.server_close()
