"""A small Inbots webhook handler: verify, drop repeats, answer 204, wake the agent, confirm.

Standard library + ``inbots`` (for :func:`inbots.webhooks.verify`) + ``httpx``. Run it with::

    INBOTS_URL=http://127.0.0.1:8000 INBOTS_API_KEY=agt_… INBOTS_WEBHOOK_SECRET=whsec_… \\
    PORT=8080 python docs/examples/webhook_handler.py

and point the agent's webhook at ``http://127.0.0.1:8080/`` (any path is accepted). What it does
with each POST:

1. reads the raw body and verifies it with ``inbots.webhooks.verify`` (signature over the exact
   bytes, timestamp within 5 minutes): a failure is answered ``401`` and Inbots retries;
2. drops a repeat: a ``webhook-id`` (the delivery id) seen in the last ``DEDUPE_SECONDS`` is
   answered ``204`` and not acted on again. The memory is time-limited on purpose: an operator's
   redeliver reuses the same ``webhook-id``, and must wake the agent once the window has passed;
3. answers ``204`` at once; the rest happens on a background thread, so Inbots never waits on
   the agent (it gives up on a receiver after 10 s and retries);
4. "wakes the agent": appends the notification as one JSON line to ``WAKE_FILE`` (if set), runs
   ``WAKE_COMMAND`` (if set) with the notification JSON on stdin and ``INBOTS_DELIVERY_ID``,
   ``INBOTS_MESSAGE_ID``, ``INBOTS_THREAD_ID``, ``INBOTS_SENDER`` and ``INBOTS_SUMMARY`` in its
   environment (never interpolated into the command line), and prints one line either way;
5. confirms receipt with ``POST {INBOTS_URL}/v1/deliveries/{id}/received`` under the agent's key
   (stamps the delivery ``delivered``), when ``INBOTS_URL`` and ``INBOTS_API_KEY`` are set and
   waking worked (a failing ``WAKE_COMMAND`` is logged and not confirmed).

The agent then reads the message itself (``GET /v1/messages/{id}`` stamps it fetched) and
acknowledges it (``POST /v1/acks``) when done. ``GET`` on any path answers ``200 ok`` (a liveness
check).

Environment:

==========================  ================================================================
``INBOTS_WEBHOOK_SECRET``   the agent's ``whsec_…`` signing secret (required)
``INBOTS_URL``              base URL of Inbots, e.g. ``http://127.0.0.1:8000``
``INBOTS_API_KEY``          the agent's ``agt_…`` key, to confirm receipt
``PORT``                    port to listen on (default 8080)
``HOST``                    interface to listen on (default 127.0.0.1)
``DEDUPE_SECONDS``          how long a ``webhook-id`` is remembered (default 3600)
``WAKE_FILE``               append each new notification here, one JSON line each
``WAKE_COMMAND``            run this (split like a shell would, not run through one) per
                            new notification
==========================  ================================================================

One process, memory only: a restart forgets the ids it has seen (a repeat then wakes the agent
once more, which is harmless: waking is idempotent for an agent that reads its inbox). Several
handler processes behind one URL need a shared memory instead, e.g. Redis
``SET <webhook-id> 1 NX EX <seconds>``.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import shlex
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from inbots.webhooks import VerificationError, verify

MAX_BODY_BYTES = 64 * 1024  # a notification is well under 2 KiB


def log(text: str) -> None:
    print(text, file=sys.stdout, flush=True)


class SeenIds:
    """Webhook ids handled in the last ``ttl`` seconds. ``first(id)`` is atomic: of two requests
    with the same id arriving together, exactly one is told it is the first."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._expires: dict[str, float] = {}
        self._lock = threading.Lock()

    def first(self, webhook_id: str) -> bool:
        now = time.monotonic()
        with self._lock:
            for key in [k for k, at in self._expires.items() if at <= now]:
                del self._expires[key]
            if webhook_id in self._expires:
                return False
            self._expires[webhook_id] = now + self.ttl
            return True


