"""held threads and briefs

The approval gate holds what a held sender writes that others read, not only its messages:

- ``threads.approval`` (``held``, ``approved``, ``rejected`` or null) and ``ix_threads_held``, the
  operator's queue of held threads: a thread opened while the policy held its opener's sends (or
  a held direct send's thread) is seen only by its opener and the operator until approved;
- ``agents.brief_held_at``: set while a held agent's brief waits for the operator.

Plain ``ADD COLUMN`` (no batch mode): SQLite's copy-and-rename would drop the search triggers on
``threads`` (0014).

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-04 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HELD = "approval = 'held'"


def upgrade() -> None:
    op.add_column("threads", sa.Column("approval", sa.String(length=16), nullable=True))
    op.create_index(
        "ix_threads_held",
        "threads",
        ["workspace_id", "created_at"],
        unique=False,
        sqlite_where=sa.text(HELD),
        postgresql_where=sa.text(HELD),
    )
    op.add_column("agents", sa.Column("brief_held_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE agents DROP COLUMN brief_held_at")  # SQLite 3.35+ and PostgreSQL
    op.drop_index("ix_threads_held", table_name="threads")
    op.execute("ALTER TABLE threads DROP COLUMN approval")
