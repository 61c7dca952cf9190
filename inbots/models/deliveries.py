from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    exists,
    or_,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from inbots.models.base import Base, UTCDateTime
from inbots.models.outbox import Outbox

_REPUBLISH = (
    "publish_count > 0 AND notified_at IS NULL AND failed_at IS NULL AND acknowledged_at IS NULL"
    " AND thread_closed_at IS NULL AND parked_key IS NULL"
)
# Counted by the caps: a recipient's deliveries still owed an acknowledgement, not expired, in a
# thread that is not closed (mail in a closed thread leaves the inbox and cannot be acknowledged).
# Held deliveries count (they are mail owed to the recipient, waiting for the operator); rejected
# ones do not (they will never reach it).
OPEN_FOR_CAPS = (
    "acknowledged_at IS NULL AND expired_at IS NULL AND thread_closed_at IS NULL"
    " AND rejected_at IS NULL"
)
# Not held by the approval gate: never held, or held and approved. A held delivery (and a
# rejected one) is invisible to its recipient, never notified and never stalled.
RELEASED = "(held_at IS NULL OR approved_at IS NOT NULL)"
# In the recipient's inbox, waiting: not acknowledged, not expired, in a thread that is not
# closed (closing a thread stamps its deliveries' thread_closed_at), not held. What the inbox
# lists by default and what its ``waiting`` counts: its index holds exactly these rows.
WAITING = (
    f"acknowledged_at IS NULL AND expired_at IS NULL AND thread_closed_at IS NULL AND {RELEASED}"
)
# Waiting for their message's expiry (the sweep stamps expired_at).
_EXPIRING = "expires_at IS NOT NULL AND expired_at IS NULL AND acknowledged_at IS NULL"
_STALL = (
    "acknowledged_at IS NULL AND failed_at IS NULL"
    " AND (stalled_at IS NULL OR stalled_at < moved_at) AND thread_closed_at IS NULL"
    f" AND {RELEASED}"
)


