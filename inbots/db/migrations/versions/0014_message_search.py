"""message search: a full-text index of messages, kept by the database

Each message is indexed with its thread's title, its summary and its body (weighted in that
order). The index is not described by the models (``inbots.db.migrate.include_name`` keeps it
out of autogenerate): triggers keep it, so every writer (the services, a bulk seed, a retention
delete, a title change) leaves it consistent.

- SQLite: ``message_search``, an FTS5 table (``title``, ``summary``, ``body``), whose rowid is
  given by ``message_search_rows`` (``message_id`` → rowid; a message's own rowid may change on
  ``VACUUM``); triggers on insert, update and delete of ``messages`` and on a title change of
  ``threads``.
- PostgreSQL: ``messages.search_vector``, a ``tsvector`` (the ``simple`` configuration: no
  stemming, no stop words) set by a ``BEFORE`` trigger, with a GIN index; a title change of
  ``threads`` re-indexes that thread's messages.

NOTE: a later batch migration that recreates ``messages`` or ``threads`` on SQLite drops these
triggers; it must create them again (``SQLITE_TRIGGERS`` below).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROW = "(SELECT rowid FROM message_search_rows WHERE message_id = {ref}.id)"

SQLITE_TRIGGERS = [
    f"""CREATE TRIGGER message_search_insert AFTER INSERT ON messages BEGIN
        INSERT INTO message_search_rows (message_id, workspace_id)
        VALUES (new.id, new.workspace_id);
        INSERT INTO message_search (rowid, title, summary, body)
        VALUES ({ROW.format(ref="new")},
                (SELECT title FROM threads WHERE id = new.thread_id), new.summary, new.body);
    END""",
    f"""CREATE TRIGGER message_search_update AFTER UPDATE OF summary, body, thread_id
        ON messages BEGIN
        UPDATE message_search SET summary = new.summary, body = new.body,
            title = (SELECT title FROM threads WHERE id = new.thread_id)
        WHERE rowid = {ROW.format(ref="new")};
    END""",
    f"""CREATE TRIGGER message_search_delete AFTER DELETE ON messages BEGIN
        DELETE FROM message_search WHERE rowid = {ROW.format(ref="old")};
        DELETE FROM message_search_rows WHERE message_id = old.id;
    END""",
    """CREATE TRIGGER message_search_title AFTER UPDATE OF title ON threads
        WHEN old.title IS NOT new.title BEGIN
        UPDATE message_search SET title = new.title WHERE rowid IN (
            SELECT r.rowid FROM message_search_rows r JOIN messages m ON m.id = r.message_id
            WHERE m.thread_id = new.id);
    END""",
]

POSTGRES_FUNCTIONS = [
    """CREATE FUNCTION message_search_vector() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.search_vector :=
            setweight(to_tsvector('simple',
                coalesce((SELECT title FROM threads WHERE id = NEW.thread_id), '')), 'A')
            || setweight(to_tsvector('simple', coalesce(NEW.summary, '')), 'B')
            || setweight(to_tsvector('simple', NEW.body), 'C');
        RETURN NEW;
    END $$""",
    """CREATE FUNCTION message_search_title() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        -- Touching summary runs message_search_vector, which reads the new title.
        UPDATE messages SET summary = summary WHERE thread_id = NEW.id;
        RETURN NULL;
    END $$""",
]


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            "CREATE TABLE message_search_rows (rowid INTEGER PRIMARY KEY,"
            " message_id VARCHAR(40) NOT NULL UNIQUE, workspace_id VARCHAR(40) NOT NULL)"
        )
        op.execute(
            "CREATE VIRTUAL TABLE message_search USING fts5("
            "title, summary, body, tokenize = 'unicode61 remove_diacritics 0')"
        )
        op.execute(
            "INSERT INTO message_search_rows (message_id, workspace_id)"
            " SELECT id, workspace_id FROM messages ORDER BY id"
        )
        op.execute(
            "INSERT INTO message_search (rowid, title, summary, body) "
            "SELECT r.rowid, t.title, m.summary, m.body FROM message_search_rows r "
            "JOIN messages m ON m.id = r.message_id LEFT JOIN threads t ON t.id = m.thread_id"
        )
        for trigger in SQLITE_TRIGGERS:
            op.execute(trigger)
        return
    op.execute("ALTER TABLE messages ADD COLUMN search_vector tsvector")
    for function in POSTGRES_FUNCTIONS:
        op.execute(function)
    op.execute(
        "CREATE TRIGGER message_search_vector BEFORE INSERT OR UPDATE OF summary, body, thread_id "
        "ON messages FOR EACH ROW EXECUTE FUNCTION message_search_vector()"
    )
    op.execute(
        "CREATE TRIGGER message_search_title AFTER UPDATE OF title ON threads FOR EACH ROW "
        "WHEN (OLD.title IS DISTINCT FROM NEW.title) EXECUTE FUNCTION message_search_title()"
    )
    # The index follows every write, a bulk load or a replica's included: fire even under
    # session_replication_role = replica (which skips ordinary triggers).
    op.execute("ALTER TABLE messages ENABLE ALWAYS TRIGGER message_search_vector")
    op.execute("ALTER TABLE threads ENABLE ALWAYS TRIGGER message_search_title")
    op.execute("UPDATE messages SET summary = summary")  # index the messages already there
    op.execute("CREATE INDEX ix_message_search_vector ON messages USING gin (search_vector)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in ("insert", "update", "delete", "title"):
            op.execute(f"DROP TRIGGER IF EXISTS message_search_{name}")
        op.execute("DROP TABLE IF EXISTS message_search")
        op.execute("DROP TABLE IF EXISTS message_search_rows")
        return
    op.execute("DROP TRIGGER IF EXISTS message_search_title ON threads")
    op.execute("DROP TRIGGER IF EXISTS message_search_vector ON messages")
    op.execute("DROP FUNCTION IF EXISTS message_search_title()")
    op.execute("DROP FUNCTION IF EXISTS message_search_vector()")
    op.execute("DROP INDEX IF EXISTS ix_message_search_vector")
    op.execute("ALTER TABLE messages DROP COLUMN IF EXISTS search_vector")
