"""reservations

``reservations``: advisory leases on repository paths (coordination.md §1). An agent says "I am
changing these paths until ``expires_at``"; the others see it, and a conflicting request is told
who holds what. ``paths`` is the JSON list of patterns as given. A reservation is active while
``released_at`` is null and ``expires_at`` is in the future: expiry needs no job. Released and
expired rows are deleted by retention.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-05 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "reservations",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("workspace_id", sa.String(40), sa.ForeignKey("workspaces.id"), nullable=False),
        sa.Column("agent_id", sa.String(40), sa.ForeignKey("agents.id"), nullable=False),
        sa.Column("paths", sa.Text(), nullable=False),
        sa.Column("exclusive", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("released_by_id", sa.String(40), sa.ForeignKey("agents.id"), nullable=True),
        sa.Column("release_reason", sa.Text(), nullable=True),
    )
    op.create_index(
        "ix_reservations_workspace_id_expires_at",
        "reservations",
        ["workspace_id", "expires_at"],
        unique=False,
    )
    op.create_index(
        "ix_reservations_agent_id_expires_at", "reservations", ["agent_id", "expires_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_reservations_agent_id_expires_at", table_name="reservations")
    op.drop_index("ix_reservations_workspace_id_expires_at", table_name="reservations")
    op.drop_table("reservations")