class Agent:
    """What the handler does for each new notification, on one background thread."""

    def __init__(self, env: dict[str, str]) -> None:
        self.inbots_url = env.get("INBOTS_URL", "").rstrip("/")
        self.api_key = env.get("INBOTS_API_KEY", "")
        self.wake_file = env.get("WAKE_FILE", "")
        self.wake_command = shlex.split(env.get("WAKE_COMMAND", ""))
        self.jobs: queue.Queue[dict[str, Any]] = queue.Queue()
        self.client = httpx.Client(timeout=10)
        threading.Thread(target=self._work, name="wake-agent", daemon=True).start()

    def _work(self) -> None:
        while True:
            notification = self.jobs.get()
            try:
                self.wake(notification)
                self.confirm(notification["delivery_id"])
            except Exception as exc:  # keep serving; Inbots already has its 204
                log(f"error handling {notification.get('delivery_id')}: {exc!r}")

    def wake(self, n: dict[str, Any]) -> None:
        line = json.dumps(n, ensure_ascii=False)
        who = f"{n['recipient']} from {n['sender']}"
        log(f"new mail for {who}: {n['summary']!r} ({n['delivery_id']})")
        if self.wake_file:
            with open(self.wake_file, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        if self.wake_command:
            env = {
                **os.environ,
                "INBOTS_DELIVERY_ID": n["delivery_id"],
                "INBOTS_MESSAGE_ID": n["message_id"],
                "INBOTS_THREAD_ID": n["thread_id"],
                "INBOTS_SENDER": n["sender"],
                "INBOTS_SUMMARY": n["summary"],
            }
            subprocess.run(self.wake_command, input=line, text=True, env=env, check=True)

    def confirm(self, delivery_id: str) -> None:
        """Tell Inbots the agent was told: stamps the delivery delivered."""
        if not (self.inbots_url and self.api_key):
            return
        response = self.client.post(
            f"{self.inbots_url}/v1/deliveries/{delivery_id}/received",
            headers={"Authorization": f"Bearer {self.api_key}"},
        )
        response.raise_for_status()
        log(f"confirmed {delivery_id}: {response.json()['state']}")


def make_handler(secret: str, seen: SeenIds, agent: Agent) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "inbots-example-handler"

        def answer(self, status: int, text: str = "") -> None:
            data = text.encode()
            self.send_response(status)
            if data:
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self.answer(200, "ok\n")

        def do_POST(self) -> None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY_BYTES:
                self.close_connection = True
                return self.answer(413, "a notification is at most 64 KiB\n")
            raw = self.rfile.read(length)  # the exact bytes that were signed
            try:
                notification = verify(raw, dict(self.headers.items()), secret)
            except (VerificationError, ValueError) as exc:
                log(f"rejected: {exc}")
                return self.answer(401, f"{exc}\n")
            webhook_id = self.headers["webhook-id"]
            if not isinstance(notification, dict) or notification.get("type") != "message.created":
                return self.answer(204)  # a type this handler does not know: accept, ignore
            if not seen.first(webhook_id):
                log(f"repeat of {webhook_id}: ignored")
                return self.answer(204)
            self.answer(204)  # answer first ...
            agent.jobs.put(notification)  # ... then wake the agent, off the request

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per event is printed above instead

    return Handler


def main() -> None:
    env = dict(os.environ)
    secret = env.get("INBOTS_WEBHOOK_SECRET", "")
    try:
        if not secret.startswith("whsec_"):
            raise ValueError
        base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    except ValueError:
        sys.exit("set INBOTS_WEBHOOK_SECRET to the agent's whsec_… signing secret")
    host = env.get("HOST", "127.0.0.1")
    port = int(env.get("PORT", "8080"))
    seen = SeenIds(float(env.get("DEDUPE_SECONDS", "3600")))
    server = ThreadingHTTPServer((host, port), make_handler(secret, seen, Agent(env)))
    server.daemon_threads = True
    log(f"listening on http://{host}:{port}/")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
