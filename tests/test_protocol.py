"""The request head is capped before the app sees it, and refusals come in the error envelope.

Against a real ``inbots serve`` (httptools, as uvicorn picks it) and a real uvicorn running the
h11 variant, over raw sockets (no client library would send these): a 32 MB header and 100,000
headers get ``431 headers_too_large`` within moments, a DEL in ``Idempotency-Key`` gets ``400
bad_request``, all as JSON; heads under the cap and large bodies pass. Behind an ASGI server
that is not ours the app's own check answers the same 431. SQLite only: no database involved.
"""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from inbots.app import create_app
from inbots.config import Settings, load_settings
from inbots.db.engine import Database
from tests.conftest import free_port
from tests.processes import serve

# One xdist worker runs the module: its servers (one an `inbots serve` process) start once.
pytestmark = pytest.mark.xdist_group("protocol")

MB = 1024 * 1024


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    seconds: float
    sent: int  # bytes the client got out before the server closed

    def error(self) -> dict[str, Any]:
        assert self.headers.get("content-type") == "application/json", self
        envelope = json.loads(self.body)
        assert set(envelope) == {"error"}, envelope
        error: dict[str, Any] = envelope["error"]
        assert error["code"] and error["message"].strip(), error
        return error


def exchange(url: str, head: bytes, rest: Iterable[bytes] = ()) -> Answer:
    """Send ``head`` then ``rest`` from a thread while reading the answer, as an attacker's
    client would; the server may close before everything is sent."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=20)
    sent = 0

    def push() -> None:
        nonlocal sent
        try:
            for chunk in (head, *rest):
                sock.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass  # the server has answered and closed: that is the point

    start = time.monotonic()
    pusher = threading.Thread(target=push, daemon=True)
    pusher.start()
    received = bytearray()
    try:
        while chunk := sock.recv(65536):
            received += chunk
            if b"\r\n\r\n" in received and _complete(bytes(received)):
                break
    except OSError:
        pass
    seconds = time.monotonic() - start
    sock.close()
    pusher.join(timeout=20)
    return _parse(bytes(received), seconds, sent)


def _complete(raw: bytes) -> bool:
    head, _, body = raw.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


def _parse(raw: bytes, seconds: float, sent: int) -> Answer:
    assert raw, f"no answer at all after {seconds:.1f} s ({sent} bytes sent)"
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(status, headers, body, seconds, sent)


def chunks(total: int, piece: bytes = b"a" * 65536) -> Iterator[bytes]:
    while total > 0:
        yield piece[:total]
        total -= len(piece)


def many_headers(count: int) -> Iterator[bytes]:
    batch = 1000
    for start in range(0, count, batch):
        yield b"".join(b"X-H%d: v\r\n" % i for i in range(start, min(start + batch, count)))
    yield b"\r\n"


# --- servers -------------------------------------------------------------------------------


class ThreadServer:
    """The app under a real uvicorn in this process, with a given protocol class (or uvicorn's
    own when ``http`` is None)."""

    def __init__(self, settings: Settings, http: type | None) -> None:
        self.db = Database(settings)
        self.port = free_port()
        options: dict[str, Any] = {"http": http} if http else {}
        config = uvicorn.Config(
            create_app(settings, self.db, configure_logs=False),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            **options,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.db.dispose()


@pytest.fixture(scope="module")
def module_settings(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Settings:
    path = tmp_path_factory.mktemp("protocol") / "inbots.db"
    shutil.copy(sqlite_template, path)
    return load_settings(database_url=f"sqlite:///{path}")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``inbots serve`` process (uvicorn with httptools and our protocol)."""
    with serve(tmp_path_factory.mktemp("serve")) as running:
        yield running.url


H11_URL: dict[str, str] = {}


@pytest.fixture(scope="module")
def h11_served(module_settings: Settings) -> Iterator[str]:
    from inbots.web.protocol import protocol_for

    with ThreadServer(module_settings, protocol_for(module_settings, "h11")) as running:
        H11_URL["url"] = running.url
        yield running.url


@pytest.fixture(params=["inbots-serve", "uvicorn-h11"])
def url(request: pytest.FixtureRequest) -> str:
    name = "served" if request.param == "inbots-serve" else "h11_served"
    return str(request.getfixturevalue(name))


# --- tests ---------------------------------------------------------------------------------


def test_a_32_mb_header_is_refused_with_431_at_once(url: str) -> None:
    answer = exchange(
        url, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ", [*chunks(32 * MB), b"\r\n\r\n"]
    )
    assert answer.status == 431, answer
    error = answer.error()
    assert error["code"] == "headers_too_large"
    assert "32768 bytes" in error["message"]
    assert answer.seconds < 5, answer.seconds
    assert answer.sent < 32 * MB, "the server read the whole header"
    assert answer.headers["connection"] == "close"
    assert httpx.get(url + "/healthz", timeout=30).status_code == 200  # and it is still serving


def test_100_000_headers_are_refused_with_431_at_once(url: str) -> None:
    answer = exchange(url, b"GET /healthz HTTP/1.1\r\nHost: x\r\n", many_headers(100_000))
    assert answer.status == 431, answer
    assert answer.error()["code"] == "headers_too_large"
    assert answer.seconds < 5, answer.seconds


def test_more_header_fields_than_the_limit_are_refused_even_when_small(url: str) -> None:
    answer = exchange(url, b"GET /healthz HTTP/1.1\r\nHost: x\r\n", many_headers(150))
    assert answer.status == 431, answer
    assert "more than 100 header fields" in answer.error()["message"]


def test_a_del_character_in_a_header_gets_the_envelope(url: str) -> None:
    request = (
        b"POST /v1/threads/th_x/messages HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nIdempotency-Key: abc\x7fdef\r\n"
        b"Content-Length: 2\r\n\r\n{}"
    )
    answer = exchange(url, request)
    error = answer.error()
    if url == H11_URL.get("url"):
        # h11 takes DEL in a value as obs-text; the app then answers it, in the envelope.
        assert (answer.status, error["code"]) == (401, "unauthorized"), answer
        return
    assert answer.status == 400, answer
    assert error["code"] == "bad_request"
    assert "header" in error["message"] and "abc" not in error["message"]


def test_heads_under_the_cap_and_large_bodies_pass(url: str) -> None:
    headers = {f"X-Pad-{i}": "v" * 300 for i in range(80)}  # about 25 KB of headers
    assert httpx.get(url + "/healthz", headers=headers).status_code == 200
    # A 60 KB body arriving with its head in one read is not counted as head.
    answer = httpx.post(url + "/v1/agents", content=b"x" * 60_000)
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"]["code"] == "unauthorized"


def test_the_app_checks_the_head_behind_another_server(module_settings: Settings) -> None:
    """uvicorn's own protocol (as any server that is not ours) hands the app whatever it read:
    the app still answers 431 in the envelope."""
    with ThreadServer(module_settings, None) as plain:
        large = httpx.get(plain.url + "/healthz", headers={"X-Big": "a" * 40_000})
        assert large.status_code == 431
        assert large.json()["error"]["code"] == "headers_too_large"
        many = httpx.get(plain.url + "/healthz", headers={f"X-H{i}": "v" for i in range(150)})
        assert many.status_code == 431
        assert "header fields" in many.json()["error"]["message"]
        assert httpx.get(plain.url + "/healthz").status_code == 200
