"""The webhook handler examples of the docs, run for real.

- ``docs/examples/webhook_handler.py`` runs as a subprocess against a real Inbots server: it
  verifies, confirms receipt, ignores a replay, rejects a bad signature, and acts again on a
  redeliver once its (time-limited) memory of the ``webhook-id`` has expired.
- The Node.js and Go snippets are extracted from ``docs/webhooks.md`` and run with ``node`` and
  ``go`` when those are installed (skipped otherwise), on samples signed by Inbots' own signing
  functions and end to end against the server.
- The signed sample printed in the docs verifies with ``inbots.webhooks.verify``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from inbots.webhooks import signing, verify
from tests.conftest import free_port
from tests.helpers import Api

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "webhooks.md"
HANDLER = ROOT / "docs" / "examples" / "webhook_handler.py"
# Short retries, so a slow start costs a second, not minutes (publish-lost must stay above the
# whole retry sequence: (0.2 + 0.4 + 0.8) * 1.2 + 4 * 2 s < 15 s).
FAST = {"retry_schedule": "0.2,0.4,0.8", "webhook_timeout_seconds": 2.0, "publish_lost_seconds": 15}
DEDUPE_SECONDS = 5.0
WEBHOOK_HEADERS = ("content-type", "webhook-id", "webhook-timestamp", "webhook-signature")


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return dict(FAST)


# --- helpers ---------------------------------------------------------------------------------


def doc_block(first_line: str) -> str:
    """The fenced code block of docs/webhooks.md whose first line is ``first_line``."""
    text = DOC.read_text(encoding="utf-8")
    for body in re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M):
        if body.startswith(first_line):
            return str(body)
    raise AssertionError(f"no code block starting with {first_line!r} in {DOC}")


def wait_until(check: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def wait_for_stamps(api: Api, delivery_id: str, *stamps: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        receipt = api.delivery(delivery_id)
        return receipt if all(receipt[s] for s in stamps) else None

    return wait_until(done, what=f"{', '.join(stamps)} on {delivery_id}")


@dataclass
class Process:
    popen: subprocess.Popen[str]
    url: str
    output: str = ""

    def stop(self) -> str:
        if self.popen.poll() is None:
            self.popen.terminate()
        try:
            self.output, _ = self.popen.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.output, _ = self.popen.communicate()
        return self.output


@contextmanager
def running(command: list[str], port: int, env: dict[str, str], cwd: Path) -> Iterator[Process]:
    """Start a handler process and wait until it answers HTTP on ``port``."""
    popen = subprocess.Popen(
        command,
        cwd=cwd,
        env={**os.environ, **env, "PORT": str(port), "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    process = Process(popen, f"http://127.0.0.1:{port}/inbots")

    def answers() -> bool:
        if popen.poll() is not None:
            raise AssertionError(f"{command[0]} exited early:\n{process.stop()}")
        try:
            httpx.get(process.url, timeout=1)
            return True
        except httpx.TransportError:
            return False

    try:
        wait_until(answers, timeout=30, what=f"{command} to listen on {port}")
        yield process
    finally:
        process.stop()


@dataclass
class Recorded:
    at: float
    headers: dict[str, str]
    body: bytes
    status: int


@dataclass
class Forwarder:
    """Sits between Inbots and a handler, recording each request so a test can replay it."""

    target: str
    requests: list[Recorded] = field(default_factory=list)
    url: str = ""


@contextmanager
def forwarding_to(target: str) -> Iterator[Forwarder]:
    state = Forwarder(target)
    client = httpx.Client(timeout=5)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            answer = client.post(
                state.target,
                content=body,
                headers={k: v for k, v in headers.items() if k in WEBHOOK_HEADERS},
            )
            state.requests.append(Recorded(time.monotonic(), headers, body, answer.status_code))
            self.send_response(answer.status_code)
            self.send_header("content-length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/inbots"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        client.close()


def replay(url: str, request: Recorded, **changes: Any) -> httpx.Response:
    """POST ``request`` again (same webhook headers and body unless changed)."""
    headers = {k: v for k, v in request.headers.items() if k in WEBHOOK_HEADERS}
    headers.update(changes.pop("headers", {}))
    return httpx.post(url, content=changes.pop("body", request.body), headers=headers, timeout=5)


def tampered_signature(request: Recorded) -> str:
    good = request.headers["webhook-signature"].split()[0]
    flipped = "A" if good[3] != "A" else "B"
    return good[:3] + flipped + good[4:]


def register(api: Api, name: str, webhook_url: str) -> tuple[str, str]:
    """Register an agent with a webhook; returns (api key, signing secret)."""
    created = api.ok("POST", "/agents", 201, json={"name": name, "webhook_url": webhook_url})
    return created["api_key"], created["webhook"]["signing_secret"]


def send_to(api: Api, recipient: str, body: str = "Please review PR 12") -> str:
    """A message from a fresh agent to ``recipient``; returns the recipient's delivery id."""
    sender = api.agent(f"to-{recipient}")
    thread = sender.open_thread("Review the schema migration", [recipient])
    sent = sender.send(thread["id"], body, summary="Review PR 12 before Friday", kind="task")
    return str(sent["deliveries"][0]["id"])


