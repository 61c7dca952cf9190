"""A database that misbehaves on demand: a TCP proxy on loopback in front of the test PostgreSQL.

- ``forward``: passes bytes both ways, a plain proxy;
- ``hang``: accepts new connections and never answers them, and stops passing bytes on the ones
  already open (a database that hangs or is frozen: its kernel still completes the handshake and
  takes the bytes); ``thaw`` passes them on again, as the database does once it resumes;
- ``down``: closes every connection and its listening port (a database that is down: connection
  refused from then on).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time


class DatabaseProxy:
    def __init__(self, target: tuple[str, int], mode: str = "forward") -> None:
        self.target = target
        self.mode = mode
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="db-proxy", daemon=True)

    def url(self, database: str, user: str = "postgres") -> str:
        return f"postgresql+psycopg://{user}@127.0.0.1:{self.port}/{database}"

    def __enter__(self) -> DatabaseProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def hang(self) -> None:
        self.mode = "hang"

    def thaw(self) -> None:
        """Forward again: what the open connections sent meanwhile goes on, and new connections
        are forwarded (those accepted while hung stay unanswered)."""
        self.mode = "forward"

    def down(self) -> None:
        """Refuse from now on: the listening port and every open connection are closed."""
        self.mode = "down"
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _keep(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed: down
            self._keep(client)
            if self.mode != "forward":
                continue  # held open, never answered
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            self._keep(upstream)
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                while self.mode == "hang":  # the bytes stay here: nobody answers
                    time.sleep(0.05)
                if self.mode == "down":
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)
