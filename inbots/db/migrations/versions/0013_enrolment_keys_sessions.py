"""enrolment, agent keys and agent sessions

- ``enrollments``: enrolment tokens (hashed) with their uses left, expiry and revocation;
- ``agent_keys``: an agent's keys (hashed, labelled); every agent's existing key moves here,
  labelled ``default`` (its hint is only ``agt_``: the key itself was never stored), and
  ``agents.key_hash`` is emptied and no longer read (the column stays; downgrade fills it again
  from each agent's oldest key);
- ``agent_sessions``: the MCP sessions and ``X-Inbots-Session`` clients each agent was seen
  through.

Revision ID: 0013
Revises: 0009
Create Date: 2026-11-30 17:06:59
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _time(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "enrollments",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("workspace_id", sa.String(length=40), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=100), nullable=True),
        sa.Column("uses", sa.Integer(), nullable=False),
        sa.Column("uses_left", sa.Integer(), nullable=False),
        _time("created_at", nullable=False),
        _time("expires_at", nullable=False),
        _time("revoked_at"),
        _time("last_used_at"),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspaces.id"],
            name=op.f("fk_enrollments_workspace_id_workspaces"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_enrollments")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_enrollments_token_hash")),
    )
    with op.batch_alter_table("enrollments", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_enrollments_workspace_id"), ["workspace_id"], unique=False
        )

    op.create_table(
        "agent_keys",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("agent_id", sa.String(length=40), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("hint", sa.String(length=16), nullable=False),
        sa.Column("label", sa.String(length=100), nullable=True),
        _time("created_at", nullable=False),
        _time("last_used_at"),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_agent_keys_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_agent_keys_key_hash")),
    )
    with op.batch_alter_table("agent_keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_agent_keys_agent_id"), ["agent_id"], unique=False)

    op.create_table(
        "agent_sessions",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("agent_id", sa.String(length=40), nullable=False),
        sa.Column("session_key", sa.String(length=220), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=True),
        sa.Column("client", sa.String(length=200), nullable=True),
        _time("first_seen_at", nullable=False),
        _time("last_seen_at", nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_agent_sessions_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_sessions")),
        sa.UniqueConstraint(
            "agent_id", "session_key", name=op.f("uq_agent_sessions_agent_id_session_key")
        ),
    )
    with op.batch_alter_table("agent_sessions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_agent_sessions_agent_id_last_seen_at"),
            ["agent_id", "last_seen_at"],
            unique=False,
        )

    # Every agent's key becomes its "default" key (ids keep the agents' order: ag_X -> key_X).
    op.execute(
        "INSERT INTO agent_keys (id, agent_id, key_hash, hint, label, created_at, last_used_at)"
        " SELECT 'key_' || substr(id, 4), id, key_hash, 'agt_', 'default', created_at,"
        " last_seen_at FROM agents WHERE key_hash IS NOT NULL"
    )
    op.execute("UPDATE agents SET key_hash = NULL")


def downgrade() -> None:
    # Each agent's oldest live key becomes its one key again; the others stop working.
    op.execute(
        "UPDATE agents SET key_hash = (SELECT k.key_hash FROM agent_keys k"
        " WHERE k.agent_id = agents.id ORDER BY k.id LIMIT 1)"
    )
    with op.batch_alter_table("agent_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_agent_sessions_agent_id_last_seen_at"))
    op.drop_table("agent_sessions")
    with op.batch_alter_table("agent_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_agent_keys_agent_id"))
    op.drop_table("agent_keys")
    with op.batch_alter_table("enrollments", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_enrollments_workspace_id"))
    op.drop_table("enrollments")
