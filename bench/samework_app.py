"""The same-work floor: Starlette and psycopg 3, no ORM, doing in raw SQL the durable work Inbots
does for a send and for an inbox page, on the same migrated Inbots database (PostgreSQL).

Where ``bench.baseline_app`` asks "what does the least database-backed endpoint cost",
this asks "what does *this* work cost when written by hand": the same statements, in the same
transactions, with the same answers. The ratio Inbots / floor is then what the framework, the ORM
and the layering add, and not what the work itself costs.

``POST /v1/threads/{id}/messages`` (``{"body": ...}``), as Inbots answers it (201):

1. Authenticate, in autocommit: one SELECT of ``agent_keys`` joined with ``agents`` by the
   SHA-256 of the bearer token (``inbots.kit.tokens.hash_token``), compared in constant time;
   an archived agent is refused.
2. ``BEGIN``; the thread, if the caller is a participant, not closed and not held for the
   operator, locked ``FOR UPDATE OF threads``; 404 otherwise, 409 if it is not open.
3. The recipients: the other active participants, in the order they joined.
4. The workspace's approval policy (``approval_policies`` by primary key), as
   ``inbots.approvals.service.holds`` reads it (a policy that holds is not mirrored: the bench
   sets none).
5. ``INSERT`` the message; ``INSERT`` its N deliveries in one multi-row statement with the
   columns Inbots fills (``inbots.messages.service._deliver``); ``UPDATE threads SET
   last_activity_at``.
6. Admit: ``SELECT … FROM inbots_admit(…)`` (migration 0018) with the arguments
   ``inbots.messages.governance._count_postgres`` gives it (the caps and the rate limit read
   from the same ``INBOTS_*`` variables as Inbots'); refused (429) when the bucket is empty or
   a cap is passed (the floor does not recount: the bench stays far from the caps).
7. ``COMMIT``; the answer (message and deliveries) as JSON.

``GET /v1/inbox?limit=`` (default 50), as Inbots answers it: authenticate as above; then in
autocommit (as Inbots' inbox on PostgreSQL) the count of waiting deliveries (the index-only scan
of ``ix_deliveries_inbox``), the page of waiting deliveries with their thread, message and sender
(limit + 1, urgent first then oldest), and, if any on the page lacks it, one ``UPDATE`` stamping
``delivered_at`` (and ``moved_at``). Summaries and states are computed with Inbots' own pure
functions (``shown_summary``, ``state_of``), so the answer is byte for byte the same shape.

Served by ``python -m uvicorn bench.samework_app:create_app --factory`` with the database URL in
``BENCH_SAMEWORK_DATABASE_URL`` (a ``postgresql://`` or ``postgresql+psycopg://`` URL).
"""

from __future__ import annotations

import hmac
import json
import os
import queue
import re
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import psycopg
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from inbots.deliveries.state import STATE_STAMPS, state_of
from inbots.kit.clock import rfc3339
from inbots.kit.ids import new_id
from inbots.kit.text import shown_summary
from inbots.kit.tokens import hash_token

URL_ENV = "BENCH_SAMEWORK_DATABASE_URL"
POOL_SIZE = 10  # Inbots' default db_pool_size (and as many again in overflow)
LIST_DEFAULT = 50  # INBOTS_LIST_DEFAULT
SUMMARY_SHOWN = 120  # INBOTS_SUMMARY_SHOWN
LOCK_SPACE = 0x1B07  # governance._LOCK_SPACE
MESSAGE_CREATED = "message.created"

