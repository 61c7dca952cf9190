"""The same-work floor of the notify worker: one process, N threads, psycopg 3 and httpx, no
Celery, no ORM, draining the accepted webhook deliveries of an Inbots database (PostgreSQL).

Each thread loops until nothing is left to claim:

1. **Claim** a batch in one statement (autocommit): ``UPDATE deliveries … SET claimed_until``
   for up to ``--batch`` rows waiting to be published (the predicate of
   ``ix_deliveries_republish``, and not claimed), picked ``FOR UPDATE SKIP LOCKED`` oldest
   publish first, joined with the message, thread, sender and recipient, ``RETURNING`` what the
   notification needs (its body fields, the URL and the signing secret).
2. **Sign and POST** each: the ``message.created`` body (``inbots.webhooks.payloads``, the shape
   of docs/webhooks.md), encoded and signed per Standard Webhooks
   (``inbots.webhooks.signing.headers_for``), POSTed as the worker posts
   (``inbots.deliveries.attempt.make_client`` and ``_send``): straight to one shared httpx
   transport (its connection pool: no ``httpx.Client``, so no redirects; proxies ignored; its
   pool limits), with its ``User-Agent`` and timeout on each request.
3. **Record** the batch in one transaction: one multi-row ``INSERT`` of the attempt rows (the
   columns ``inbots.deliveries.attempts.attempt_values`` fills) and one ``UPDATE`` releasing
   the claims and stamping ``notified_at`` (and ``moved_at``) on the answered 2xx.

Not mirrored (not durable work, or not met in the bench): the per-URL in-flight slots in Redis,
parking, retries and failure streaks (the bench's receiver always answers 204).

    python -m bench.samework_notify --database-url URL [--threads 8] [--batch 8]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg

from inbots.deliveries.attempt import USER_AGENT
from inbots.kit.ids import new_id
from inbots.kit.text import shown_summary
from inbots.webhooks import payloads, signing

SUMMARY_SHOWN = 120  # INBOTS_SUMMARY_SHOWN
CLAIM_SECONDS = 60  # how long a claim holds (INBOTS_CLAIM_SECONDS-like; only a crash needs it)
TIMEOUT_SECONDS = 10.0  # INBOTS_WEBHOOK_TIMEOUT_SECONDS

CLAIM_SQL = f"""
WITH picked AS (
    SELECT id FROM deliveries
    WHERE publish_count > 0 AND notified_at IS NULL AND failed_at IS NULL
      AND acknowledged_at IS NULL AND thread_closed_at IS NULL AND parked_key IS NULL
      AND claimed_until IS NULL
    ORDER BY last_published_at
    LIMIT %s
    FOR UPDATE SKIP LOCKED)
UPDATE deliveries d SET claimed_until = now() + interval '{CLAIM_SECONDS} seconds'
FROM picked, messages m, threads t, agents s, agents r
WHERE d.id = picked.id AND m.id = d.message_id AND t.id = d.thread_id
  AND s.id = m.sender_id AND r.id = d.recipient_id
RETURNING d.id, d.message_id, d.thread_id, d.publish_count, t.title, t.ref, s.username,
    r.username, m.kind, m.priority, m.summary, m.body, m.created_at, r.webhook_url,
    r.webhook_secret
"""
ATTEMPT_COLUMNS = (
    "id, delivery_id, event_id, number, publish, trigger, url, started_at, duration_ms, "
    "status_code, reason, response_excerpt"
)
ATTEMPT_ROW = "(%s, %s, NULL, 1, %s, 'publish', %s, %s, %s, %s, %s, NULL)"
NOTIFIED_SQL = (
    "UPDATE deliveries SET claimed_until = NULL, next_attempt_at = NULL, "
    "notified_at = coalesce(notified_at, %(now)s), "
    "moved_at = CASE WHEN notified_at IS NULL THEN %(now)s ELSE moved_at END "
    "WHERE id = ANY(%(ids)s)"
)


def make_client() -> httpx.HTTPTransport:
    return httpx.HTTPTransport(
        trust_env=False,
        limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
    )


TIMEOUT = httpx.Timeout(TIMEOUT_SECONDS).as_dict()


def send(client: httpx.HTTPTransport, url: str, payload: bytes, signed: dict[str, str]) -> int:
    """POST ``payload`` as the worker does (``inbots.deliveries.attempt._send``): its
    ``User-Agent`` and timeout on the request, straight to the transport; the status code."""
    headers = {"user-agent": USER_AGENT, "content-type": "application/json", **signed}
    request = httpx.Request(
        "POST", url, content=payload, headers=headers, extensions={"timeout": TIMEOUT}
    )
    response = client.handle_request(request)
    try:
        response.read()
    finally:
        response.close()
    return response.status_code


def post_one(client: httpx.HTTPTransport, row: tuple[Any, ...]) -> tuple[list[Any], bool]:
    """Build, sign and POST one notification; its attempt row's values, and whether it was a 2xx."""
    (did, message_id, thread_id, publish, title, ref, sender, recipient) = row[:8]
    kind, priority, summary, body, created_at, url, secret = row[8:]
    payload = payloads.encode(
        payloads.message_created(
            delivery_id=did,
            message_id=message_id,
            thread_id=thread_id,
            thread_title=title,
            thread_ref=ref,
            sender=sender,
            recipient=recipient,
            kind=kind,
            priority=priority,
            summary=shown_summary(summary, body, SUMMARY_SHOWN),
            created_at=created_at,
        )
    )
    signed = signing.headers_for([secret], did, payload)
    started_at = datetime.now(UTC)
    t0 = time.perf_counter()
    try:
        status: int | None = send(client, url, payload, signed)
        ok = status is not None and 200 <= status < 300
        reason = "ok" if ok else f"http_{status}"
    except httpx.HTTPError:
        status, ok, reason = None, False, "network"
    duration = int((time.perf_counter() - t0) * 1000)
    return [new_id("att"), did, publish, url, started_at, duration, status, reason], ok


def work(conninfo: str, client: httpx.HTTPTransport, batch: int, counts: list[int]) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        while True:
            claimed = conn.execute(CLAIM_SQL, (batch,)).fetchall()
            if not claimed:
                return
            attempts, notified = [], []
            for row in claimed:
                values, ok = post_one(client, row)
                attempts.append(values)
                if ok:
                    notified.append(row[0])
            with conn.transaction():
                conn.execute(
                    f"INSERT INTO delivery_attempts ({ATTEMPT_COLUMNS}) VALUES "
                    + ", ".join([ATTEMPT_ROW] * len(attempts)),
                    [v for values in attempts for v in values],
                )
                # Failures keep their claim (the floor does not retry): they stay out of the loop.
                if notified:
                    conn.execute(NOTIFIED_SQL, {"now": datetime.now(UTC), "ids": notified})
            counts.append(len(notified))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.samework_notify")
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args(argv)
    conninfo = args.database_url.replace("postgresql+psycopg://", "postgresql://")
    counts: list[int] = []
    with make_client() as client:
        threads = [
            threading.Thread(target=work, args=(conninfo, client, args.batch, counts))
            for _ in range(args.threads)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    print(sum(counts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
