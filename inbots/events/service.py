"""Events: made where they happen (an acknowledgement, a rejection, a close request, a close).
The sender's long-poll shows its receipts (:mod:`inbots.deliveries.receipts`); the operator sees
them, with their attempts, and redelivers them (:mod:`inbots.deliveries.events`).

An event is one row per agent told, in the same transaction as what it reports, and it is an
outbox row like a delivery (:mod:`inbots.deliveries.outbox`): a row whose agent's webhook receives
its type is published at once (``publish_count`` 1, sent after the commit); the renotify sweep is
the safety net, and the operator can redeliver it. Rows are made only for agents that will be
told: every ``message.acknowledged`` (the sender's long-poll shows it, webhook or not), and a
thread event only for participants whose webhook receives it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update

from inbots.db.uow import UnitOfWork
from inbots.dispatch.jobs import Job
from inbots.kit.ids import new_id
from inbots.models.agents import Agent
from inbots.models.events import Event
from inbots.models.threads import Participant, Thread
from inbots.webhooks import subscriptions
from inbots.webhooks.subscriptions import (
    MESSAGE_ACKNOWLEDGED,
    MESSAGE_REJECTED,
)
from inbots.webhooks.wanted import wants


def pushes(agent: Any, event_type: str) -> bool:
    """Whether ``agent`` (a row with ``status``, ``webhook_url`` and ``webhook_events``) is
    pushed notifications of ``event_type`` now."""
    return (
        agent.status == "active"
        and bool(agent.webhook_url)
        and subscriptions.subscribed(agent.webhook_events, event_type)
    )


def _insert(uow: UnitOfWork, rows: list[dict[str, Any]]) -> None:
    """Store events (one INSERT, however many: NULLs are sent as NULL, see
    ``inbots.messages.service._deliver``) and publish those with a push after the commit."""
    if not rows:
        return
    uow.session.execute(insert(Event).execution_options(render_nulls=True), rows)
    uow.enqueue(*[Job(row["id"], 1, "publish") for row in rows if row["publish_count"]])


def _row(
    *,
    workspace_id: str,
    event_type: str,
    recipient_id: str,
    actor_id: str,
    thread_id: str,
    push: bool,
    now: datetime,
    message_id: str | None = None,
    delivery_id: str | None = None,
    outcome: str | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    return {
        "id": new_id("evt"),
        "workspace_id": workspace_id,
        "type": event_type,
        "recipient_id": recipient_id,
        "actor_id": actor_id,
        "thread_id": thread_id,
        "message_id": message_id,
        "delivery_id": delivery_id,
        "outcome": outcome,
        "note": note,
        "created_at": now,
        "publish_count": 1 if push else 0,
        "last_published_at": now if push else None,
    }


@dataclass(frozen=True)
class Acknowledged:
    """A delivery acknowledged just now, and whether its message's sender is pushed
    ``message.acknowledged`` (:func:`pushes`)."""

    delivery_id: str
    message_id: str
    thread_id: str
    workspace_id: str
    recipient_id: str
    sender_id: str
    push: bool


def record_acknowledged(
    uow: UnitOfWork,
    acknowledged: Sequence[Acknowledged],
    outcome: str | None,
    note: str | None,
    now: datetime,
) -> None:
    """One ``message.acknowledged`` event per delivery acknowledged now, for its message's
    sender; wakes the senders' long-polls after the commit. One statement however many."""
    _insert(
        uow,
        [
            _row(
                workspace_id=a.workspace_id,
                event_type=MESSAGE_ACKNOWLEDGED,
                recipient_id=a.sender_id,
                actor_id=a.recipient_id,
                thread_id=a.thread_id,
                message_id=a.message_id,
                delivery_id=a.delivery_id,
                outcome=outcome,
                note=note,
                push=a.push,
                now=now,
            )
            for a in acknowledged
        ],
    )
    uow.wake({a.sender_id for a in acknowledged})


def record_rejected(
    uow: UnitOfWork,
    *,
    workspace_id: str,
    message_id: str,
    thread_id: str,
    sender: Any,
    actor_id: str,
    reason: str | None,
    now: datetime,
) -> None:
    """One ``message.rejected`` event for the sender of a held message the operator rejected
    (``sender``: its agent row); the reason is the event's note. Made whether or not its webhook
    receives the type (the operator's events list shows it), pushed only if it does."""
    _insert(
        uow,
        [
            _row(
                workspace_id=workspace_id,
                event_type=MESSAGE_REJECTED,
                recipient_id=sender.id,
                actor_id=actor_id,
                thread_id=thread_id,
                message_id=message_id,
                note=reason,
                push=pushes(sender, MESSAGE_REJECTED),
                now=now,
            )
        ],
    )
    uow.wake([sender.id])


def record_thread_event(
    uow: UnitOfWork, thread: Thread, event_type: str, actor_id: str, now: datetime
) -> None:
    """``thread.close_requested`` or ``thread.closed``: one event for each other participant
    whose webhook receives it (nobody else would ever be told). A thread held for the operator
    tells nobody: its participants do not see it."""
    if not thread.is_released:
        return
    told = uow.session.execute(
        select(Agent.id, Agent.status, Agent.webhook_url, Agent.webhook_events)
        .join(Participant, Participant.agent_id == Agent.id)
        .where(
            Participant.thread_id == thread.id,
            Agent.id != actor_id,
            Agent.status == "active",
            Agent.webhook_url.is_not(None),
            wants(Agent.webhook_events, event_type),
        )
    ).all()
    _insert(
        uow,
        [
            _row(
                workspace_id=thread.workspace_id,
                event_type=event_type,
                recipient_id=agent.id,
                actor_id=actor_id,
                thread_id=thread.id,
                push=pushes(agent, event_type),
                now=now,
            )
            for agent in told
        ],
    )


def thread_closed(uow: UnitOfWork, thread_id: str, now: datetime) -> None:
    """The thread is closing: its events still owed a push are no longer (as its deliveries),
    and they leave the long-poll's and the sweep's indexes."""
    uow.session.execute(
        update(Event)
        .where(Event.thread_id == thread_id, Event.thread_closed_at.is_(None))
        .values(thread_closed_at=now)
        .execution_options(synchronize_session=False)
    )
