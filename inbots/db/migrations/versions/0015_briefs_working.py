"""agents' briefs and the working heartbeat

- ``agents.brief`` / ``agents.brief_updated_at``: what an agent does and how to work with it
  (Markdown), and when it last changed;
- ``deliveries.working_at`` / ``deliveries.working_note``: the recipient's last "working on it"
  heartbeat and its note (a working delivery is not stalled until the working stall time passes
  without one).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-10 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("brief", sa.Text(), nullable=True))
        batch_op.add_column(
            sa.Column("brief_updated_at", sa.DateTime(timezone=True), nullable=True)
        )

    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("working_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("working_note", sa.String(length=1000), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_column("working_note")
        batch_op.drop_column("working_at")

    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.drop_column("brief_updated_at")
        batch_op.drop_column("brief")
