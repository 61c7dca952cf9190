"""Alembic, driven from code: ``inbots db upgrade`` and ``inbots serve`` call :func:`upgrade`."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

from inbots.config import Settings
from inbots.db.engine import Database, normalize_url

MIGRATIONS = Path(__file__).parent / "migrations"


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