# --- the Python example handler --------------------------------------------------------------


def test_example_handler_verifies_confirms_and_drops_repeats_for_a_while(
    api: Api, tmp_path: Path
) -> None:
    port = free_port()
    wake_file = tmp_path / "wake.jsonl"

    def woken() -> list[dict[str, Any]]:
        text = wake_file.read_text() if wake_file.exists() else ""
        return [json.loads(line) for line in text.split("\n")[:-1]]  # whole lines only

    with forwarding_to(f"http://127.0.0.1:{port}/inbots") as forwarder:
        key, secret = register(api, "woken", forwarder.url)
        env = {
            "INBOTS_URL": api.base_url,
            "INBOTS_API_KEY": key,
            "INBOTS_WEBHOOK_SECRET": secret,
            "WAKE_FILE": str(wake_file),
            "DEDUPE_SECONDS": str(DEDUPE_SECONDS),
        }
        with running([sys.executable, str(HANDLER)], port, env, ROOT) as handler:
            delivery_id = send_to(api, "woken")

            # Verified, answered 204 (notified), woke the agent, confirmed receipt (delivered).
            receipt = wait_for_stamps(api, delivery_id, "notified_at", "delivered_at")
            assert receipt["state"] == "delivered"
            assert [(a["reason"], a["status_code"]) for a in receipt["attempts"]] == [("ok", 204)]
            (first,) = forwarder.requests
            assert first.headers["webhook-id"] == delivery_id
            (note,) = woken()
            assert note["delivery_id"] == delivery_id and "body" not in note
            assert note["summary"] == "Review PR 12 before Friday"

            # The same request again: accepted (2xx) but not acted on a second time.
            assert time.monotonic() - first.at < DEDUPE_SECONDS - 1, "too slow to test the window"
            again = replay(handler.url, first)
            assert 200 <= again.status_code < 300, again.text
            # A bad signature, a changed body, missing headers: rejected with 4xx.
            forged = replay(
                handler.url, first, headers={"webhook-signature": tampered_signature(first)}
            )
            assert 400 <= forged.status_code < 500
            changed = replay(handler.url, first, body=first.body.replace(b"woken", b"w0ken"))
            assert 400 <= changed.status_code < 500
            bare = httpx.post(handler.url, content=first.body, timeout=5)
            assert 400 <= bare.status_code < 500
            time.sleep(0.5)  # give a (wrong) second wake-up time to show
            assert len(woken()) == 1

            # Within the dedupe window a redeliver (same webhook-id) is answered but ignored ...
            api.ok("POST", f"/deliveries/{delivery_id}/redeliver", 202)
            wait_until(lambda: len(forwarder.requests) == 2, what="the first redeliver")
            redelivered = forwarder.requests[1]
            assert redelivered.headers["webhook-id"] == delivery_id
            assert redelivered.at - first.at < DEDUPE_SECONDS - 0.5, "too slow to test the window"
            time.sleep(0.3)
            assert len(woken()) == 1
            # ... once the window has passed, the next redeliver wakes the agent again.
            time.sleep(max(0.0, first.at + DEDUPE_SECONDS + 0.5 - time.monotonic()))
            api.ok("POST", f"/deliveries/{delivery_id}/redeliver", 202)
            wait_until(lambda: len(woken()) == 2, what="the second wake-up")

        log = handler.output
    assert log.count(f"repeat of {delivery_id}: ignored") == 2
    assert log.count("rejected:") == 3
    assert f"confirmed {delivery_id}: delivered" in log
    attempts = api.delivery(delivery_id)["attempts"]
    assert [(a["trigger"], a["reason"]) for a in attempts] == [
        ("publish", "ok"),
        ("redeliver", "ok"),
        ("redeliver", "ok"),
    ]


# --- the signed sample and the Python snippet of the docs ------------------------------------


