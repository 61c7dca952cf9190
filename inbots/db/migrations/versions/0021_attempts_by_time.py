"""the attempt log by time

``ix_delivery_attempts_started_at``: ``GET /v1/stats``' failed attempts of the last hour and the
dashboard's webhook health (each agent's latest attempts) read the attempts of a recent window.
Without an index on ``started_at`` each call read the whole attempt log, which grows with every
notification ever sent; now it reads the window.

Building the index locks ``delivery_attempts`` against writes while it runs (seconds per million
rows): notifications recorded meanwhile wait. Plan the upgrade for a quiet moment on a large
installation.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("delivery_attempts", schema=None) as batch_op:
        batch_op.create_index("ix_delivery_attempts_started_at", ["started_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("delivery_attempts", schema=None) as batch_op:
        batch_op.drop_index("ix_delivery_attempts_started_at")
