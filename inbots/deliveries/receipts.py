"""Receipts as a message's sender sees them: each recipient's state, stamps, outcome and note;
and those its long-poll has not shown yet (acknowledgements and rejections: events)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import ColumnElement, TextClause, select, text, update

from inbots.caller import Caller
from inbots.db.uow import UnitOfWork, mostly_reads, reads
from inbots.deliveries.schemas import Receipt, ReceiptEvent
from inbots.deliveries.state import state_of
from inbots.kit.clock import utcnow
from inbots.models.agents import Agent
from inbots.models.deliveries import Delivery
from inbots.models.events import RECEIPT_TYPES_SQL, Event


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


# The sender's long-poll.


def _unshown(caller: Caller) -> list[ColumnElement[bool] | TextClause]:
    """Receipts the caller has not been shown: acknowledgements of its messages and rejections
    of its held ones (matches ``ix_events_unshown``; the type test is the index's own text, so
    the planners can match the partial index's predicate)."""
    return [
        Event.recipient_id == caller.agent_id,
        text(f"events.{RECEIPT_TYPES_SQL}"),
        Event.shown_at.is_(None),
        Event.thread_closed_at.is_(None),
    ]


@reads
def has_unshown_receipts(uow: UnitOfWork, caller: Caller) -> bool:
    """Whether a recipient acknowledged one of the caller's messages, or the operator rejected
    one, since it was last shown receipts (the long-poll's trigger with ``events=receipts``)."""
    found = uow.session.scalar(select(Event.id).where(*_unshown(caller)).limit(1))
    return found is not None


@mostly_reads
def show_receipts(uow: UnitOfWork, caller: Caller) -> list[ReceiptEvent]:
    """The receipts of the caller's messages it has not been shown, oldest first (at most a
    listing's default of events), each with the delivery's current state; stamps them shown.
    An acknowledgement is its delivery's receipt; a rejection (one event for the message) is
    the receipt of each of the message's deliveries, ``rejected`` with the operator's reason."""
    events = uow.session.scalars(
        select(Event).where(*_unshown(caller)).order_by(Event.id).limit(uow.settings.list_default)
    ).all()
    if not events:
        return []
    uow.session.execute(
        update(Event)
        .where(Event.id.in_([event.id for event in events]), Event.shown_at.is_(None))
        .values(shown_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    by_delivery = [e.delivery_id for e in events if e.delivery_id]
    by_message = [e.message_id for e in events if not e.delivery_id and e.message_id]
    found = uow.session.execute(
        select(Delivery, Agent.username)
        .join(Agent, Agent.id == Delivery.recipient_id)
        .where(Delivery.id.in_(by_delivery) | Delivery.message_id.in_(by_message))
        .order_by(Delivery.id)
    ).all()
    of_delivery = {delivery.id: (delivery, name) for delivery, name in found}
    of_message: dict[str, list[tuple[Delivery, str]]] = {}
    for delivery, name in found:
        of_message.setdefault(delivery.message_id, []).append((delivery, name))
    receipts: list[ReceiptEvent] = []
    for event in events:
        if event.delivery_id:
            told = [of_delivery[event.delivery_id]] if event.delivery_id in of_delivery else []
        else:
            told = of_message.get(event.message_id or "", [])
        receipts.extend(
            ReceiptEvent(
                **receipt_fields(delivery, name),
                event_id=event.id,
                message_id=event.message_id or delivery.message_id,
                thread_id=event.thread_id,
            )
            for delivery, name in told
        )
    return receipts
