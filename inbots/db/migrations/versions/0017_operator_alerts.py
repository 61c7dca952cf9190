"""operator alerts

- ``agents.webhook_failures``: the agent's webhook attempts that failed in a row (a success
  resets it); the operator is alerted when it reaches ``INBOTS_ALERT_WEBHOOK_FAILURES``;
- ``events.detail``: an alert's fields (JSON), and ``events.thread_id`` nullable: an alert is an
  event told to the operator's row, about no thread.

Downgrading deletes the alerts (events without a thread) and their attempts.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("webhook_failures", sa.Integer(), server_default=sa.text("0"), nullable=False)
        )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("detail", sa.Text(), nullable=True))
        batch_op.alter_column("thread_id", existing_type=sa.String(length=40), nullable=True)


def downgrade() -> None:
    op.execute(
        "DELETE FROM delivery_attempts WHERE event_id IN "
        "(SELECT id FROM events WHERE thread_id IS NULL)"
    )
    op.execute("DELETE FROM events WHERE thread_id IS NULL")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.alter_column("thread_id", existing_type=sa.String(length=40), nullable=False)
        batch_op.drop_column("detail")
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.drop_column("webhook_failures")
