"""operator sessions: revocable dashboard sessions, labelled and revocable operator tokens, and
failed sign-ins for the sign-in throttle

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("operator_tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("label", sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True))

    op.create_table(
        "dashboard_sessions",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("token_id", sa.String(length=40), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["token_id"],
            ["operator_tokens.id"],
            name=op.f("fk_dashboard_sessions_token_id_operator_tokens"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dashboard_sessions")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_dashboard_sessions_key_hash")),
    )
    with op.batch_alter_table("dashboard_sessions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_dashboard_sessions_token_id"), ["token_id"], unique=False
        )

    op.create_table(
        "signin_failures",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_signin_failures")),
    )
    with op.batch_alter_table("signin_failures", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_signin_failures_address_failed_at"),
            ["address", "failed_at"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_signin_failures_failed_at"), ["failed_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("signin_failures", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_signin_failures_failed_at"))
        batch_op.drop_index(batch_op.f("ix_signin_failures_address_failed_at"))
    op.drop_table("signin_failures")
    with op.batch_alter_table("dashboard_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_dashboard_sessions_token_id"))
    op.drop_table("dashboard_sessions")
    with op.batch_alter_table("operator_tokens", schema=None) as batch_op:
        batch_op.drop_column("revoked_at")
        batch_op.drop_column("last_used_at")
        batch_op.drop_column("label")
