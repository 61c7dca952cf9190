"""caps, expiry and retention (governance, §3)

- ``messages.ttl_seconds`` / ``expires_at``: a message's time to live;
- ``deliveries.sender_id`` / ``expires_at`` (copied from the message, so the caps and the expiry
  sweep read one partial index each) and ``expired_at`` (the sweep's stamp);
- ``ix_deliveries_caps`` (recipient, sender) over the deliveries the caps count,
  ``ix_deliveries_expiring`` over those waiting to expire, ``ix_threads_closed`` for retention;
- ``send_buckets``: each agent's send rate-limit token bucket;
- ``cap_ledger``: what the caps count, per recipient and per recipient and sender.

Existing deliveries get their message's sender, and the ledger starts from the deliveries
stored (so the caps count them from the start).

Revision ID: 0012
Revises: 0009
Create Date: 2026-11-30 17:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CAPS = "acknowledged_at IS NULL AND expired_at IS NULL AND thread_closed_at IS NULL"
EXPIRING = "expires_at IS NOT NULL AND expired_at IS NULL AND acknowledged_at IS NULL"
CLOSED = "closed_at IS NOT NULL"


def upgrade() -> None:
    op.create_table(
        "send_buckets",
        sa.Column("agent_id", sa.String(length=40), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("stamp", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("agent_id", name=op.f("pk_send_buckets")),
    )
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("ttl_seconds", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))

    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("sender_id", sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("expired_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(
        "UPDATE deliveries SET sender_id = "
        "(SELECT messages.sender_id FROM messages WHERE messages.id = deliveries.message_id)"
    )
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.create_index(
            "ix_deliveries_caps",
            ["recipient_id", "sender_id"],
            unique=False,
            sqlite_where=sa.text(CAPS),
            postgresql_where=sa.text(CAPS),
        )
        batch_op.create_index(
            "ix_deliveries_expiring",
            ["expires_at"],
            unique=False,
            sqlite_where=sa.text(EXPIRING),
            postgresql_where=sa.text(EXPIRING),
        )

    op.create_table(
        "cap_ledger",
        sa.Column("recipient_id", sa.String(length=40), nullable=False),
        sa.Column("sender_id", sa.String(length=40), nullable=False),
        sa.Column("open_count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("recipient_id", "sender_id", name=op.f("pk_cap_ledger")),
    )
    op.execute(
        "INSERT INTO cap_ledger (recipient_id, sender_id, open_count) "
        f"SELECT recipient_id, '', count(*) FROM deliveries WHERE {CAPS} GROUP BY recipient_id"
    )
    op.execute(
        "INSERT INTO cap_ledger (recipient_id, sender_id, open_count) "
        f"SELECT recipient_id, sender_id, count(*) FROM deliveries WHERE {CAPS}"
        " AND sender_id IS NOT NULL GROUP BY recipient_id, sender_id"
    )

    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.create_index(
            "ix_threads_closed",
            ["closed_at"],
            unique=False,
            sqlite_where=sa.text(CLOSED),
            postgresql_where=sa.text(CLOSED),
        )


def downgrade() -> None:
    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.drop_index("ix_threads_closed")

    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_expiring")
        batch_op.drop_index("ix_deliveries_caps")
        batch_op.drop_column("expired_at")
        batch_op.drop_column("expires_at")
        batch_op.drop_column("sender_id")

    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("expires_at")
        batch_op.drop_column("ttl_seconds")

    op.drop_table("cap_ledger")
    op.drop_table("send_buckets")
