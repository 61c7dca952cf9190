"""rejections in the sender's receipts

``ix_events_unshown`` (the sender's long-poll with ``events=receipts``) held only
``message.acknowledged`` events; a ``message.rejected`` event (the operator rejected a held
message) is a receipt too, so the index's predicate now takes both types. The index is rebuilt
from the events table (a partial index: its size is the unshown receipts').

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UNSHOWN = (
    "type IN ('message.acknowledged', 'message.rejected') AND shown_at IS NULL "
    "AND thread_closed_at IS NULL"
)
UNSHOWN_BEFORE = "type = 'message.acknowledged' AND shown_at IS NULL AND thread_closed_at IS NULL"


def _index(where: str) -> None:
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_unshown")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(
            "ix_events_unshown",
            ["recipient_id", "id"],
            unique=False,
            sqlite_where=sa.text(where),
            postgresql_where=sa.text(where),
        )


def upgrade() -> None:
    _index(UNSHOWN)


def downgrade() -> None:
    _index(UNSHOWN_BEFORE)
