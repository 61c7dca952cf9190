"""outbox events: receipts for senders and webhook event types

- ``events``: one row per agent told of something other than new mail (a recipient acknowledged
  its message, a thread it is in had its close requested or was closed), with the same outbox
  columns as ``deliveries`` so the one engine sends both; ``shown_at`` is what the sender's
  long-poll has shown;
- ``delivery_attempts.event_id``: the attempt log holds both kinds (``delivery_id`` becomes
  nullable; exactly one of the two is set);
- ``agents.webhook_events``: the notification types an agent's webhook receives, comma-joined
  (``message.created`` for every existing agent, as before);
- ``messages (sender_id, id)``: the sender's outbox, newest first.

Revision ID: 0009
Revises: 0007
Create Date: 2026-12-02 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REPUBLISH = (
    "publish_count > 0 AND notified_at IS NULL AND failed_at IS NULL"
    " AND thread_closed_at IS NULL AND parked_key IS NULL"
)
UNSHOWN = "type = 'message.acknowledged' AND shown_at IS NULL AND thread_closed_at IS NULL"
PARKED = "parked_key IS NOT NULL"


def _time(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("workspace_id", sa.String(length=40), nullable=False),
        sa.Column("type", sa.String(length=40), nullable=False),
        sa.Column("recipient_id", sa.String(length=40), nullable=False),
        sa.Column("actor_id", sa.String(length=40), nullable=False),
        sa.Column("thread_id", sa.String(length=40), nullable=False),
        sa.Column("message_id", sa.String(length=40), nullable=True),
        sa.Column("delivery_id", sa.String(length=40), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("note", sa.String(length=1000), nullable=True),
        _time("created_at", nullable=False),
        _time("shown_at"),
        _time("notified_at"),
        _time("failed_at"),
        sa.Column("failure_reason", sa.String(length=200), nullable=True),
        _time("claimed_until"),
        _time("thread_closed_at"),
        sa.Column("parked_key", sa.String(length=32), nullable=True),
        _time("parked_at"),
        sa.Column("job_trigger", sa.String(length=16), nullable=True),
        sa.Column("publish_count", sa.Integer(), nullable=False),
        _time("last_published_at"),
        _time("next_attempt_at"),
        sa.ForeignKeyConstraint(
            ["actor_id"], ["agents.id"], name=op.f("fk_events_actor_id_agents")
        ),
        sa.ForeignKeyConstraint(
            ["delivery_id"], ["deliveries.id"], name=op.f("fk_events_delivery_id_deliveries")
        ),
        sa.ForeignKeyConstraint(
            ["message_id"], ["messages.id"], name=op.f("fk_events_message_id_messages")
        ),
        sa.ForeignKeyConstraint(
            ["recipient_id"], ["agents.id"], name=op.f("fk_events_recipient_id_agents")
        ),
        sa.ForeignKeyConstraint(
            ["thread_id"], ["threads.id"], name=op.f("fk_events_thread_id_threads")
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name=op.f("fk_events_workspace_id_workspaces")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(
            "ix_events_parked",
            ["parked_key", "parked_at"],
            unique=False,
            sqlite_where=sa.text(PARKED),
            postgresql_where=sa.text(PARKED),
        )
        batch_op.create_index(
            "ix_events_republish",
            ["last_published_at"],
            unique=False,
            sqlite_where=sa.text(REPUBLISH),
            postgresql_where=sa.text(REPUBLISH),
        )
        batch_op.create_index(
            "ix_events_unshown",
            ["recipient_id", "id"],
            unique=False,
            sqlite_where=sa.text(UNSHOWN),
            postgresql_where=sa.text(UNSHOWN),
        )
        batch_op.create_index(batch_op.f("ix_events_thread_id"), ["thread_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_events_workspace_id_id"), ["workspace_id", "id"], unique=False
        )

    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "webhook_events",
                sa.String(length=200),
                server_default="message.created",
                nullable=False,
            )
        )

    with op.batch_alter_table("delivery_attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("event_id", sa.String(length=40), nullable=True))
        batch_op.alter_column("delivery_id", existing_type=sa.String(length=40), nullable=True)
        batch_op.create_index(
            batch_op.f("ix_delivery_attempts_event_id_number"), ["event_id", "number"], unique=False
        )
        batch_op.create_foreign_key(
            batch_op.f("fk_delivery_attempts_event_id_events"), "events", ["event_id"], ["id"]
        )

    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_messages_sender_id_id"), ["sender_id", "id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_messages_sender_id_id"))

    op.execute("DELETE FROM delivery_attempts WHERE event_id IS NOT NULL")
    with op.batch_alter_table("delivery_attempts", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_delivery_attempts_event_id_events"), type_="foreignkey"
        )
        batch_op.drop_index(batch_op.f("ix_delivery_attempts_event_id_number"))
        batch_op.alter_column("delivery_id", existing_type=sa.String(length=40), nullable=False)
        batch_op.drop_column("event_id")

    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.drop_column("webhook_events")

    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_events_workspace_id_id"))
        batch_op.drop_index(batch_op.f("ix_events_thread_id"))
        batch_op.drop_index("ix_events_unshown")
        batch_op.drop_index("ix_events_republish")
        batch_op.drop_index("ix_events_parked")
    op.drop_table("events")
