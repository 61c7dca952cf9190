"""The operator's console of deliveries (``GET /v1/deliveries``, ``GET /v1/deliveries/{id}``
with its attempt log, ``POST /v1/deliveries/{id}/redeliver``): every receipt of the workspace,
whoever it is addressed to. The recipient's side (the inbox, stamps, acknowledgements, the
working heartbeat) is :mod:`.service`; the operator's view of events is :mod:`.events`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, select

from inbots.agents import service as agents
from inbots.caller import Caller
from inbots.db.uow import UnitOfWork, reads
from inbots.deliveries.outbox import publish_again
from inbots.deliveries.schemas import AttemptRead, DeliveryDetail, DeliveryPage, DeliveryRead
from inbots.deliveries.service import to_read
from inbots.deliveries.state import STATES
from inbots.deliveries.state_sql import state_filter
from inbots.errors import Conflict, Invalid, not_found
from inbots.kit.cursor import LAST_ID
from inbots.models.agents import Agent
from inbots.models.deliveries import Delivery, DeliveryAttempt
from inbots.webhooks import subscriptions


def to_reads(uow: UnitOfWork, deliveries: Sequence[Delivery]) -> list[DeliveryRead]:
    names = agents.usernames(uow, (d.recipient_id for d in deliveries))
    return [to_read(d, names.get(d.recipient_id, "")) for d in deliveries]


@reads
def list_deliveries(
    uow: UnitOfWork,
    caller: Caller,
    *,
    state: str | None = None,
    agent: str | None = None,
    thread: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> DeliveryPage:
    """The operator's receipts, newest first, filtered by derived state, recipient or thread."""
    caller.require_operator()
    s = uow.settings
    state = state or None
    if state is not None and state not in STATES:
        raise Invalid(f"state must be one of {', '.join(STATES)}.", field="state")
    count = limit or s.list_default
    after = LAST_ID.decode(cursor)
    where: list[Any] = [Delivery.workspace_id == caller.workspace_id]
    if state is not None:
        where.append(state_filter(Delivery, state))
    if agent:
        recipient = select(Agent.id).where(
            Agent.workspace_id == caller.workspace_id,
            (Agent.id == agent) | (Agent.username == agent),
        )
        where.append(Delivery.recipient_id.in_(recipient.scalar_subquery()))
    if thread:
        where.append(Delivery.thread_id == thread)
    if after:
        where.append(Delivery.id < after)
    rows = uow.session.scalars(
        select(Delivery).where(and_(*where)).order_by(Delivery.id.desc()).limit(count + 1)
    ).all()
    page = list(rows[:count])
    next_cursor = LAST_ID.encode(page[-1].id) if len(rows) > count else None
    return DeliveryPage(items=to_reads(uow, page), next_cursor=next_cursor)


@reads
def get_delivery(uow: UnitOfWork, caller: Caller, delivery_id: str) -> DeliveryDetail:
    """One receipt with its whole attempt log (operator)."""
    caller.require_operator()
    delivery = uow.session.scalars(
        select(Delivery).where(
            Delivery.id == delivery_id, Delivery.workspace_id == caller.workspace_id
        )
    ).first()
    if delivery is None:
        raise not_found("delivery", delivery_id)
    attempts = uow.session.scalars(
        select(DeliveryAttempt)
        .where(DeliveryAttempt.delivery_id == delivery.id)
        .order_by(DeliveryAttempt.number)
    ).all()
    read = to_reads(uow, [delivery])[0]
    return DeliveryDetail(
        **read.model_dump(), attempts=[AttemptRead.model_validate(a) for a in attempts]
    )


def redeliver(uow: UnitOfWork, caller: Caller, delivery_id: str) -> DeliveryRead:
    """Publish the notification again (a failed one too): a fresh set of attempts under the same
    ``webhook-id``. Adds a publish; clears no stamp and no attempt."""
    caller.require_operator()
    delivery = uow.session.scalars(
        select(Delivery)
        .where(Delivery.id == delivery_id, Delivery.workspace_id == caller.workspace_id)
        .with_for_update()
    ).first()
    if delivery is None:
        raise not_found("delivery", delivery_id)
    if delivery.held_at is not None and delivery.approved_at is None:
        # A publish would only be skipped, and the sweep would republish it until it failed.
        what = "was rejected" if delivery.rejected_at else "is held for your approval"
        raise Conflict(
            f"Delivery {delivery_id!r} {what}: there is nothing to notify. "
            + (
                "Its message never reaches its recipient."
                if delivery.rejected_at
                else f"Approve its message (POST /v1/approvals/{delivery.message_id}/approve) "
                "and it is notified as a new send is."
            )
        )
    if delivery.thread_closed_at is not None:
        # Its thread is closed: the publish would only be skipped, leaving no trace of why.
        raise Conflict(
            f"Delivery {delivery_id!r} is in a closed thread ({delivery.thread_id}): closed "
            "threads' mail is never notified. There is nothing to redeliver."
        )
    recipient = uow.session.get_one(Agent, delivery.recipient_id)
    publish_again(uow, delivery, recipient, subscriptions.MESSAGE_CREATED)
    return to_read(delivery, recipient.username)
