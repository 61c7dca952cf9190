"""Migrations: ``inbots db upgrade`` builds the schema the models describe, on SQLite and on
PostgreSQL, and running it again changes nothing."""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

from inbots.agents.service import create_agent
from inbots.auth.service import authenticate
from inbots.config import load_settings
from inbots.db.engine import Database
from inbots.db.migrate import alembic_config, include_name
from inbots.db.uow import unit_of_work
from inbots.deliveries.schemas import AckRequest
from inbots.deliveries.service import acknowledge
from inbots.messages.schemas import MessageCreate
from inbots.messages.service import send_message
from inbots.models import Base
from inbots.threads.schemas import ThreadCreate
from inbots.threads.service import open_thread
from inbots.workspaces.service import create_workspace
from tests.conftest import IN_CI, PG_ADMIN_URL, _pg_available
from tests.processes import inbots_executable

TOKEN = re.compile(r"ops_[A-Za-z0-9_-]{43,}")
TABLES = {
    "workspaces",
    "operator_tokens",
    "agents",
    "threads",
    "participants",
    "messages",
    "deliveries",
    "delivery_attempts",
    "events",
    "heartbeats",
    "enrollments",
    "agent_keys",
    "agent_sessions",
}


def head_revision() -> str:
    script = ScriptDirectory.from_config(alembic_config(load_settings(database_url="sqlite://")))
    head = script.get_current_head()
    assert head
    return head


