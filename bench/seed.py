"""Bulk seeding with SQLAlchemy Core: a large Inbots mailbox, and the baseline's item table.

The API would take minutes to store 100,000 deliveries; these inserts take seconds. Rows are
shaped as the services write them and go in as plain tuples (SQLite: ``executemany`` through
``Connection.exec_driver_sql``; PostgreSQL: ``COPY`` on the same connection), with times already
in the form the column types would bind (SQLite: ``YYYY-MM-DD HH:MM:SS.ffffff`` UTC text, as
SQLAlchemy stores it; PostgreSQL: aware datetimes). Per-row type processing in SQLAlchemy would
cost more than the database does.

Ids keep Inbots' shape and order (``<prefix>_<10 base32 chars of milliseconds><16 more>``): the
time part is the row's own creation time and the tail a zero-padded sequence number, so ids sort
by creation like the service's own.
"""

from __future__ import annotations

import hashlib
import math
import random
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import count
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, Engine, text

if TYPE_CHECKING:
    import psycopg

from inbots.deliveries.tallies import recount
from inbots.models.agents import KIND_AGENT
from inbots.models.threads import OPEN

BATCH = 5_000
RECIPIENTS_PER_MESSAGE = 5  # every seeded thread has 6 participants
MESSAGES_PER_THREAD = 20
PEERS = 200  # other agents sharing the database with the measured one
OTHERS_UNACKED = 0.05  # share of other agents' deliveries left unacknowledged
KINDS = ("task", "question", "update", "decision", "handoff")
WORDS = ["please", "review", "the", "draft", "plan", "and", "confirm", "numbers", "before"]
WORDS += ["release", "today", "checking", "logs", "deploy", "staging", "rollback", "budget"]
_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # inbots.kit.ids: Crockford base32, lowercase

AGENT_COLUMNS = (
    "id",
    "workspace_id",
    "kind",
    "username",
    "description",
    "key_hash",
    "status",
    "created_at",
)
THREAD_COLUMNS = (
    "id",
    "workspace_id",
    "title",
    "goal",
    "status",
    "opened_by_id",
    "created_at",
    "last_activity_at",
)
PARTICIPANT_COLUMNS = ("thread_id", "agent_id", "added_at", "added_by_id")
MESSAGE_COLUMNS = (
    "id",
    "workspace_id",
    "thread_id",
    "sender_id",
    "kind",
    "summary",
    "body",
    "created_at",
)
DELIVERY_COLUMNS = (
    "id",
    "workspace_id",
    "message_id",
    "thread_id",
    "recipient_id",
    "accepted_at",
    "moved_at",
    "delivered_at",
    "fetched_at",
    "acknowledged_at",
    "publish_count",
    "outcome",
)


@dataclass(frozen=True)
class InboxSeed:
    deliveries: int  # rows the seed put in the deliveries table
    messages: int
    threads: int
    reader_unacked: int
    reader_acked: int
    unacked_total: int  # of the seeded rows, how many are unacknowledged (in the inbox index)


def _time_ms(value: datetime) -> str:
    ms = int(value.timestamp() * 1000)
    return "".join(_ALPHABET[(ms >> (5 * i)) & 31] for i in reversed(range(10)))


class Ids:
    """Inbots-shaped, creation-ordered, unique ids for seeded rows."""

    def __init__(self) -> None:
        self._seq = count()
        self._times: dict[datetime, str] = {}

    def __call__(self, prefix: str, at: datetime) -> str:
        head = self._times.get(at)
        if head is None:
            head = self._times[at] = _time_ms(at)
        return f"{prefix}_{head}{next(self._seq):016d}"


def time_binder(conn: Connection) -> Callable[[datetime | None], Any]:
    """What a UTC datetime column binds to on this connection's database."""
    if conn.dialect.name == "sqlite":

        def sqlite_time(value: datetime | None) -> Any:
            if value is None:
                return None
            return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")

        return sqlite_time
    return lambda value: value


