"""fair dispatch: deliveries park while their URL is at its in-flight cap

A notify job refused by the per-URL cap used to come back every half second through the broker;
now it parks its delivery (``parked_key``, ``parked_at``, and ``job_trigger`` to rebuild its job)
and whoever frees a slot of that URL wakes the oldest. Parked rows are not lost publishes, so the
sweep's republish index leaves them out.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 14:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_REPUBLISH = (
    "publish_count > 0 AND notified_at IS NULL AND failed_at IS NULL AND acknowledged_at IS NULL"
    " AND thread_closed_at IS NULL"
)
REPUBLISH = OLD_REPUBLISH + " AND parked_key IS NULL"
PARKED = "parked_key IS NOT NULL"


def _republish_index(where: str) -> None:
    op.create_index(
        "ix_deliveries_republish",
        "deliveries",
        ["last_published_at"],
        unique=False,
        sqlite_where=sa.text(where),
        postgresql_where=sa.text(where),
    )


def upgrade() -> None:
    op.add_column("deliveries", sa.Column("parked_key", sa.String(length=32), nullable=True))
    op.add_column("deliveries", sa.Column("parked_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("deliveries", sa.Column("job_trigger", sa.String(length=16), nullable=True))
    op.create_index(
        "ix_deliveries_parked",
        "deliveries",
        ["parked_key", "parked_at"],
        unique=False,
        sqlite_where=sa.text(PARKED),
        postgresql_where=sa.text(PARKED),
    )
    op.drop_index("ix_deliveries_republish", table_name="deliveries")
    _republish_index(REPUBLISH)


def downgrade() -> None:
    op.drop_index("ix_deliveries_republish", table_name="deliveries")
    op.drop_index("ix_deliveries_parked", table_name="deliveries")
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_column("job_trigger")
        batch_op.drop_column("parked_at")
        batch_op.drop_column("parked_key")
    _republish_index(OLD_REPUBLISH)
