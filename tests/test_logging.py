"""Structured logs: JSON lines in production with the ids an operator greps for, and a
redaction filter that a test tries hard to get a secret past."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from inbots.config import load_settings
from inbots.kit.tokens import AGENT_KEY_PREFIX, OPERATOR_TOKEN_PREFIX, mint
from inbots.observability.logs import REDACTED, configure_logging
from tests.processes import serve
from tests.receivers import always, receiver

AGENT_KEY = mint(AGENT_KEY_PREFIX)
OPERATOR_TOKEN = mint(OPERATOR_TOKEN_PREFIX)
SIGNING_SECRET = "whsec_" + "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0"


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """The real handler, writing JSON lines to a buffer; the root logger restored after."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    stream = io.StringIO()
    handler = configure_logging(load_settings(log_format="json", log_level="DEBUG"), stream)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.handlers[:], root.level = saved[0], saved[1]


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_a_secret_cannot_be_logged_by_any_route(json_log: io.StringIO) -> None:
    log = logging.getLogger("inbots.test")
    log.info("agent key is %s", AGENT_KEY)  # in an argument
    log.warning(f"operator said {OPERATOR_TOKEN}")  # formatted into the message
    log.info("header", extra={"note": f"Authorization: Bearer {AGENT_KEY}"})  # in an extra
    log.info("signed", extra={"detail": f"secret={SIGNING_SECRET}"})
    log.info("dsn postgresql://inbots:hunter2hunter2@db:5432/inbots")
    log.info("fields", extra={"api_key": AGENT_KEY, "body": "private body", "token": "t"})
    try:
        raise ValueError(f"bad key {AGENT_KEY} for {OPERATOR_TOKEN}")
    except ValueError:
        log.exception("failed")  # in a traceback
    written = json_log.getvalue()
    for secret in (AGENT_KEY, OPERATOR_TOKEN, SIGNING_SECRET, "hunter2hunter2", "private body"):
        assert secret not in written
    records = lines(json_log)
    assert len(records) == 7
    assert records[0]["message"] == f"agent key is {REDACTED}"
    assert records[2]["note"] == f"Authorization: Bearer {REDACTED}"
    assert "api_key" not in records[5] and "body" not in records[5] and "token" not in records[5]
    assert "ValueError: bad key [redacted]" in records[6]["exception"]
    assert {"time", "level", "logger", "message"} <= set(records[0])


def test_ids_are_fields_of_the_line(json_log: io.StringIO) -> None:
    logging.getLogger("inbots.test").info(
        "attempt", extra={"delivery_id": "dlv_1", "message_id": "msg_1", "thread_id": "th_1"}
    )
    (record,) = lines(json_log)
    assert (record["delivery_id"], record["message_id"], record["thread_id"]) == (
        "dlv_1",
        "msg_1",
        "th_1",
    )
    assert record["level"] == "info" and record["logger"] == "inbots.test"


def test_production_server_writes_json_lines_with_ids_and_no_secrets(tmp_path: Path) -> None:
    body = "a private body: xylophone-93e1"
    with (
        receiver(always(204)) as hook,
        serve(
            tmp_path,
            INBOTS_ENVIRONMENT="production",
            INBOTS_OPERATOR_TOKEN=OPERATOR_TOKEN,
            INBOTS_WEBHOOK_ALLOW_PRIVATE="true",
        ) as server,
    ):
        ops = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
        with httpx.Client(base_url=server.url + "/v1", headers=ops, timeout=10) as client:
            hooked = client.post("/agents", json={"name": "hooked", "webhook_url": hook.url})
            sender = client.post("/agents", json={"name": "sender"})
            keys = [hooked.json()["api_key"], sender.json()["api_key"]]
            secret = hooked.json()["webhook"]["signing_secret"]
            as_sender = {"Authorization": f"Bearer {keys[1]}"}
            thread = client.post(
                "/threads", json={"title": "Logs", "participants": ["hooked"]}, headers=as_sender
            ).json()
            sent = client.post(
                f"/threads/{thread['id']}/messages", json={"body": body}, headers=as_sender
            ).json()
            hook.wait_for(1)
            # A caller with a wrong but well-formed key: refused, and the key not echoed.
            wrong = mint(AGENT_KEY_PREFIX)
            assert (
                client.get("/me", headers={"Authorization": f"Bearer {wrong}"}).status_code == 401
            )
    output = server.output
    for secret_text in (OPERATOR_TOKEN, *keys, secret, wrong, body, "xylophone"):
        assert secret_text not in output
    records = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert records, output
    accepted = [r for r in records if r["message"] == "message accepted"]
    assert accepted and accepted[0]["message_id"] == sent["message"]["id"]
    assert accepted[0]["thread_id"] == thread["id"]
    attempts = [r for r in records if r["message"].startswith("webhook attempt")]
    assert attempts and attempts[0]["delivery_id"] == sent["deliveries"][0]["id"]
    assert attempts[0]["status_code"] == 204
    assert any(r["logger"] == "uvicorn.access" for r in records)  # server lines come through too