class Delivery(Outbox, Base):
    """The receipt. Stamps are only ever set, never cleared or overwritten."""

    __tablename__ = "deliveries"
    __table_args__ = (
        # The inbox, its ``waiting`` count and the long-poll: a recipient's waiting deliveries
        # (``WAITING``), urgent first, then oldest first (the order its cursor follows). The count
        # is an index-only scan, and the listing reads no row it then filters out.
        Index(
            "ix_deliveries_inbox",
            "recipient_id",
            "priority_rank",
            "id",
            sqlite_where=text(WAITING),
            postgresql_where=text(WAITING),
        ),
        # The acknowledged ones in the same order (?status=acked, and with the inbox ?status=all).
        # Partial too, so that neither index is ever a candidate for the other's listing.
        Index(
            "ix_deliveries_acked",
            "recipient_id",
            "priority_rank",
            "id",
            sqlite_where=text("acknowledged_at IS NOT NULL"),
            postgresql_where=text("acknowledged_at IS NOT NULL"),
        ),
        # Operator listings: newest first, by workspace, thread or recipient.
        Index(None, "workspace_id", "id"),
        Index(None, "thread_id", "id"),
        Index(None, "message_id", "recipient_id"),
        Index(
            "ix_deliveries_failed",
            "workspace_id",
            "id",
            sqlite_where=text("failed_at IS NOT NULL"),
            postgresql_where=text("failed_at IS NOT NULL"),
        ),
        # The renotify sweep: lost publishes, and deliveries that may have stalled. Each predicate
        # matches its query, so a sweep reads only the rows it may act on.
        Index(
            "ix_deliveries_republish",
            "last_published_at",
            sqlite_where=text(_REPUBLISH),
            postgresql_where=text(_REPUBLISH),
        ),
        Index(
            "ix_deliveries_stall",
            "moved_at",
            sqlite_where=text(_STALL),
            postgresql_where=text(_STALL),
        ),
        # Attempts in flight: the sweep finds a claim that ran out unrecorded (its worker died)
        # here, as soon as it runs out (renotify.py, _resumed).
        Index(
            "ix_deliveries_claimed",
            "claimed_until",
            sqlite_where=text("claimed_until IS NOT NULL"),
            postgresql_where=text("claimed_until IS NOT NULL"),
        ),
        # Deliveries waiting for an in-flight slot of their URL, oldest first (parking.py).
        Index(
            "ix_deliveries_parked",
            "parked_key",
            "parked_at",
            sqlite_where=text("parked_key IS NOT NULL"),
            postgresql_where=text("parked_key IS NOT NULL"),
        ),
        Index(
            "ix_deliveries_caps",
            "recipient_id",
            "sender_id",
            sqlite_where=text(OPEN_FOR_CAPS),
            postgresql_where=text(OPEN_FOR_CAPS),
        ),
        Index(
            "ix_deliveries_expiring",
            "expires_at",
            sqlite_where=text(_EXPIRING),
            postgresql_where=text(_EXPIRING),
        ),
        Index(
            "ix_deliveries_stalled",
            "workspace_id",
            "id",
            sqlite_where=text("stalled_at IS NOT NULL"),
            postgresql_where=text("stalled_at IS NOT NULL"),
        ),
        # The operator's counts by state (inbots.stats): every state but "acknowledged" is a
        # row not yet acknowledged, read through this index; the acknowledged ones, the bulk of
        # history, are a tally (DeliveryTally). Rows leave the index when they are acknowledged.
        Index(
            "ix_deliveries_open",
            "workspace_id",
            sqlite_where=text("acknowledged_at IS NULL"),
            postgresql_where=text("acknowledged_at IS NULL"),
        ),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id"))
    message_id: Mapped[str] = mapped_column(ForeignKey("messages.id"))
    thread_id: Mapped[str] = mapped_column(ForeignKey("threads.id"))
    recipient_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    # The message's priority as the inbox sorts it: 0 urgent, 1 normal (messages.models
    # priority_rank). Copied here so the inbox's order is an index scan, not a join and a sort.
    priority_rank: Mapped[int] = mapped_column(Integer, default=1, server_default=text("1"))
    # The message's sender and expiry, copied here so the caps and the expiry sweep read one
    # partial index each (ix_deliveries_caps, ix_deliveries_expiring), never a join.
    sender_id: Mapped[str | None] = mapped_column(String(40))
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    accepted_at: Mapped[datetime] = mapped_column(UTCDateTime())
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    fetched_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    acknowledged_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    stalled_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The recipient's last "working on it" heartbeat (POST /v1/deliveries/{id}/working): unlike
    # the other stamps it is set again by every heartbeat. While it is recent (the working stall
    # time) the sweep does not stamp the delivery stalled. With the heartbeat's optional note,
    # which its sender sees in the receipt.
    working_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    working_note: Mapped[str | None] = mapped_column(String(1000))
    # Its message's ttl passed before it was acknowledged: out of the inbox, never notified
    # again, no longer counted by the caps.
    expired_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    # The newest progress stamp (accepted, notified, delivered, fetched, a working heartbeat):
    # what "has not moved" is measured from. Kept by the stamping function and the heartbeat
    # (deliveries.service.working), never set by hand.
    moved_at: Mapped[datetime] = mapped_column(UTCDateTime())

    outcome: Mapped[str | None] = mapped_column(String(16))
    note: Mapped[str | None] = mapped_column(String(1000))

    # The approval gate (inbots.approvals): held when sent (its message matched the workspace's
    # policy), then approved (from then on it flows as a delivery sent at that moment) or
    # rejected with the operator's reason (it never reaches the recipient).
    held_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    approved_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    rejected_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    rejection_reason: Mapped[str | None] = mapped_column(String(1000))

    @classmethod
    def released(cls) -> ColumnElement[bool]:
        """SQL: not held by the approval gate (never held, or approved); see ``RELEASED``."""
        return or_(cls.held_at.is_(None), cls.approved_at.is_not(None))

    @classmethod
    def expired_for(cls, recipient_id: str, message_id: Any) -> ColumnElement[bool]:
        """SQL: ``recipient_id``'s copy of the message (``message_id``, a column or a value)
        expired unacknowledged: the message is no longer the recipient's to read or act on
        (``GET /v1/messages/{id}`` answers it ``410 expired``)."""
        return exists().where(
            cls.message_id == message_id,
            cls.recipient_id == recipient_id,
            cls.expired_at.is_not(None),
        )

    @classmethod
    def in_inbox(cls) -> list[ColumnElement[bool]]:
        """SQL: in its recipient's inbox, acknowledged or not: not expired, in a thread that is
        not closed, not held (expired, closed-thread and held mail has left the inbox, or not
        reached it yet)."""
        return [cls.expired_at.is_(None), cls.thread_closed_at.is_(None), cls.released()]

    @classmethod
    def waiting(cls) -> list[ColumnElement[bool]]:
        """SQL: ``WAITING``, the predicate of ``ix_deliveries_inbox``: in the inbox and not
        acknowledged."""
        return [cls.acknowledged_at.is_(None), *cls.in_inbox()]


class DeliveryAttempt(Base):
    """One HTTP try of a webhook notification: of a delivery (``message.created``) or of an event
    (``inbots.events``); exactly one of the two ids is set."""

    __tablename__ = "delivery_attempts"
    __table_args__ = (
        Index(None, "delivery_id", "number"),
        Index(None, "event_id", "number"),
        # The recent window (the failed attempts of the last hour, each agent's webhook health),
        # read without the whole log.
        Index("ix_delivery_attempts_started_at", "started_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    delivery_id: Mapped[str | None] = mapped_column(ForeignKey("deliveries.id"))
    event_id: Mapped[str | None] = mapped_column(ForeignKey("events.id"))
    number: Mapped[int] = mapped_column(Integer)
    publish: Mapped[int] = mapped_column(Integer)
    trigger: Mapped[str] = mapped_column(String(16))
    url: Mapped[str] = mapped_column(String(2048))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    status_code: Mapped[int | None] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(String(40))
    response_excerpt: Mapped[str | None] = mapped_column(Text)


class DeliveryTally(Base):
    """How many of a workspace's deliveries are acknowledged, kept exact as they are
    (:mod:`inbots.deliveries.tallies`): the operator's counts read this instead of counting
    history. Split over a few rows per workspace (``shard``), so that acknowledgements of
    different agents do not queue for one row; the count is their sum."""

    __tablename__ = "delivery_tallies"

    workspace_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    shard: Mapped[int] = mapped_column(Integer, primary_key=True)
    acknowledged: Mapped[int] = mapped_column(BigInteger, default=0)
