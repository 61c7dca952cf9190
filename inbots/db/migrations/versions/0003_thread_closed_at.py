"""thread_closed_at on deliveries, so the renotify sweep's indexes leave closed threads out

A thread's unacknowledged deliveries stay unacknowledged after it closes, and the sweep never
acts on them; while its two partial indexes held them, every sweep walked past all of them
before reaching a row it could act on, so its cost grew with closed-thread history.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 01:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_REPUBLISH = (
    "publish_count > 0 AND notified_at IS NULL AND failed_at IS NULL AND acknowledged_at IS NULL"
)
OLD_STALL = (
    "acknowledged_at IS NULL AND failed_at IS NULL"
    " AND (stalled_at IS NULL OR stalled_at < moved_at)"
)
REPUBLISH = OLD_REPUBLISH + " AND thread_closed_at IS NULL"
STALL = OLD_STALL + " AND thread_closed_at IS NULL"


def _indexes(republish: str, stall: str) -> None:
    op.create_index(
        "ix_deliveries_republish",
        "deliveries",
        ["last_published_at"],
        unique=False,
        sqlite_where=sa.text(republish),
        postgresql_where=sa.text(republish),
    )
    op.create_index(
        "ix_deliveries_stall",
        "deliveries",
        ["moved_at"],
        unique=False,
        sqlite_where=sa.text(stall),
        postgresql_where=sa.text(stall),
    )


def upgrade() -> None:
    op.add_column(
        "deliveries", sa.Column("thread_closed_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.execute(
        "UPDATE deliveries SET thread_closed_at ="
        " (SELECT threads.closed_at FROM threads WHERE threads.id = deliveries.thread_id)"
        " WHERE thread_id IN (SELECT id FROM threads WHERE status = 'closed')"
    )
    op.drop_index("ix_deliveries_stall", table_name="deliveries")
    op.drop_index("ix_deliveries_republish", table_name="deliveries")
    _indexes(REPUBLISH, STALL)


def downgrade() -> None:
    op.drop_index("ix_deliveries_stall", table_name="deliveries")
    op.drop_index("ix_deliveries_republish", table_name="deliveries")
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_column("thread_closed_at")
    _indexes(OLD_REPUBLISH, OLD_STALL)
