"""The operator's approval queue: what waits for a decision, as the operator decides on it.

Three kinds of item (``ApprovalItem.subject``): a held message, with its thread's title, goal and
ref, its recipients and its body; a held thread none of whose messages waits (a held sender
opened it and has posted nothing, or what it posted was decided); an agent's held brief. A held
thread with a message waiting is shown through that message: approving the message approves the
thread.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from sqlalchemy import Exists, exists, func, select
from sqlalchemy.orm import aliased

from inbots.approvals.schemas import BRIEF, MESSAGE, THREAD, ApprovalItem
from inbots.db.uow import UnitOfWork
from inbots.kit.text import shown_summary
from inbots.models.agents import Agent
from inbots.models.deliveries import Delivery
from inbots.models.messages import HELD, Message
from inbots.models.threads import Participant, Thread

_opener = aliased(Agent)


def _recipients(uow: UnitOfWork, message_ids: Iterable[str]) -> dict[str, list[str]]:
    """Each message's recipients' usernames, in delivery order, in one query."""
    ids = list(message_ids)
    found: dict[str, list[str]] = defaultdict(list)
    if ids:
        for message_id, username in uow.session.execute(
            select(Delivery.message_id, Agent.username)
            .join(Agent, Agent.id == Delivery.recipient_id)
            .where(Delivery.message_id.in_(ids))
            .order_by(Delivery.id)
        ):
            found[message_id].append(username)
    return found


def _others(uow: UnitOfWork, threads: Sequence[Thread]) -> dict[str, list[str]]:
    """Each thread's participants other than its opener, in the order they joined."""
    found: dict[str, list[str]] = defaultdict(list)
    if threads:
        for thread_id, username in uow.session.execute(
            select(Participant.thread_id, Agent.username)
            .join(Agent, Agent.id == Participant.agent_id)
            .join(Thread, Thread.id == Participant.thread_id)
            .where(
                Participant.thread_id.in_([t.id for t in threads]),
                Participant.agent_id != Thread.opened_by_id,
            )
            .order_by(Participant.added_at, Agent.username)
        ):
            found[thread_id].append(username)
    return found


def message_items(
    uow: UnitOfWork, rows: Sequence[tuple[Message, str, Thread]]
) -> list[ApprovalItem]:
    """Items for messages, each with its sender's username and its thread."""
    recipients = _recipients(uow, (m.id for m, _, _ in rows))
    shown = uow.settings.summary_shown
    return [
        ApprovalItem(
            subject=MESSAGE,
            id=message.id,
            message_id=message.id,
            thread_id=message.thread_id,
            sender=sender,
            kind=message.kind,
            priority=message.priority,
            summary=shown_summary(message.summary, message.body, shown),
            body=message.body,
            thread_title=thread.title,
            thread_goal=thread.goal,
            thread_ref=thread.ref,
            recipients=recipients.get(message.id, []),
            brief=None,
            held_at=message.created_at,  # the deliveries' held_at: held as they were stored
        )
        for message, sender, thread in rows
    ]


def thread_items(uow: UnitOfWork, rows: Sequence[tuple[Thread, str]]) -> list[ApprovalItem]:
    """Items for threads, each with its opener's username."""
    others = _others(uow, [t for t, _ in rows])
    return [
        ApprovalItem(
            subject=THREAD,
            id=thread.id,
            message_id=None,
            thread_id=thread.id,
            sender=opener,
            kind=None,
            priority=None,
            summary=None,
            body=None,
            thread_title=thread.title,
            thread_goal=thread.goal,
            thread_ref=thread.ref,
            recipients=others.get(thread.id, []),
            brief=None,
            held_at=thread.created_at,  # held as it was opened
        )
        for thread, opener in rows
    ]


def brief_item(agent: Agent) -> ApprovalItem:
    """The item for an agent's held brief."""
    assert agent.brief_held_at is not None
    return ApprovalItem(
        subject=BRIEF,
        id=agent.id,
        message_id=None,
        thread_id=None,
        sender=agent.username,
        kind=None,
        priority=None,
        summary=None,
        body=None,
        thread_title=None,
        thread_goal=None,
        thread_ref=None,
        recipients=[],
        brief=agent.brief,
        held_at=agent.brief_held_at,
    )


def _waiting_in(thread: type[Thread]) -> Exists:
    """SQL: a message of the thread waits for a decision (it then stands for the thread)."""
    return exists().where(Message.thread_id == thread.id, Message.approval == HELD)


def pending(uow: UnitOfWork, workspace_id: str) -> list[ApprovalItem]:
    """Everything waiting in the workspace, oldest first, the oldest ``list_max``."""
    count = uow.settings.list_max
    messages = uow.session.execute(
        select(Message, Agent.username, Thread)
        .join(Agent, Agent.id == Message.sender_id)
        .join(Thread, Thread.id == Message.thread_id)
        .where(Message.workspace_id == workspace_id, Message.approval == HELD)
        .order_by(Message.id)
        .limit(count)
    ).all()
    threads = uow.session.execute(
        select(Thread, _opener.username)
        .join(_opener, _opener.id == Thread.opened_by_id)
        .where(Thread.workspace_id == workspace_id, Thread.approval == HELD)
        .where(~_waiting_in(Thread))
        .order_by(Thread.created_at, Thread.id)
        .limit(count)
    ).all()
    briefs = uow.session.scalars(
        select(Agent)
        .where(Agent.workspace_id == workspace_id, Agent.brief_held_at.is_not(None))
        .order_by(Agent.brief_held_at, Agent.id)
        .limit(count)
    ).all()
    items = [
        *message_items(uow, [(m, name, t) for m, name, t in messages]),
        *thread_items(uow, [(t, name) for t, name in threads]),
        *(brief_item(a) for a in briefs),
    ]
    items.sort(key=lambda item: item.held_at)  # stable: each kind keeps its own order
    return items[:count]


def pending_count(uow: UnitOfWork, workspace_id: str) -> int:
    """How many items :func:`pending` has in all (the dashboard's nav link)."""
    counts = (
        select(func.count())
        .select_from(Message)
        .where(Message.workspace_id == workspace_id, Message.approval == HELD),
        select(func.count())
        .select_from(Thread)
        .where(Thread.workspace_id == workspace_id, Thread.approval == HELD)
        .where(~_waiting_in(Thread)),
        select(func.count())
        .select_from(Agent)
        .where(Agent.workspace_id == workspace_id, Agent.brief_held_at.is_not(None)),
    )
    return sum(uow.session.scalar(query) or 0 for query in counts)
