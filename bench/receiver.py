"""A fast webhook receiver for the delivery benchmark, run as its own process.

    python -m bench.receiver --port <port>

It speaks just enough HTTP/1.1 (keep-alive, ``Content-Length`` bodies) on asyncio (uvloop when
installed) to answer every ``POST`` with ``204 No Content`` at once (or, with ``--delay S``, S
seconds later: a slow receiver, without holding a thread per request), and records each arrival:
the wall-clock time (``time.time()``, so it can be compared with the database's stamps), the
path, the three ``webhook-*`` headers and the raw body. Nothing is verified while receiving; the
benchmark checks the signatures afterwards.

Control endpoints (``GET``) on the same port: ``/_count`` answers the number of arrivals,
``/_arrivals`` all of them as JSON, ``/_reset`` clears them (answering the number cleared).

:class:`ReceiverProcess` starts and stops it from the benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx

NO_CONTENT = b"HTTP/1.1 204 No Content\r\n\r\n"
HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")


class _Connection(asyncio.Protocol):
    def __init__(self, arrivals: list[list[Any]], delay: float = 0.0) -> None:
        self.arrivals = arrivals
        self.delay = delay
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
            headers = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length") or 0)
            if len(self.buffer) < end + 4 + length:
                return  # the body is still on its way
            arrived = time.time()
            body = bytes(self.buffer[end + 4 : end + 4 + length])
            del self.buffer[: end + 4 + length]
            method, path, _ = head[0].split(" ", 2)
            assert self.transport is not None
            if method == "POST":
                self.arrivals.append([arrived, path, *(headers.get(h) for h in HEADERS), body])
                if self.delay:
                    asyncio.get_running_loop().call_later(self.delay, self._answer_late)
                else:
                    self.transport.write(NO_CONTENT)
            else:
                self.transport.write(self._control(path))
            if headers.get("connection", "").lower() == "close":
                self.transport.close()
                return

    def _answer_late(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(NO_CONTENT)

    def _control(self, path: str) -> bytes:
        if path == "/_count":
            answer: Any = len(self.arrivals)
        elif path == "/_arrivals":
            answer = [[*a[:-1], a[-1].decode("utf-8", "replace")] for a in self.arrivals]
        elif path == "/_reset":
            answer = len(self.arrivals)
            self.arrivals.clear()
        else:
            return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        body = json.dumps(answer).encode()
        return (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )


async def _serve(port: int, delay: float) -> None:
    arrivals: list[list[Any]] = []
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: _Connection(arrivals, delay), "127.0.0.1", port, backlog=1024
    )
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.receiver")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        asyncio.run(_serve(args.port, args.delay))
    else:
        uvloop.run(_serve(args.port, args.delay))


# --- the benchmark's handle on it ----------------------------------------------------------


@dataclass(frozen=True)
class Arrival:
    at: float  # time.time() when the request was read
    path: str
    webhook_id: str | None
    timestamp: str | None
    signature: str | None
    body: bytes


class ReceiverProcess:
    """``python -m bench.receiver`` on 127.0.0.1 and a free port; a subprocess of ours."""

    def __init__(self, port: int, delay: float = 0.0) -> None:
        self.port = port
        self.delay = delay
        self.proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed in stop())
            prefix="bench-receiver-", suffix=".log", delete=False
        )
        self._control = httpx.Client(base_url=self.url, timeout=30, trust_env=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, cwd: Path, timeout: float = 15.0) -> ReceiverProcess:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.receiver",
                "--port",
                str(self.port),
                *(["--delay", str(self.delay)] if self.delay else []),
            ],
            cwd=cwd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"receiver exited with {self.proc.returncode}:\n{self.log()}")
            try:
                self.count()
                return self
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"receiver did not start:\n{self.log()}")
            time.sleep(0.05)

    def log(self) -> str:
        self._log.flush()
        return Path(self._log.name).read_text(errors="replace")[-4000:]

    def count(self) -> int:
        return int(self._control.get("/_count").json())

    def reset(self) -> int:
        return int(self._control.get("/_reset").json())

    def arrivals(self) -> list[Arrival]:
        rows = self._control.get("/_arrivals").json()
        return [Arrival(a, p, i, t, s, b.encode("utf-8")) for a, p, i, t, s, b in rows]

    def wait_for(self, count: int, timeout: float, alive: Any = None) -> float:
        """Wait until ``count`` requests have arrived; return when the waiting ended. ``alive``
        (optional) is called while waiting and may raise to give up early."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.count()
            if got >= count:
                return time.time()
            if alive is not None:
                alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"receiver got {got} of {count} requests in {timeout:.0f} s")
            time.sleep(0.05)

    def stop(self) -> None:
        if self._log.closed:
            return
        self._control.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()
        Path(self._log.name).unlink(missing_ok=True)


if __name__ == "__main__":
    main()
