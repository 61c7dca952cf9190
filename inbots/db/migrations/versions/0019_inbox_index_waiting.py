"""the inbox index holds exactly the waiting mail

``ix_deliveries_inbox`` was partial on ``acknowledged_at IS NULL``; every inbox listing and its
``waiting`` count then read each unacknowledged row to drop the expired, held and closed-thread
ones (the count joined the thread for its status). Now its predicate is the whole of "waiting"
(``inbots.models.deliveries.WAITING``): the count is an index-only scan on PostgreSQL and the
listing reads no row it then throws away. Closing a thread already stamps its deliveries'
``thread_closed_at`` (0003), so no join is needed.

Rebuilding an index locks the deliveries table against writes while it runs (seconds per
million rows); plan the upgrade for a quiet moment on a large installation.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD = "acknowledged_at IS NULL"
WAITING = (
    "acknowledged_at IS NULL AND expired_at IS NULL AND thread_closed_at IS NULL"
    " AND (held_at IS NULL OR approved_at IS NOT NULL)"
)


def _rebuild(old: str, new: str) -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_deliveries_inbox", sqlite_where=sa.text(old), postgresql_where=sa.text(old)
        )
        batch_op.create_index(
            "ix_deliveries_inbox",
            ["recipient_id", "priority_rank", "id"],
            unique=False,
            sqlite_where=sa.text(new),
            postgresql_where=sa.text(new),
        )


def upgrade() -> None:
    _rebuild(OLD, WAITING)


def downgrade() -> None:
    _rebuild(WAITING, OLD)