def doc_sample() -> dict[str, Any]:
    block = doc_block("secret (current):")
    values = dict(re.findall(r"^([\w\- ()]+):\s+(\S.*)$", block, flags=re.M))
    return {
        "secrets": [values["secret (current)"], values["secret (previous)"]],
        "headers": {
            "webhook-id": values["webhook-id"],
            "webhook-timestamp": values["webhook-timestamp"],
            "webhook-signature": values["webhook-signature"],
        },
        "body": block.rstrip("\n").splitlines()[-1],
    }


def test_the_signed_sample_in_the_docs_verifies_with_either_secret() -> None:
    sample = doc_sample()
    at = int(sample["headers"]["webhook-timestamp"])
    for secret in sample["secrets"]:
        notification = verify(sample["body"].encode(), sample["headers"], secret, now=at)
        assert notification["delivery_id"] == sample["headers"]["webhook-id"]
    with pytest.raises(signing.BadSignature):
        verify(sample["body"], sample["headers"], signing.new_secret(), now=at)
    # The headers are what Inbots' signing functions make for it.
    made = signing.headers_for(
        sample["secrets"], sample["headers"]["webhook-id"], sample["body"], at
    )
    assert made == sample["headers"]


def test_the_fastapi_snippet_in_the_docs_verifies(monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    secret = signing.new_secret()
    monkeypatch.setenv("INBOTS_WEBHOOK_SECRET", secret)
    namespace: dict[str, Any] = {}
    exec(doc_block("import os\n\nfrom fastapi"), namespace)
    body = b'{"type":"message.created","delivery_id":"dlv_x","summary":"hi"}'
    headers = signing.headers_for([secret], "dlv_x", body)
    with TestClient(namespace["app"]) as client:
        assert client.post("/inbots", content=body, headers=headers).status_code == 204
        assert client.post("/inbots", content=body + b" ", headers=headers).status_code == 401
        assert client.post("/inbots", content=body).status_code == 401


# --- Node.js ---------------------------------------------------------------------------------

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

NODE_DRIVER = r"""
const { verifyWebhook } = require("./verify-inbots.js");
const cases = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
const results = cases.map((c) => {
  const headers = c.fetchHeaders ? new Headers(c.headers) : c.headers;
  const options = c.now === undefined ? {} : { now: c.now };
  try {
    const body = Buffer.from(c.body, "utf8");
    return { ok: true, value: verifyWebhook(body, headers, c.secret, options) };
  } catch (err) {
    return { ok: false, error: err.constructor.name + ": " + err.message };
  }
});
console.log(JSON.stringify(results));
"""


def node_files(directory: Path) -> Path:
    (directory / "verify-inbots.js").write_text(doc_block("// verify-inbots.js"))
    (directory / "server.js").write_text(doc_block("// server.js"))
    (directory / "driver.js").write_text(NODE_DRIVER)
    return directory


@needs_node
def test_node_snippet_verifies_what_inbots_signs(tmp_path: Path) -> None:
    directory = node_files(tmp_path)
    sample = doc_sample()
    new, old, other = signing.new_secret(), signing.new_secret(), signing.new_secret()
    body = json.dumps(
        {"type": "message.created", "delivery_id": "dlv_n", "summary": "é ✓"}, ensure_ascii=False
    )
    rotating = signing.headers_for([new, old], "dlv_n", body)
    now = int(time.time())
    cases: list[dict[str, Any]] = [
        # The sample printed in the docs, with either secret, and with an unrelated one.
        *(
            {**sample, "secret": s, "now": int(sample["headers"]["webhook-timestamp"])}
            for s in [*sample["secrets"], other]
        ),
        # Fresh ones signed by Inbots: both secrets of a rotation verify; a fetch Headers works.
        {"body": body, "headers": rotating, "secret": new},
        {"body": body, "headers": rotating, "secret": old, "fetchHeaders": True},
        {"body": body, "headers": rotating, "secret": other},
        {"body": body + " ", "headers": rotating, "secret": new},
        {
            "body": body,
            "headers": signing.headers_for([new], "dlv_n", body, now - 400),
            "secret": new,
        },
        {
            "body": body,
            "headers": signing.headers_for([new], "dlv_n", body, now + 400),
            "secret": new,
        },
        {
            "body": body,
            "headers": {k: v for k, v in rotating.items() if k != "webhook-id"},
            "secret": new,
        },
        {"body": body, "headers": {**rotating, "webhook-timestamp": "12ab"}, "secret": new},
    ]
    for case in cases:
        case.pop("secrets", None)
    done = subprocess.run(
        ["node", "driver.js"],
        cwd=directory,
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert [r["ok"] for r in results] == [
        True,
        True,
        False,
        True,
        True,
        False,
        False,
        False,
        False,
        False,
        False,
    ]
    assert results[0]["value"] == json.loads(sample["body"])
    assert results[3]["value"]["summary"] == "é ✓"
    errors = [r.get("error", "") for r in results]
    assert all(e.startswith("WebhookVerificationError") for e in errors if e)
    assert "too old" in errors[7] and "future" in errors[8] and "missing" in errors[9]


@needs_node
@pytest.mark.parametrize("backend", ["sqlite"])
def test_node_handler_from_the_docs_end_to_end(api: Api, tmp_path: Path) -> None:
    directory = node_files(tmp_path)
    port = free_port()
    with forwarding_to(f"http://127.0.0.1:{port}/inbots") as forwarder:
        key, secret = register(api, "node-agent", forwarder.url)
        env = {"INBOTS_URL": api.base_url, "INBOTS_API_KEY": key, "INBOTS_WEBHOOK_SECRET": secret}
        with running(["node", "server.js"], port, env, directory) as handler:
            delivery_id = send_to(api, "node-agent")
            wait_for_stamps(api, delivery_id, "notified_at", "delivered_at")
            (first,) = forwarder.requests
            assert replay(handler.url, first).status_code == 204
            forged = replay(
                handler.url, first, headers={"webhook-signature": tampered_signature(first)}
            )
            assert forged.status_code == 401
            time.sleep(0.3)
    assert handler.output.count(f"woke node-agent for {delivery_id}") == 1, handler.output


# --- Go --------------------------------------------------------------------------------------

needs_go = pytest.mark.skipif(shutil.which("go") is None, reason="go is not installed")


@pytest.fixture(scope="module")
def go_handler(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go handler of the docs, built once."""
    directory = tmp_path_factory.mktemp("go-handler")
    (directory / "main.go").write_text(doc_block("// main.go"))
    (directory / "go.mod").write_text("module inbotshandler\n\ngo 1.19\n")
    env = {**os.environ, "GOPROXY": "off", "GOTOOLCHAIN": "local"}
    if "HOME" not in env:
        env["GOCACHE"] = str(directory / ".gocache")
        env["GOPATH"] = str(directory / ".gopath")
    for command in (["go", "vet", "."], ["go", "build", "-o", "handler", "."]):
        done = subprocess.run(
            command, cwd=directory, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stdout + done.stderr
    return directory / "handler"


@needs_go
def test_go_verify_accepts_what_inbots_signs_and_rejects_the_rest(go_handler: Path) -> None:
    port = free_port()
    new, old = signing.new_secret(), signing.new_secret()
    body = json.dumps({"type": "other.event", "delivery_id": "dlv_g", "summary": "x"}).encode()
    now = int(time.time())
    with running(
        [str(go_handler)], port, {"INBOTS_WEBHOOK_SECRET": old}, go_handler.parent
    ) as handler:

        def post(content: bytes, headers: dict[str, str]) -> int:
            return httpx.post(handler.url, content=content, headers=headers, timeout=5).status_code

        rotating = signing.headers_for([new, old], "dlv_g", body)
        assert post(body, rotating) == 204  # the old secret still verifies during a rotation
        assert post(body, signing.headers_for([new], "dlv_g", body)) == 401
        assert post(body + b" ", rotating) == 401
        assert post(body, signing.headers_for([old], "dlv_g", body, now - 400)) == 401
        assert post(body, signing.headers_for([old], "dlv_g", body, now + 400)) == 401
        assert post(body, {"webhook-id": "dlv_g"}) == 401


@needs_go
@pytest.mark.parametrize("backend", ["sqlite"])
def test_go_handler_from_the_docs_end_to_end(api: Api, go_handler: Path) -> None:
    port = free_port()
    with forwarding_to(f"http://127.0.0.1:{port}/inbots") as forwarder:
        key, secret = register(api, "go-agent", forwarder.url)
        env = {"INBOTS_URL": api.base_url, "INBOTS_API_KEY": key, "INBOTS_WEBHOOK_SECRET": secret}
        with running([str(go_handler)], port, env, go_handler.parent) as handler:
            delivery_id = send_to(api, "go-agent")
            wait_for_stamps(api, delivery_id, "notified_at", "delivered_at")
            (first,) = forwarder.requests
            assert replay(handler.url, first).status_code == 204
            forged = replay(
                handler.url, first, headers={"webhook-signature": tampered_signature(first)}
            )
            assert forged.status_code == 401
            time.sleep(0.3)
    assert handler.output.count(f"woke go-agent for {delivery_id}") == 1, handler.output