def bulk_insert(
    conn: Connection, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]
) -> None:
    """SQLite: ``executemany`` per batch through SQLAlchemy (a loop in C). PostgreSQL: ``COPY``
    on the same connection's psycopg cursor (executemany or multi-row ``VALUES`` take 15-40 s for
    100,000 rows there, most of it in psycopg's Python-level query handling)."""
    if conn.dialect.name == "sqlite":
        marks = ", ".join(["?"] * len(columns))
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
        for start in range(0, len(rows), BATCH):
            conn.exec_driver_sql(sql, list(rows[start : start + BATCH]))
        return
    dbapi = cast("psycopg.Connection[Any]", conn.connection.dbapi_connection)
    with (
        dbapi.cursor() as cursor,
        cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row(row)


def _texts(rng: random.Random, low: int, high: int, n: int = 400) -> list[str]:
    """A pool of filler texts to draw from (drawing is cheaper than writing 100,000 of them)."""
    pool = []
    for _ in range(n):
        size = rng.randint(low, high)
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < size:
            words.append(rng.choice(WORDS))
        pool.append(" ".join(words)[:size])
    return pool


def tag_word(n: int) -> str:
    """The ``n``-th rare word ``seed_inbox(tags=…)`` puts in bodies."""
    return f"case{n:04d}"


def seed_inbox(
    engine: Engine,
    *,
    workspace_id: str,
    reader_id: str,
    deliveries: int,
    reader_unacked: int,
    reader_acked: int,
    seed: int = 20261129,
    tags: int = 0,
) -> InboxSeed:
    """Store ``deliveries`` deliveries in one workspace, ``reader_unacked`` of them unacknowledged
    for ``reader_id`` and ``reader_acked`` acknowledged; the rest go to ``PEERS`` other agents,
    ``OTHERS_UNACKED`` of them unacknowledged. Each message has five recipients in a six-person
    thread; the reader never sends, so it receives every message of the threads it is in. The
    reader's mail is interleaved with everyone else's in time (id) order. With ``tags``, each
    body also ends with one of that many rare words (``case0000``, ``case0001``, …), drawn from
    a generator of its own (the rest of the seed is the same with or without): words a search
    finds in about one message in ``tags``."""
    rng = random.Random(seed)
    tag_rng = random.Random(seed + 1)
    ids = Ids()
    now = datetime.now(UTC)
    reader_messages = reader_unacked + reader_acked
    total_messages = math.ceil(deliveries / RECIPIENTS_PER_MESSAGE)
    if reader_messages > total_messages:
        raise ValueError("the reader cannot have more deliveries than there are messages")
    titles = _texts(rng, 20, 80)
    goals = _texts(rng, 40, 200)
    bodies = _texts(rng, 60, 400)
    summaries = _texts(rng, 30, 120)

    joined = now - timedelta(days=30)
    peer_ids = [ids("ag", joined) for _ in range(PEERS)]

    reader_threads = math.ceil(reader_messages / MESSAGES_PER_THREAD)
    other_threads = max(1, math.ceil((total_messages - reader_messages) / MESSAGES_PER_THREAD))
    opened = now - timedelta(days=10)
    threads: list[tuple[str, list[str]]] = []  # (id, participants)
    for t in range(reader_threads + other_threads):
        with_reader = t < reader_threads
        people = rng.sample(peer_ids, RECIPIENTS_PER_MESSAGE + (0 if with_reader else 1))
        if with_reader:
            people.append(reader_id)
        threads.append((ids("th", opened), people))

    # Which thread each message goes to: the reader's threads get exactly reader_messages, the
    # others the rest; shuffled, so the reader's mail is spread through the id order.
    slots = [t % reader_threads for t in range(reader_messages)] if reader_threads else []
    slots += [reader_threads + i % other_threads for i in range(total_messages - reader_messages)]
    rng.shuffle(slots)
    unacked_picks = set(rng.sample(range(reader_messages), reader_unacked))

    messages: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    reader_seen = 0
    unacked_total = 0
    start = now - timedelta(seconds=len(slots) + 60)
    for index, t in enumerate(slots):
        thread_id, people = threads[t]
        sender = rng.choice(people[:RECIPIENTS_PER_MESSAGE])  # never the reader (it is last)
        sent_at = start + timedelta(seconds=index)
        done_at = sent_at + timedelta(seconds=30)
        body = rng.choice(bodies)
        kind = rng.choice(KINDS)  # drawn in this order, as always: body, kind, summary
        summary = rng.choice(summaries) if len(body) > 200 else None
        if tags:
            body += f" {tag_word(tag_rng.randrange(tags))}"
        message_id = ids("msg", sent_at)
        messages.append(
            {
                "id": message_id,
                "thread_id": thread_id,
                "sender_id": sender,
                "kind": kind,
                "summary": summary,
                "body": body,
                "created_at": sent_at,
            }
        )
        for recipient in people:
            if recipient == sender or (len(rows) >= deliveries and recipient != reader_id):
                continue
            if recipient == reader_id:
                unacked = reader_seen in unacked_picks
                reader_seen += 1
            else:
                unacked = rng.random() < OTHERS_UNACKED
            unacked_total += unacked
            rows.append(
                {
                    "id": ids("dlv", sent_at),
                    "message_id": message_id,
                    "thread_id": thread_id,
                    "recipient_id": recipient,
                    "accepted_at": sent_at,
                    "done_at": None if unacked else done_at,
                }
            )
    if reader_seen != reader_messages:
        raise AssertionError(f"seeded {reader_seen} reader deliveries, meant {reader_messages}")

    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":  # a million rows take longer than a request may
            conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
        if conn.dialect.name == "postgresql":
            # The rows are consistent by construction: skip the per-row foreign-key triggers
            # for this transaction (needs a superuser, as the benchmark's throwaway database has).
            conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
        ts = time_binder(conn)
        agents = [
            (
                agent_id,
                workspace_id,
                KIND_AGENT,
                f"peer-{i:04d}",
                "A seeded agent.",
                hashlib.sha256(secrets.token_bytes(32)).hexdigest(),
                "active",
                ts(joined),
            )
            for i, agent_id in enumerate(peer_ids)
        ]
        bulk_insert(conn, "agents", AGENT_COLUMNS, agents)
        thread_rows = [
            (
                tid,
                workspace_id,
                rng.choice(titles),
                rng.choice(goals),
                OPEN,
                people[0],
                ts(opened),
                ts(now),
            )
            for tid, people in threads
        ]
        bulk_insert(conn, "threads", THREAD_COLUMNS, thread_rows)
        members = [(tid, p, ts(opened), people[0]) for tid, people in threads for p in people]
        bulk_insert(conn, "participants", PARTICIPANT_COLUMNS, members)
        message_rows = [
            (
                m["id"],
                workspace_id,
                m["thread_id"],
                m["sender_id"],
                m["kind"],
                m["summary"],
                m["body"],
                ts(m["created_at"]),
            )
            for m in messages
        ]
        bulk_insert(conn, "messages", MESSAGE_COLUMNS, message_rows)
        bound: dict[datetime | None, Any] = {None: None}
        for r in rows:  # many rows share a time: convert each once
            for key in ("accepted_at", "done_at"):
                if r[key] not in bound:
                    bound[r[key]] = ts(r[key])
        delivery_rows = [
            (r["id"], workspace_id, r["message_id"], r["thread_id"], r["recipient_id"])
            + (bound[r["accepted_at"]],)
            + (bound[r["done_at"] or r["accepted_at"]],)  # moved: the newest progress stamp
            + (bound[r["done_at"]],) * 3  # delivered, fetched, acknowledged
            + (0, None if r["done_at"] is None else "done")
            for r in rows
        ]
        bulk_insert(conn, "deliveries", DELIVERY_COLUMNS, delivery_rows)
        recount(conn)  # the acknowledged tally, as acknowledging them one by one would keep it
    return InboxSeed(
        deliveries=len(rows),
        messages=len(messages),
        threads=len(threads),
        reader_unacked=reader_unacked,
        reader_acked=reader_acked,
        unacked_total=unacked_total,
    )


def seed_items(engine: Engine, *, rows: int, owner: str, owned: int, seed: int = 7) -> None:
    """The listing baseline's table: ``rows`` rows, ``owned`` of them belonging to ``owner`` and
    the rest spread over ``PEERS`` other owners, interleaved in id order."""
    rng = random.Random(seed)
    titles = _texts(rng, 20, 80)
    summaries = _texts(rng, 30, 120)
    others = [f"owner-{i:04d}" for i in range(PEERS)]
    mine = set(rng.sample(range(rows), owned))
    with engine.begin() as conn:
        created = time_binder(conn)(datetime.now(UTC))
        if conn.dialect.name != "sqlite":
            created = created.replace(tzinfo=None)  # a naive UTC column
        bulk_insert(
            conn,
            "bench_items",
            ("id", "owner", "thread_id", "title", "sender", "kind", "summary", "created_at"),
            [
                (
                    f"itm_{i:09d}",  # sorts in insertion order: "oldest first"
                    owner if i in mine else rng.choice(others),
                    f"th_{rng.randrange(1000):06d}",
                    rng.choice(titles),
                    f"peer-{rng.randrange(PEERS):04d}",
                    rng.choice(KINDS),
                    rng.choice(summaries),
                    created,
                )
                for i in range(rows)
            ],
        )


def analyze(engine: Engine, tables: Iterable[str]) -> None:
    """Fresh planner statistics after a bulk load, as autovacuum (PostgreSQL) would give."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("ANALYZE")
        else:
            for table in tables:
                conn.execute(text(f"ANALYZE {table}"))
        conn.commit()
