"""The baseline: a bare FastAPI app doing the least a database-backed endpoint can do.

``POST /insert`` runs one transaction with one INSERT of a row into a simple table (the
counterpart of sending a message). ``GET /items?owner=`` selects 50 rows by an indexed key, oldest
first, from a 100,000-row table (the counterpart of listing an inbox). Both are sync endpoints
(run in the thread pool, as Inbots' are) with pydantic request and response models.

The engine is configured like Inbots' (``inbots.db.engine``), deliberately without importing it:
same pool size, and on SQLite the same pragmas (WAL, ``synchronous=NORMAL``, busy timeout) with
writes beginning ``IMMEDIATE``. So the baseline pays the same durability and connection costs,
and the ratio to it is what Inbots adds on top.

Served by ``python -m uvicorn bench.baseline_app:create_app --factory`` with the database URL in
``BENCH_BASELINE_DATABASE_URL``.
"""

from __future__ import annotations

import os
import secrets
import time
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, Field
from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    Index,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
    insert,
    select,
)

URL_ENV = "BENCH_BASELINE_DATABASE_URL"
POOL_SIZE = 10  # Inbots' default db_pool_size
LIST_LIMIT = 50  # Inbots' default list_default

metadata = MetaData()

# The send baseline writes here: one row per request.
bench_rows = Table(
    "bench_rows",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("sender", String(40), nullable=False),
    Column("body", Text, nullable=False),
    Column("created_at", DateTime(), nullable=False),  # naive UTC
)

# The listing baseline reads here: 100,000 rows, 50 of one owner's selected by an index.
bench_items = Table(
    "bench_items",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("owner", String(40), nullable=False),
    Column("thread_id", String(40), nullable=False),
    Column("title", String(400), nullable=False),
    Column("sender", String(32), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("summary", String(800), nullable=False),
    Column("created_at", DateTime(), nullable=False),  # naive UTC
    Index("ix_bench_items_owner_id", "owner", "id"),
)


def new_id(prefix: str) -> str:
    """Time-ordered enough for a baseline: milliseconds then randomness."""
    return f"{prefix}_{time.time_ns() // 1_000_000:013d}{secrets.token_hex(8)}"


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30.0},
            pool_size=POOL_SIZE,
            max_overflow=POOL_SIZE,
        )

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # BEGIN is emitted below
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Any) -> None:
            mode = "DEFERRED" if conn.get_execution_options().get("readonly") else "IMMEDIATE"
            conn.exec_driver_sql(f"BEGIN {mode}")

        return engine
    # No pre-ping: Inbots checks a pooled connection without a round trip (only one whose
    # socket has something to read is pinged, see inbots/db/engine.py), which costs what no
    # check costs on a healthy database.
    return create_engine(url, pool_size=POOL_SIZE, max_overflow=POOL_SIZE, pool_timeout=30)


class InsertIn(BaseModel):
    body: str = Field(max_length=10_000)


class InsertOut(BaseModel):
    id: str
    created_at: datetime


class Item(BaseModel):
    id: str
    owner: str
    thread_id: str
    title: str
    sender: str
    kind: str
    summary: str
    created_at: datetime


class Items(BaseModel):
    items: list[Item]
    returned: int


def create_app(url: str | None = None) -> FastAPI:
    engine = make_engine(url or os.environ[URL_ENV])
    reader = engine.execution_options(readonly=True)
    app = FastAPI(title="Inbots benchmark baseline")

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/insert", status_code=201, response_model=InsertOut)
    def insert_row(payload: InsertIn) -> InsertOut:
        row = {
            "id": new_id("row"),
            "sender": "baseline",
            "body": payload.body,
            "created_at": datetime.now(UTC).replace(tzinfo=None),
        }
        with engine.begin() as conn:
            conn.execute(insert(bench_rows), row)
        return InsertOut(id=row["id"], created_at=row["created_at"])

    @app.get("/items", response_model=Items)
    def list_items(owner: str) -> Items:
        with reader.begin() as conn:
            rows = conn.execute(
                select(bench_items)
                .where(bench_items.c.owner == owner)
                .order_by(bench_items.c.id)
                .limit(LIST_LIMIT)
            ).all()
        items = [Item(**row._mapping) for row in rows]
        return Items(items=items, returned=len(items))

    return app
