"""the operator's counts stop counting history

- ``delivery_tallies``: each workspace's acknowledged deliveries, split over a few rows
  (``shard``), kept exact by the transactions that acknowledge and purge
  (``inbots.deliveries.tallies``); filled here from the rows already stored;
- ``ix_deliveries_open``: the deliveries not yet acknowledged, by workspace. ``GET /v1/stats``,
  the ``/metrics`` gauges and the dashboard count these by state and read the tally for the
  rest, instead of working out the state of every delivery ever stored.

The fill counts every acknowledged delivery once. A web process of the previous release that
acknowledges mail after this migration and before it is replaced leaves the tally short: on a
rolling upgrade, run ``inbots db recount`` once the old processes are gone.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "delivery_tallies",
        sa.Column("workspace_id", sa.String(length=40), nullable=False),
        sa.Column("shard", sa.Integer(), nullable=False),
        sa.Column("acknowledged", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("workspace_id", "shard"),
    )
    op.execute(
        "INSERT INTO delivery_tallies (workspace_id, shard, acknowledged) "
        "SELECT workspace_id, 0, count(*) FROM deliveries "
        "WHERE acknowledged_at IS NOT NULL GROUP BY workspace_id"
    )
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.create_index(
            "ix_deliveries_open",
            ["workspace_id"],
            unique=False,
            sqlite_where=sa.text("acknowledged_at IS NULL"),
            postgresql_where=sa.text("acknowledged_at IS NULL"),
        )


def downgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_deliveries_open",
            sqlite_where=sa.text("acknowledged_at IS NULL"),
            postgresql_where=sa.text("acknowledged_at IS NULL"),
        )
    op.drop_table("delivery_tallies")
