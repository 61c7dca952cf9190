"""inbox priority and task references: messages.priority, the deliveries' priority_rank (the
inbox's order, urgent first, on its index, and on a twin index of acknowledged deliveries) and
threads.ref

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-08 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("priority", sa.String(length=16), server_default="normal", nullable=False)
        )

    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.add_column(sa.Column("ref", sa.String(length=128), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_threads_workspace_id_ref"), ["workspace_id", "ref"], unique=False
        )

    # Every stored message is normal (rank 1): the server default fills the existing rows.
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("priority_rank", sa.Integer(), server_default=sa.text("1"), nullable=False)
        )
        batch_op.drop_index(
            "ix_deliveries_inbox",
            sqlite_where=sa.text("acknowledged_at IS NULL"),
            postgresql_where=sa.text("acknowledged_at IS NULL"),
        )
        batch_op.create_index(
            "ix_deliveries_inbox",
            ["recipient_id", "priority_rank", "id"],
            unique=False,
            sqlite_where=sa.text("acknowledged_at IS NULL"),
            postgresql_where=sa.text("acknowledged_at IS NULL"),
        )
        batch_op.create_index(
            "ix_deliveries_acked",
            ["recipient_id", "priority_rank", "id"],
            unique=False,
            sqlite_where=sa.text("acknowledged_at IS NOT NULL"),
            postgresql_where=sa.text("acknowledged_at IS NOT NULL"),
        )


def downgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_deliveries_acked",
            sqlite_where=sa.text("acknowledged_at IS NOT NULL"),
            postgresql_where=sa.text("acknowledged_at IS NOT NULL"),
        )
        batch_op.drop_index(
            "ix_deliveries_inbox",
            sqlite_where=sa.text("acknowledged_at IS NULL"),
            postgresql_where=sa.text("acknowledged_at IS NULL"),
        )
        batch_op.create_index(
            "ix_deliveries_inbox",
            ["recipient_id", "id"],
            unique=False,
            sqlite_where=sa.text("acknowledged_at IS NULL"),
            postgresql_where=sa.text("acknowledged_at IS NULL"),
        )
        batch_op.drop_column("priority_rank")

    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_threads_workspace_id_ref"))
        batch_op.drop_column("ref")

    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("priority")