AUTH_SQL = (
    "SELECT k.key_hash, a.workspace_id, a.id, a.username, a.status FROM agent_keys k "
    "JOIN agents a ON a.id = k.agent_id WHERE k.key_hash = %s"
)
THREAD_SQL = (
    "SELECT t.id, t.status FROM threads t JOIN participants p "
    "ON p.thread_id = t.id AND p.agent_id = %(agent)s "
    "WHERE t.id = %(thread)s AND t.workspace_id = %(ws)s AND t.status <> 'closed' "
    "AND (t.approval IS NULL OR t.approval = 'approved' OR t.opened_by_id = %(agent)s) "
    "FOR UPDATE OF t"
)
RECIPIENTS_SQL = (
    "SELECT a.id, a.username, a.webhook_url, a.webhook_events FROM agents a "
    "JOIN participants p ON p.agent_id = a.id "
    "WHERE p.thread_id = %s AND a.id <> %s AND a.status = 'active' "
    "ORDER BY p.added_at, a.username"
)
POLICY_SQL = "SELECT * FROM approval_policies WHERE workspace_id = %s"
MESSAGE_SQL = (
    "INSERT INTO messages (id, workspace_id, thread_id, sender_id, kind, priority, summary, "
    "body, reply_to_id, created_at, idempotency_key, content_hash, ttl_seconds, expires_at, "
    "approval) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, NULL, %s, NULL, NULL, NULL, NULL, NULL)"
)
DELIVERY_COLUMNS = (
    "id, workspace_id, message_id, thread_id, recipient_id, priority_rank, sender_id, "
    "expires_at, accepted_at, moved_at, publish_count, last_published_at, held_at"
)
DELIVERY_ROW = "(%s, %s, %s, %s, %s, %s, %s, NULL, %s, %s, %s, %s, NULL)"
ACTIVITY_SQL = "UPDATE threads SET last_activity_at = %s WHERE id = %s"
ADMIT_SQL = (
    "SELECT recipient_id, pair_count, total, exclusive, tokens FROM inbots_admit("
    "%(agent)s, CAST(%(recipients)s AS varchar[]), CAST(%(keys)s AS integer[]), %(limited)s, "
    "%(burst)s, %(per_second)s, %(now)s, %(space)s, %(pair_cap)s, %(exclusive_above)s)"
)
WAITING = (
    "d.acknowledged_at IS NULL AND d.expired_at IS NULL AND d.thread_closed_at IS NULL "
    "AND (d.held_at IS NULL OR d.approved_at IS NOT NULL)"
)
COUNT_SQL = f"SELECT count(*) FROM deliveries d WHERE d.recipient_id = %s AND {WAITING}"
PAGE_SQL = (
    "SELECT d.id, d.message_id, d.thread_id, d.priority_rank, "
    + ", ".join(f"d.{name}" for name in STATE_STAMPS)
    + ", t.title, t.ref, a.username, m.kind, m.priority, m.summary, m.body, m.created_at "
    "FROM deliveries d JOIN threads t ON t.id = d.thread_id "
    "JOIN messages m ON m.id = d.message_id JOIN agents a ON a.id = m.sender_id "
    f"WHERE d.recipient_id = %s AND {WAITING} "
    "ORDER BY d.priority_rank, d.id LIMIT %s"
)
STAMP_SQL = (
    "UPDATE deliveries SET delivered_at = %s, moved_at = %s "
    "WHERE id = ANY(%s) AND delivered_at IS NULL"
)

STAMP_SQLITE = (
    "UPDATE deliveries SET delivered_at = ?, moved_at = ? "
    "WHERE id IN ({ids}) AND delivered_at IS NULL"
)


