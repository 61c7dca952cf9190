"""delivery engine: moved_at and claimed_until on deliveries, indexes for the renotify sweep

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 19:41:11
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REPUBLISH = (
    "publish_count > 0 AND notified_at IS NULL AND failed_at IS NULL AND acknowledged_at IS NULL"
)
STALL = (
    "acknowledged_at IS NULL AND failed_at IS NULL"
    " AND (stalled_at IS NULL OR stalled_at < moved_at)"
)


def upgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("moved_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True))
    op.execute(
        "UPDATE deliveries"
        " SET moved_at = COALESCE(fetched_at, delivered_at, notified_at, accepted_at)"
    )
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.alter_column("moved_at", existing_type=sa.DateTime(timezone=True), nullable=False)
        batch_op.create_index(
            "ix_deliveries_republish",
            ["last_published_at"],
            unique=False,
            sqlite_where=sa.text(REPUBLISH),
            postgresql_where=sa.text(REPUBLISH),
        )
        batch_op.create_index(
            "ix_deliveries_stall",
            ["moved_at"],
            unique=False,
            sqlite_where=sa.text(STALL),
            postgresql_where=sa.text(STALL),
        )


def downgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_stall")
        batch_op.drop_index("ix_deliveries_republish")
        batch_op.drop_column("claimed_until")
        batch_op.drop_column("moved_at")
