"""the approval gate

- ``approval_policies``: a workspace's policy (kinds, priorities, senders; comma-joined lists);
- ``deliveries.held_at`` / ``approved_at`` / ``rejected_at`` / ``rejection_reason``: the gate's
  stamps on each delivery of a held message;
- ``messages.approval`` (``held``, ``approved``, ``rejected`` or null) and ``ix_messages_held``,
  the operator's queue;
- ``ix_deliveries_stall`` rebuilt so held rows stay out of the stall sweep, and
  ``ix_deliveries_caps`` so rejected rows stop counting toward the caps.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-11 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_STALL = (
    "acknowledged_at IS NULL AND failed_at IS NULL"
    " AND (stalled_at IS NULL OR stalled_at < moved_at) AND thread_closed_at IS NULL"
)
STALL = OLD_STALL + " AND (held_at IS NULL OR approved_at IS NOT NULL)"
OLD_CAPS = "acknowledged_at IS NULL AND expired_at IS NULL AND thread_closed_at IS NULL"
CAPS = OLD_CAPS + " AND rejected_at IS NULL"
HELD = "approval = 'held'"


def _time(name: str) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=True)


def _indexes(stall: str, caps: str) -> None:
    op.create_index(
        "ix_deliveries_stall",
        "deliveries",
        ["moved_at"],
        unique=False,
        sqlite_where=sa.text(stall),
        postgresql_where=sa.text(stall),
    )
    op.create_index(
        "ix_deliveries_caps",
        "deliveries",
        ["recipient_id", "sender_id"],
        unique=False,
        sqlite_where=sa.text(caps),
        postgresql_where=sa.text(caps),
    )


def upgrade() -> None:
    op.create_table(
        "approval_policies",
        sa.Column("workspace_id", sa.String(length=40), nullable=False),
        sa.Column("kinds", sa.Text(), nullable=False),
        sa.Column("priorities", sa.Text(), nullable=False),
        sa.Column("senders", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_approval_policies_workspace_id_workspaces"),
        ),
        sa.PrimaryKeyConstraint("workspace_id", name=op.f("pk_approval_policies")),
    )
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.add_column(_time("held_at"))
        batch_op.add_column(_time("approved_at"))
        batch_op.add_column(_time("rejected_at"))
        batch_op.add_column(sa.Column("rejection_reason", sa.String(length=1000), nullable=True))
    # Not batch mode on messages: SQLite's copy-and-rename would trip over the search triggers
    # (0014); adding and dropping a plain column need no copy.
    op.add_column("messages", sa.Column("approval", sa.String(length=16), nullable=True))
    op.create_index(
        "ix_messages_held",
        "messages",
        ["workspace_id", "id"],
        unique=False,
        sqlite_where=sa.text(HELD),
        postgresql_where=sa.text(HELD),
    )
    op.drop_index("ix_deliveries_stall", table_name="deliveries")
    op.drop_index("ix_deliveries_caps", table_name="deliveries")
    _indexes(STALL, CAPS)


def downgrade() -> None:
    op.drop_index("ix_deliveries_stall", table_name="deliveries")
    op.drop_index("ix_deliveries_caps", table_name="deliveries")
    op.drop_index("ix_messages_held", table_name="messages")
    op.execute("ALTER TABLE messages DROP COLUMN approval")  # SQLite 3.35+ and PostgreSQL
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_column("rejection_reason")
        batch_op.drop_column("rejected_at")
        batch_op.drop_column("approved_at")
        batch_op.drop_column("held_at")
    _indexes(OLD_STALL, OLD_CAPS)
    op.drop_table("approval_policies")