def db_upgrade(url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INBOTS_")}
    env["INBOTS_DATABASE_URL"] = url
    return subprocess.run(
        [inbots_executable(), "db", "upgrade"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database, never migrated."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    problem = _pg_available()
    if problem:
        if IN_CI:
            pytest.fail(problem + " (CI=true: PostgreSQL tests must run)")
        pytest.skip(problem)
    name = f"inbots_migrate_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def test_db_upgrade_builds_the_schema_on_a_fresh_database(fresh_url: str, tmp_path: Path) -> None:
    done = db_upgrade(fresh_url, tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    head = head_revision()
    assert head in done.stdout, done.stdout
    engine = create_engine(fresh_url)
    try:
        assert set(inspect(engine).get_table_names()) >= TABLES
        with engine.connect() as conn:
            assert MigrationContext.configure(conn).get_current_revision() == head
    finally:
        engine.dispose()


def test_db_upgrade_is_idempotent(fresh_url: str, tmp_path: Path) -> None:
    first = db_upgrade(fresh_url, tmp_path)
    assert first.returncode == 0, (first.stdout, first.stderr)
    engine = create_engine(fresh_url)
    try:
        with engine.connect() as conn:
            seeded = conn.execute(text("SELECT name FROM workspaces ORDER BY id")).scalars().all()
        now = datetime.now(UTC)
        with engine.begin() as conn:
            conn.execute(
                text("INSERT INTO workspaces (id, name, created_at) VALUES (:id, :name, :at)"),
                {"id": "ws_keepme", "name": "survives", "at": now.isoformat()},
            )
        second = db_upgrade(fresh_url, tmp_path)
        assert second.returncode == 0, (second.stdout, second.stderr)
        assert head_revision() in second.stdout
        assert TOKEN.findall(second.stdout) == [], "a second upgrade minted another token"
        with engine.connect() as conn:
            names = conn.execute(text("SELECT name FROM workspaces ORDER BY id")).scalars().all()
            versions = conn.execute(text("SELECT version_num FROM alembic_version")).all()
        assert sorted(names) == sorted([*seeded, "survives"])
        assert versions == [(head_revision(),)]
    finally:
        engine.dispose()
    third = db_upgrade(fresh_url, tmp_path)
    assert third.returncode == 0, (third.stdout, third.stderr)


def test_migrated_schema_matches_the_models(fresh_url: str, tmp_path: Path) -> None:
    done = db_upgrade(fresh_url, tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    engine = create_engine(fresh_url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn,
                opts={
                    "compare_type": True,
                    "target_metadata": Base.metadata,
                    "include_name": include_name,
                },
            )
            differences = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert differences == [], "\n".join(map(str, differences))


def test_alembic_check_finds_nothing_to_generate(fresh_url: str, tmp_path: Path) -> None:
    done = db_upgrade(fresh_url, tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    command.check(alembic_config(load_settings(database_url=fresh_url)))


def test_downgrade_to_base_and_upgrade_again(fresh_url: str, tmp_path: Path) -> None:
    settings = load_settings(database_url=fresh_url)
    config = alembic_config(settings)
    assert db_upgrade(fresh_url, tmp_path).returncode == 0
    command.downgrade(config, "base")
    engine = create_engine(fresh_url)
    try:
        assert not TABLES & set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert db_upgrade(fresh_url, tmp_path).returncode == 0
    engine = create_engine(fresh_url)
    try:
        assert set(inspect(engine).get_table_names()) >= TABLES
    finally:
        engine.dispose()


def test_db_upgrade_failure_is_one_line_without_traceback(tmp_path: Path) -> None:
    done = db_upgrade("postgresql+psycopg://nobody@127.0.0.1:1/none", tmp_path)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    assert "migration failed" in done.stderr


def test_0013_moves_each_agents_key_to_agent_keys_and_back(fresh_url: str) -> None:
    """The key an agent had before 0013 keeps working as its "default" key; downgrading puts
    each agent's oldest key back in agents.key_hash."""
    config = alembic_config(load_settings(database_url=fresh_url))
    command.upgrade(config, "0012")
    engine = create_engine(fresh_url)
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    try:
        with engine.begin() as conn:
            conn.execute(
                text("INSERT INTO workspaces (id, name, created_at) VALUES ('ws_1', 'w', :now)"),
                {"now": now},
            )
            for n, key_hash in ((1, "a" * 64), (2, "b" * 64), (3, None)):
                conn.execute(
                    text(
                        "INSERT INTO agents (id, workspace_id, kind, username, key_hash, status,"
                        " created_at) VALUES (:id, 'ws_1', :kind, :name, :hash, 'active', :now)"
                    ),
                    {
                        "id": f"ag_0000000000000000000000000{n}",
                        "kind": "operator" if key_hash is None else "agent",
                        "name": f"agent-{n}",
                        "hash": key_hash,
                        "now": now,
                    },
                )
        command.upgrade(config, "0013")
        with engine.connect() as conn:
            keys = conn.execute(
                text("SELECT id, agent_id, key_hash, label, hint FROM agent_keys ORDER BY id")
            ).all()
            emptied = conn.execute(text("SELECT count(*) FROM agents WHERE key_hash IS NOT NULL"))
            assert emptied.scalar() == 0
        agents = [f"ag_0000000000000000000000000{n}" for n in (1, 2)]
        assert [tuple(k) for k in keys] == [
            ("key_" + agents[0][3:], agents[0], "a" * 64, "default", "agt_"),
            ("key_" + agents[1][3:], agents[1], "b" * 64, "default", "agt_"),
        ]
        with engine.begin() as conn:  # a second key, newer: the downgrade keeps the oldest
            conn.execute(
                text(
                    "INSERT INTO agent_keys (id, agent_id, key_hash, hint, label, created_at)"
                    " VALUES ('key_1zzzzzzzzzzzzzzzzzzzzzzzzz', :agent, :hash, 'agt_cccc', 'ci',"
                    " :now)"
                ),
                {"agent": agents[0], "hash": "c" * 64, "now": now},
            )
        command.downgrade(config, "0012")
        with engine.connect() as conn:
            restored = conn.execute(text("SELECT username, key_hash FROM agents ORDER BY id"))
            assert [tuple(r) for r in restored] == [
                ("agent-1", "a" * 64),
                ("agent-2", "b" * 64),
                ("agent-3", None),
            ]
    finally:
        engine.dispose()


def test_0020_tallies_the_acknowledged_deliveries_already_stored(fresh_url: str) -> None:
    """Mail acknowledged before 0020 is counted into the tally by the upgrade, per workspace;
    the downgrade drops the tally and the index, and the next upgrade counts again."""
    settings = load_settings(database_url=fresh_url)
    config = alembic_config(settings)
    command.upgrade(config, "head")
    db = Database(settings)
    try:
        for name, acked in (("first", 3), ("second", 1)):
            with unit_of_work(db) as uow:
                workspace = create_workspace(uow, name).workspace_id
                keys = [create_agent(uow, workspace, n).api_key for n in ("writer", "reader")]
            with unit_of_work(db, readonly=True) as uow:
                writer, reader = (authenticate(uow, key) for key in keys)
            with unit_of_work(db) as uow:
                thread = open_thread(uow, writer, ThreadCreate(title="t", participants=["reader"]))
                ids = [
                    send_message(uow, writer, thread.id, MessageCreate(body=f"m{n}"))
                    .deliveries[0]
                    .id
                    for n in range(4)
                ]
            with unit_of_work(db) as uow:
                acknowledge(uow, reader, AckRequest(ids=ids[:acked]))
        expected = {("first", 3), ("second", 1)}
        tallied = text(
            "SELECT w.name, sum(t.acknowledged) FROM delivery_tallies t"
            " JOIN workspaces w ON w.id = t.workspace_id GROUP BY w.name"
        )
        with db.engine.connect() as conn:
            assert {tuple(row) for row in conn.execute(tallied)} == expected

        db.dispose()
        command.downgrade(config, "0019")
        with db.engine.connect() as conn:
            assert "delivery_tallies" not in inspect(conn).get_table_names()
            indexes = {i["name"] for i in inspect(conn).get_indexes("deliveries")}
            assert "ix_deliveries_open" not in indexes
        command.upgrade(config, "0020")
        with db.engine.connect() as conn:
            assert {tuple(row) for row in conn.execute(tallied)} == expected
    finally:
        db.dispose()
