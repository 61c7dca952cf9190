"""Alembic environment: the same engine set-up as the app (SQLite pragmas included)."""

from __future__ import annotations

from alembic import context

from inbots.config import load_settings
from inbots.db.engine import Database
from inbots.db.migrate import include_name
from inbots.models import Base

config = context.config
settings = config.attributes.get("settings") or load_settings(
    database_url=config.get_main_option("sqlalchemy.url")
)


def run_migrations_online() -> None:
    # A migration may rewrite a large table or build an index for minutes: the statement timeout
    # that keeps requests from hanging must not cut it off (the connect timeout still applies).
    db = Database(settings.model_copy(update={"db_statement_timeout_seconds": 0}))
    try:
        with db.engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=Base.metadata,
                render_as_batch=connection.dialect.name == "sqlite",
                compare_type=True,
                include_name=include_name,
            )
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
    finally:
        db.dispose()


if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=Base.metadata)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
