from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from inbots.models.base import Base, UTCDateTime
from inbots.models.outbox import Outbox

# The sweep's lost publishes (as ix_deliveries_republish) and the long-poll's unshown receipts.
_REPUBLISH = (
    "publish_count > 0 AND notified_at IS NULL AND failed_at IS NULL"
    " AND thread_closed_at IS NULL AND parked_key IS NULL"
)
# The receipts a sender's long-poll shows (inbots.deliveries.receipts._unshown spells the type test
# the same way, so that the planners match it): acknowledgements and rejections.
RECEIPT_TYPES_SQL = "type IN ('message.acknowledged', 'message.rejected')"
_UNSHOWN = f"{RECEIPT_TYPES_SQL} AND shown_at IS NULL AND thread_closed_at IS NULL"


class Event(Outbox, Base):
    """Something an agent is told of, other than new mail: one row per agent told.

    The outbox columns (``publish_count`` … ``job_trigger``, ``notified_at``, ``failed_at``,
    ``thread_closed_at``) mean exactly what they mean on a :class:`Delivery`, and the same engine
    reads and writes them (:mod:`inbots.deliveries.outbox`). A ``message.acknowledged`` event is
    made for every acknowledgement, whether or not its agent has a webhook: it is also what the
    sender's long-poll shows (``shown_at``, as ``delivered_at`` is for mail).

    An operator's alert (:mod:`inbots.alerts`) is an event too: told to the workspace's operator
    row, ``actor_id`` the agent it is about, no thread, its fields in ``detail``."""

    __tablename__ = "events"
    __table_args__ = (
        Index(None, "workspace_id", "id"),
        Index(None, "thread_id"),
        Index(
            "ix_events_unshown",
            "recipient_id",
            "id",
            sqlite_where=text(_UNSHOWN),
            postgresql_where=text(_UNSHOWN),
        ),
        Index(
            "ix_events_claimed",
            "claimed_until",
            sqlite_where=text("claimed_until IS NOT NULL"),
            postgresql_where=text("claimed_until IS NOT NULL"),
        ),
        Index(
            "ix_events_republish",
            "last_published_at",
            sqlite_where=text(_REPUBLISH),
            postgresql_where=text(_REPUBLISH),
        ),
        Index(
            "ix_events_parked",
            "parked_key",
            "parked_at",
            sqlite_where=text("parked_key IS NOT NULL"),
            postgresql_where=text("parked_key IS NOT NULL"),
        ),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id"))
    type: Mapped[str] = mapped_column(String(40))
    # The agent told (a message's sender, a thread's participant) and the one who acted (the
    # recipient who acknowledged, the opener who asked to close, the operator who closed).
    recipient_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    actor_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    # None for an operator's alert (inbots.alerts): it names what it is about in ``detail``, so
    # it outlives the thread, message and delivery (retention) and no thread's close drops it.
    thread_id: Mapped[str | None] = mapped_column(ForeignKey("threads.id"))
    message_id: Mapped[str | None] = mapped_column(ForeignKey("messages.id"))
    delivery_id: Mapped[str | None] = mapped_column(ForeignKey("deliveries.id"))
    outcome: Mapped[str | None] = mapped_column(String(16))
    note: Mapped[str | None] = mapped_column(String(1000))
    # An alert's fields as they were when it was raised (JSON): its notification's body.
    detail: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # A long-poll with receipts showed it to its agent.
    shown_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