def _int_env(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


class Settings:
    """The few Inbots settings the floor's work depends on, from the same variables."""

    def __init__(self) -> None:
        self.cap_per_recipient = _int_env("INBOTS_CAP_PER_RECIPIENT", 1000)
        self.cap_per_pair = _int_env("INBOTS_CAP_PER_PAIR", 200)
        self.rate_per_minute = _int_env("INBOTS_RATE_LIMIT_PER_MINUTE", 120)
        self.rate_burst = _int_env("INBOTS_RATE_LIMIT_BURST", 30)


class Pool:
    """At most 2 × ``POOL_SIZE`` psycopg connections, opened when first needed, kept idle up to
    ``POOL_SIZE`` (SQLAlchemy's QueuePool with Inbots' size and overflow)."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self.connect = connect
        self.idle: queue.LifoQueue[Any] = queue.LifoQueue()
        self.slots = threading.BoundedSemaphore(2 * POOL_SIZE)

    @contextmanager
    def connection(self) -> Iterator[Any]:
        self.slots.acquire()
        try:
            try:
                conn = self.idle.get_nowait()
            except queue.Empty:
                conn = self.connect()
            try:
                yield conn
            except BaseException:
                conn.close()
                raise
            if self.idle.qsize() < POOL_SIZE:
                self.idle.put(conn)
            else:
                conn.close()
        finally:
            self.slots.release()


def _sqlite_time(value: datetime) -> str:
    """As SQLAlchemy stores Inbots' UTC times on SQLite: naive UTC, microseconds."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _sqlite_read_time(value: bytes) -> datetime:
    return datetime.fromisoformat(value.decode()).replace(tzinfo=UTC)


sqlite3.register_adapter(datetime, _sqlite_time)
sqlite3.register_converter("DATETIME", _sqlite_read_time)


class SqliteConn:
    """A sqlite3 connection with the pragmas and transactions of Inbots' SQLite engine (WAL,
    ``synchronous=NORMAL``, foreign keys, busy timeout; writes ``BEGIN IMMEDIATE``, reads
    ``BEGIN DEFERRED``), speaking the psycopg calls the floor makes (``%s`` and ``%(name)s``
    placeholders are rewritten once per statement)."""

    sqlite = True

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(
            path,
            timeout=30.0,
            check_same_thread=False,
            isolation_level=None,
            detect_types=sqlite3.PARSE_DECLTYPES,
        )
        for pragma in (
            "journal_mode=WAL",
            "synchronous=NORMAL",
            "foreign_keys=ON",
            "busy_timeout=30000",
        ):
            self.conn.execute(f"PRAGMA {pragma}")
        self.statements: dict[str, str] = {}

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        text = self.statements.get(sql)
        if text is None:
            text = re.sub(r"%\((\w+)\)s", r":\1", sql).replace("%s", "?")
            text = text.replace(" FOR UPDATE OF t", "")
            self.statements[sql] = text
        return self.conn.execute(text, params)

    @contextmanager
    def transaction(self, mode: str = "IMMEDIATE") -> Iterator[None]:
        self.conn.execute(f"BEGIN {mode}")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def reading(self) -> AbstractContextManager[None]:
        return self.transaction("DEFERRED")

    def close(self) -> None:
        self.conn.close()


# SQLite's governance (inbots.messages.governance and inbots.auth.rate_limit.spend): the
# token bucket upserted, the pair rows upserted, the recipients' ledger sums read.
BUCKET_SQL = (
    "INSERT INTO send_buckets (agent_id, tokens, stamp) VALUES (?, ?, ?) "
    "ON CONFLICT (agent_id) DO UPDATE SET tokens = CASE WHEN send_buckets.tokens + "
    "(? - send_buckets.stamp) * ? > ? THEN ? ELSE send_buckets.tokens + "
    "(? - send_buckets.stamp) * ? END - 1, stamp = ? RETURNING tokens"
)
LEDGER_ROW = "(?, ?, 1)"
LEDGER_SQL = (
    "INSERT INTO cap_ledger (recipient_id, sender_id, open_count) VALUES {rows} "
    "ON CONFLICT (recipient_id, sender_id) DO UPDATE SET open_count = "
    "cap_ledger.open_count + 1 RETURNING recipient_id, open_count"
)
SUMS_SQL = (
    "SELECT recipient_id, sum(open_count) FROM cap_ledger WHERE recipient_id IN ({ids}) "
    "GROUP BY recipient_id"
)


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _authenticate(conn: Any, header: str) -> tuple[str, str, str]:
    """(workspace id, agent id, username) of the bearer's agent key, or 401."""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Refused(401, "missing bearer token")
    digest = hash_token(token)
    row = conn.execute(AUTH_SQL, (digest,)).fetchone()
    if row is None or not hmac.compare_digest(digest, row[0]) or row[4] == "archived":
        raise Refused(401, "bad token")
    return row[1], row[2], row[3]


def _admit_sqlite(
    conn: SqliteConn, s: Settings, agent_id: str, ids: list[str], limited: bool
) -> list[tuple[Any, ...]]:
    """What ``inbots_admit`` answers, as governance.py counts on SQLite: the bucket spent (one
    token), the pair rows upserted, the recipients' ledger sums read (no locks: one writer)."""
    tokens = None
    if limited:
        now, rate, burst = time.time(), s.rate_per_minute / 60.0, float(s.rate_burst)
        row = conn.execute(
            BUCKET_SQL, (agent_id, burst - 1, now, now, rate, burst, burst, now, rate, now)
        ).fetchone()
        tokens = float(row[0])
        if tokens < 0 or not ids:
            return [(None, None, None, None, tokens)]
    if not ids:
        return [(None, None, None, None, tokens)]
    pairs = dict(
        conn.execute(
            LEDGER_SQL.format(rows=", ".join([LEDGER_ROW] * len(ids))),
            [v for rid in ids for v in (rid, agent_id)],
        ).fetchall()
    )
    sums = dict(conn.execute(SUMS_SQL.format(ids=", ".join("?" * len(ids))), ids).fetchall())
    return [(rid, pairs[rid], int(sums.get(rid) or 0), False, tokens) for rid in ids]


def _lock_key(recipient_id: str) -> int:
    return zlib.crc32(recipient_id.encode()) & 0x7FFFFFFF


def _subscribed(events: str | None) -> bool:
    return events is None or MESSAGE_CREATED in events.split(",")


def create_app(url: str | None = None) -> Starlette:
    url = url or os.environ[URL_ENV]
    sqlite = url.startswith("sqlite")
    if sqlite:
        path = url.split("///", 1)[1]
        pool = Pool(lambda: SqliteConn(path))
    else:
        conninfo = url.replace("postgresql+psycopg://", "postgresql://")
        pool = Pool(lambda: psycopg.connect(conninfo, autocommit=True))
    s = Settings()
    max_connections: list[int] = []

    def in_flight_bound(conn: Any) -> int:
        if sqlite:  # one writer at a time: nothing in flight, no margin
            return 0
        if not max_connections:
            row = conn.execute("SHOW max_connections").fetchone()
            assert row is not None
            max_connections.append(int(row[0]))
        return max_connections[0]

    def send(conn: Any, auth: str, thread_id: str, body: str) -> dict[str, Any]:
        workspace_id, agent_id, username = _authenticate(conn, auth)
        if not body.strip():
            raise Refused(422, "body must be a non-empty string.")
        margin = in_flight_bound(conn) if s.cap_per_recipient else 0
        with conn.transaction():
            found = conn.execute(
                THREAD_SQL, {"agent": agent_id, "thread": thread_id, "ws": workspace_id}
            ).fetchone()
            if found is None:
                raise Refused(404, f"thread {thread_id} not found")
            if found[1] != "open":
                raise Refused(409, f"thread {thread_id} is not open")
            recipients = conn.execute(RECIPIENTS_SQL, (thread_id, agent_id)).fetchall()
            if not recipients:
                raise Refused(422, "nobody else in this thread can receive this message")
            conn.execute(POLICY_SQL, (workspace_id,)).fetchone()  # none holds in the bench
            now = datetime.now(UTC)
            message_id = new_id("msg")
            conn.execute(
                MESSAGE_SQL,
                (
                    message_id,
                    workspace_id,
                    thread_id,
                    agent_id,
                    "update",
                    "normal",
                    None,
                    body,
                    now,
                ),
            )
            rows = []
            params: list[Any] = []
            for rid, _name, webhook_url, events in recipients:
                push = bool(webhook_url) and _subscribed(events)
                did = new_id("dlv")
                rows.append(did)
                params += [
                    did,
                    workspace_id,
                    message_id,
                    thread_id,
                    rid,
                    1,  # priority_rank of "normal"
                    agent_id,
                    now,
                    now,
                    1 if push else 0,
                    now if push else None,
                ]
            conn.execute(
                f"INSERT INTO deliveries ({DELIVERY_COLUMNS}) VALUES "
                + ", ".join([DELIVERY_ROW] * len(rows)),
                params,
            )
            conn.execute(ACTIVITY_SQL, (now, thread_id))
            limited = bool(s.rate_per_minute)
            capped = bool(s.cap_per_recipient or s.cap_per_pair)
            ids = sorted(r[0] for r in recipients) if capped else []
            if (limited or capped) and sqlite:
                admitted = _admit_sqlite(conn, s, agent_id, ids, limited)
            elif limited or capped:
                admitted = conn.execute(
                    ADMIT_SQL,
                    {
                        "agent": agent_id,
                        "recipients": ids,
                        "keys": [_lock_key(rid) for rid in ids],
                        "limited": limited,
                        "burst": float(s.rate_burst),
                        "per_second": s.rate_per_minute / 60.0,
                        "now": time.time(),
                        "space": LOCK_SPACE,
                        "pair_cap": s.cap_per_pair,
                        "exclusive_above": s.cap_per_recipient - 2 * margin
                        if s.cap_per_recipient
                        else None,
                    },
                ).fetchall()
            if limited and admitted[0][4] < 0:
                raise Refused(429, "rate limited")
            for _rid, pair, total, exclusive, _tokens in admitted if capped else ():
                if exclusive or (s.cap_per_pair and pair > s.cap_per_pair):
                    raise Refused(429, "near a cap (the floor does not recount)")
                if s.cap_per_recipient and total > s.cap_per_recipient - margin:
                    raise Refused(429, "near a cap (the floor does not recount)")
        created = rfc3339(now)
        return {
            "message": {
                "id": message_id,
                "thread_id": thread_id,
                "sender": username,
                "kind": "update",
                "priority": "normal",
                "summary": None,
                "body": body,
                "reply_to": None,
                "created_at": created,
                "ttl_seconds": None,
                "expires_at": None,
            },
            "deliveries": [
                {"id": did, "recipient": r[1], "state": "accepted"}
                for did, r in zip(rows, recipients, strict=True)
            ],
            "duplicate": False,
            "held": False,
        }

    def inbox(conn: Any, auth: str, limit: int) -> dict[str, Any]:
        _workspace_id, agent_id, _username = _authenticate(conn, auth)
        # PostgreSQL: autocommit, as Inbots' inbox there; SQLite: one deferred transaction.
        with conn.reading() if sqlite else nullcontext():
            return _listed(conn, agent_id, limit)

    def _listed(conn: Any, agent_id: str, limit: int) -> dict[str, Any]:
        row = conn.execute(COUNT_SQL, (agent_id,)).fetchone()
        waiting = int(row[0]) if row else 0
        names = ("id", "message_id", "thread_id", "priority_rank", *STATE_STAMPS)
        listed = conn.execute(PAGE_SQL, (agent_id, limit + 1)).fetchall()
        page, following = listed[:limit], len(listed) > limit
        deliveries = [SimpleNamespace(**dict(zip(names, r, strict=False))) for r in page]
        unstamped = [d.id for d in deliveries if d.delivered_at is None]
        if unstamped:
            now = datetime.now(UTC)
            if sqlite:
                marks = ", ".join("?" * len(unstamped))
                conn.execute(STAMP_SQLITE.format(ids=marks), (now, now, *unstamped))
            else:
                conn.execute(STAMP_SQL, (now, now, unstamped))
            for d in deliveries:
                if d.delivered_at is None:
                    d.delivered_at = now
        extra = len(names)
        items = [
            {
                "delivery_id": d.id,
                "message_id": d.message_id,
                "thread_id": d.thread_id,
                "thread_title": r[extra],
                "thread_ref": r[extra + 1],
                "sender": r[extra + 2],
                "kind": r[extra + 3],
                "priority": r[extra + 4],
                "summary": shown_summary(r[extra + 5], r[extra + 6], SUMMARY_SHOWN),
                "sent_at": rfc3339(r[extra + 7]),
                "state": state_of(d),
            }
            for d, r in zip(deliveries, page, strict=True)
        ]
        last = deliveries[-1] if deliveries else None
        return {
            "items": items,
            "returned": len(items),
            "waiting": waiting,
            "more": following,
            "next_cursor": f"{last.priority_rank}:{last.id}" if following and last else None,
        }

    async def messages_route(request: Request) -> Response:
        payload = await request.json()
        thread_id = request.path_params["thread_id"]
        auth = request.headers.get("authorization", "")
        return await run_in_threadpool(
            answer, lambda conn: (201, send(conn, auth, thread_id, payload["body"]))
        )

    async def inbox_route(request: Request) -> Response:
        limit = int(request.query_params.get("limit", LIST_DEFAULT))
        auth = request.headers.get("authorization", "")
        return await run_in_threadpool(answer, lambda conn: (200, inbox(conn, auth, limit)))

    def answer(work: Callable[[Any], tuple[int, dict[str, Any]]]) -> Response:
        """Runs in Starlette's thread pool, as Inbots' sync endpoints do."""
        try:
            with pool.connection() as conn:
                status, body = work(conn)
        except Refused as exc:
            return JSONResponse({"detail": str(exc)}, status_code=exc.status)
        return Response(
            json.dumps(body, separators=(",", ":")),
            status_code=status,
            media_type="application/json",
        )

    async def healthz(_request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/v1/threads/{thread_id}/messages", messages_route, methods=["POST"]),
            Route("/v1/inbox", inbox_route),
        ]
    )
