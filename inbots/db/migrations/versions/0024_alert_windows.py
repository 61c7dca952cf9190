"""alert windows

``alert_windows``: how the operator's alerts about one subject are paced. Stall and failure alerts
about one agent are raised at most once per ``INBOTS_ALERT_INTERVAL_SECONDS``, with a count of the
deliveries they report; ``queue.backlog`` and ``workers.down`` once per interval while they hold.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-03 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "alert_windows",
        sa.Column(
            "subject_id",
            sa.String(40),
            sa.ForeignKey("agents.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("type", sa.String(40), primary_key=True),
        sa.Column("alerted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("unreported", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("since", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("alert_windows")
