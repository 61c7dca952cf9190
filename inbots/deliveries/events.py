"""The operator's view of events (``GET /v1/events``, ``GET /v1/events/{id}`` with its attempts,
``POST /v1/events/{id}/redeliver``): events are outbox rows of this engine (:mod:`.outbox`), made
where they happen (:mod:`inbots.events`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, and_, or_, select

from inbots.caller import Caller
from inbots.db.uow import UnitOfWork, reads
from inbots.deliveries.outbox import publish_again
from inbots.deliveries.schemas import EVENT_STATES, AttemptRead, EventDetail, EventPage, EventRead
from inbots.errors import Invalid, not_found
from inbots.kit.cursor import LAST_ID
from inbots.models.agents import Agent
from inbots.models.deliveries import DeliveryAttempt
from inbots.models.events import Event
from inbots.webhooks.subscriptions import ALERT_TYPES, EVENT_TYPES, MESSAGE_CREATED

# message.created is a delivery; the operator's alerts (inbots.alerts) are events too.
TYPES = (*(t for t in EVENT_TYPES if t != MESSAGE_CREATED), *ALERT_TYPES)


def event_state(event: Event) -> str:
    """``notified`` or ``failed`` (whichever happened last), else ``pending`` while a push is
    owed, else ``unsent`` (no push was wanted)."""
    if event.notified_at and (not event.failed_at or event.notified_at > event.failed_at):
        return "notified"
    if event.failed_at:
        return "failed"
    return "pending" if event.publish_count > 0 else "unsent"


def _state_filter(state: str) -> ColumnElement[bool]:
    notified, failed = Event.notified_at, Event.failed_at
    return {
        "notified": and_(notified.is_not(None), or_(failed.is_(None), notified > failed)),
        "failed": and_(failed.is_not(None), or_(notified.is_(None), failed >= notified)),
        "pending": and_(notified.is_(None), failed.is_(None), Event.publish_count > 0),
        "unsent": and_(notified.is_(None), failed.is_(None), Event.publish_count == 0),
    }[state]


def _reads(uow: UnitOfWork, events: Sequence[Event]) -> list[EventRead]:
    ids = {e.recipient_id for e in events} | {e.actor_id for e in events}
    names = dict(
        uow.session.execute(select(Agent.id, Agent.username).where(Agent.id.in_(ids))).all()
    )
    return [
        EventRead(
            id=e.id,
            type=e.type,
            recipient=names.get(e.recipient_id, ""),
            actor=names.get(e.actor_id, ""),
            thread_id=e.thread_id,
            message_id=e.message_id,
            delivery_id=e.delivery_id,
            outcome=e.outcome,
            note=e.note,
            created_at=e.created_at,
            shown_at=e.shown_at,
            state=event_state(e),
            notified_at=e.notified_at,
            failed_at=e.failed_at,
            failure_reason=e.failure_reason,
            publish_count=e.publish_count,
            last_published_at=e.last_published_at,
            next_attempt_at=e.next_attempt_at,
            alert=json.loads(e.detail) if e.detail else None,
        )
        for e in events
    ]


@reads
def list_events(
    uow: UnitOfWork,
    caller: Caller,
    *,
    type: str | None = None,
    state: str | None = None,
    agent: str | None = None,
    thread: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> EventPage:
    """The operator's events, newest first, filtered by type, push state, the agent told or the
    thread."""
    caller.require_operator()
    s = uow.settings
    if type and type not in TYPES:
        raise Invalid(
            f"type must be one of {', '.join(TYPES)} (message.created notifications are "
            "deliveries: GET /v1/deliveries).",
            field="type",
        )
    if state and state not in EVENT_STATES:
        raise Invalid(f"state must be one of {', '.join(EVENT_STATES)}.", field="state")
    count = limit or s.list_default
    after = LAST_ID.decode(cursor)
    where: list[Any] = [Event.workspace_id == caller.workspace_id]
    if type:
        where.append(Event.type == type)
    if state:
        where.append(_state_filter(state))
    if agent:
        told = select(Agent.id).where(
            Agent.workspace_id == caller.workspace_id,
            (Agent.id == agent) | (Agent.username == agent),
        )
        where.append(Event.recipient_id.in_(told.scalar_subquery()))
    if thread:
        where.append(Event.thread_id == thread)
    if after:
        where.append(Event.id < after)
    rows = uow.session.scalars(
        select(Event).where(*where).order_by(Event.id.desc()).limit(count + 1)
    ).all()
    page = list(rows[:count])
    next_cursor = LAST_ID.encode(page[-1].id) if len(rows) > count else None
    return EventPage(items=_reads(uow, page), next_cursor=next_cursor)


def _event(uow: UnitOfWork, caller: Caller, event_id: str, *, lock: bool = False) -> Event:
    stmt = select(Event).where(Event.id == event_id, Event.workspace_id == caller.workspace_id)
    event = uow.session.scalars(stmt.with_for_update() if lock else stmt).first()
    if event is None:
        raise not_found("event", event_id)
    return event


@reads
def get_event(uow: UnitOfWork, caller: Caller, event_id: str) -> EventDetail:
    """One event with its attempt log (operator)."""
    caller.require_operator()
    event = _event(uow, caller, event_id)
    attempts = uow.session.scalars(
        select(DeliveryAttempt)
        .where(DeliveryAttempt.event_id == event.id)
        .order_by(DeliveryAttempt.number)
    ).all()
    return EventDetail(
        **_reads(uow, [event])[0].model_dump(),
        attempts=[AttemptRead.model_validate(a) for a in attempts],
    )


def redeliver_event(uow: UnitOfWork, caller: Caller, event_id: str) -> EventRead:
    """Publish the event's notification again (a failed or notified one too): a fresh set of
    attempts under the same ``webhook-id`` (the event id). Adds a publish; clears nothing."""
    caller.require_operator()
    event = _event(uow, caller, event_id, lock=True)
    recipient = uow.session.get_one(Agent, event.recipient_id)
    publish_again(uow, event, recipient, event.type)
    return _reads(uow, [event])[0]
