"""Receipts as a message's sender sees them: each recipient's state, stamps, outcome and note."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import select

from inbots.agents.models import Agent
from inbots.db.uow import UnitOfWork
from inbots.deliveries.models import Delivery
from inbots.deliveries.schemas import Receipt
from inbots.deliveries.state import state_of


def receipt_fields(delivery: Delivery, recipient: str) -> dict[str, Any]:
    return {
        "delivery_id": delivery.id,
        "recipient": recipient,
        "state": state_of(delivery),
        "delivered_at": delivery.delivered_at,
        "fetched_at": delivery.fetched_at,
        "working_at": delivery.working_at,
        "working_note": delivery.working_note,
        "acknowledged_at": delivery.acknowledged_at,
        "outcome": delivery.outcome,
        "note": delivery.note,
        "held_at": delivery.held_at,
        "approved_at": delivery.approved_at,
        "rejected_at": delivery.rejected_at,
        "rejection_reason": delivery.rejection_reason,
    }


def to_receipt(delivery: Delivery, recipient: str) -> Receipt:
    return Receipt(**receipt_fields(delivery, recipient))


def receipts_of(uow: UnitOfWork, message_ids: Collection[str]) -> dict[str, list[Receipt]]:
    """Every recipient's receipt of each of these messages, in one query (in the order the
    deliveries were made: the thread's participants' order)."""
    found: dict[str, list[Receipt]] = {m: [] for m in message_ids}
    if not found:
        return found
    rows = uow.session.execute(
        select(Delivery, Agent.username)
        .join(Agent, Agent.id == Delivery.recipient_id)
        .where(Delivery.message_id.in_(list(found)))
        .order_by(Delivery.id)
    ).all()
    for delivery, username in rows:
        found[delivery.message_id].append(to_receipt(delivery, username))
    return found
