"""Alembic, driven from code: ``inbots db upgrade`` and ``inbots serve`` call :func:`upgrade`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

from inbots.config import Settings
from inbots.db.engine import Database, normalize_url

MIGRATIONS = Path(__file__).parent / "migrations"


# The message search index (migration 0014) is owned by the migrations, not the models: an FTS5
# table and its row map on SQLite, a trigger-kept tsvector column and its GIN index on PostgreSQL.
SEARCH_TABLE_PREFIX = "message_search"
SEARCH_COLUMN = ("messages", "search_vector")
SEARCH_INDEX = "ix_message_search_vector"


def include_name(name: str | None, type_: str, parent_names: Mapping[Any, str | None]) -> bool:
    """Alembic's ``include_name`` hook: whether autogenerate compares this object with the models
    (every one but the search index's)."""
    if name is None:
        return True
    if type_ == "table":
        return not name.startswith(SEARCH_TABLE_PREFIX)
    if type_ == "column":
        return (parent_names.get("table_name"), name) != SEARCH_COLUMN
    if type_ == "index":
        return name != SEARCH_INDEX
    return True


def alembic_config(settings: Settings) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    # ConfigParser interpolation: a literal % in a password must be doubled.
    config.set_main_option(
        "sqlalchemy.url", normalize_url(settings.database_url).replace("%", "%%")
    )
    config.attributes["settings"] = settings
    return config


def upgrade(settings: Settings, revision: str = "head") -> None:
    command.upgrade(alembic_config(settings), revision)


def current(settings: Settings) -> str | None:
    db = Database(settings)
    try:
        with db.engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        db.dispose()
