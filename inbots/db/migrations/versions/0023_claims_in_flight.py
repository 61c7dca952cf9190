"""claims in flight

``ix_deliveries_claimed`` and ``ix_events_claimed``: the rows whose webhook attempt holds a claim
(``claimed_until`` set: an attempt in flight, a few rows at any time). The renotify sweep reads a
claim that ran out unrecorded (its worker died) through them as soon as it runs out, instead of
waiting for the publish-lost window.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-02 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CLAIMED = "claimed_until IS NOT NULL"


def upgrade() -> None:
    for table in ("deliveries", "events"):
        op.create_index(
            f"ix_{table}_claimed",
            table,
            ["claimed_until"],
            unique=False,
            sqlite_where=sa.text(CLAIMED),
            postgresql_where=sa.text(CLAIMED),
        )


def downgrade() -> None:
    for table in ("deliveries", "events"):
        op.drop_index(f"ix_{table}_claimed", table_name=table)
