"""The approval gate: the workspace's policy, holding matching messages at send time, and the
operator's queue with approve and reject.

A held message is stored like any other (one delivery per recipient, in the send's
transaction) with ``messages.approval = 'held'`` and each delivery stamped ``held_at``. Held
deliveries are left out of everything a recipient sees (``Delivery.released()`` and
``Message.released()`` in the inbox, the long-poll, history, search, reads and acknowledgements),
are never published (``publish_count`` 0, so the sweep's republish never finds them; the stall
sweep's index leaves them out; the notify loader skips them) and count toward the caps (they are
mail owed to the recipient). Approving stamps ``approved_at`` and does what a send would have
done at that moment: publish to webhooks that receive ``message.created``, wake long-polls; the
stall clock starts then. Rejecting stamps ``rejected_at`` and the reason (the sender's receipts
read ``rejected``; the deliveries stop counting toward the caps) and records a
``message.rejected`` event for the sender.

What else a held sender writes that others read is held too. A thread it opens (``POST
/v1/threads`` while the policy's senders name it), and a held direct send's thread, is stored
with ``threads.approval = 'held'``: its title, goal, ref and participants are seen only by its
opener and the operator, every message posted in it is held, and it is let out when the operator
approves it or one of its messages (or writes in it); rejecting it, or the last of its messages
that waits, leaves it hidden. Its brief is stored with ``brief_held_at``: other agents read no
brief until the operator approves it; a rejection removes it. A reply naming a held message
(``reply_to``) is refused as one naming no message of the thread. The queue is
:mod:`.queue`.

The operator's own messages are never held: the operator is who approves.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, update

from inbots.alerts import service as alerts
from inbots.approvals import queue
from inbots.approvals.schemas import (
    ApprovalDecision,
    ApprovalItem,
    ApprovalList,
    ApprovalRulesRead,
    DecisionRequest,
    PolicyRead,
    PolicyUpdate,
)
from inbots.caller import Caller
from inbots.db.uow import UnitOfWork, reads
from inbots.dispatch.jobs import Job
from inbots.errors import Invalid, NotHeld, not_found
from inbots.events import service as events
from inbots.kit.clock import utcnow
from inbots.kit.ids import kind_of
from inbots.kit.text import shown_summary
from inbots.models.agents import Agent
from inbots.models.approvals import ApprovalPolicy, split
from inbots.models.deliveries import Delivery
from inbots.models.messages import APPROVED, HELD, KINDS, PRIORITIES, REJECTED, Message
from inbots.models.threads import CLOSED, Thread
from inbots.webhooks import subscriptions


def _policy_read(row: ApprovalPolicy | None) -> PolicyRead:
    if row is None:
        return PolicyRead(
            approval=ApprovalRulesRead(kinds=[], priorities=[], senders=[]), updated_at=None
        )
    return PolicyRead(
        approval=ApprovalRulesRead(
            kinds=split(row.kinds), priorities=split(row.priorities), senders=split(row.senders)
        ),
        updated_at=row.updated_at,
    )


@reads
def get_policy(uow: UnitOfWork, caller: Caller) -> PolicyRead:
    """The workspace's policy (operator only); empty lists while it was never set."""
    caller.require_operator()
    return _policy_read(uow.session.get(ApprovalPolicy, caller.workspace_id))


def _check_values(values: list[str], allowed: Sequence[str], field: str) -> list[str]:
    unknown = [v for v in dict.fromkeys(values) if v not in allowed]
    if unknown:
        raise Invalid(
            f"{field} has unknown values ({', '.join(map(repr, unknown))}); it takes "
            f"{', '.join(allowed)}.",
            field=field,
        )
    return [v for v in allowed if v in values]


def set_policy(uow: UnitOfWork, caller: Caller, request: PolicyUpdate) -> PolicyRead:
    """Replace the workspace's approval policy (operator only). Kinds and priorities must be
    known values and senders the usernames of agents of the workspace (422 naming the field).
    It applies to messages sent from now on; messages already held stay held."""
    caller.require_operator()
    rules = request.approval
    kinds = _check_values(rules.kinds, KINDS, "approval.kinds")
    priorities = _check_values(rules.priorities, PRIORITIES, "approval.priorities")
    senders = list(dict.fromkeys(rules.senders))
    if senders:
        known = set(
            uow.session.scalars(
                select(Agent.username).where(
                    Agent.workspace_id == caller.workspace_id,
                    Agent.username.in_(senders),
                    Agent.id != caller.agent_id,  # the operator's own row is never held
                )
            ).all()
        )
        unknown = [name for name in senders if name not in known]
        if unknown:
            raise Invalid(
                f"approval.senders names no agent of this workspace: "
                f"{', '.join(map(repr, unknown))}. Use agents' usernames (GET /v1/agents).",
                field="approval.senders",
            )
    row = uow.session.get(ApprovalPolicy, caller.workspace_id, with_for_update=True)
    if row is None:
        row = ApprovalPolicy(workspace_id=caller.workspace_id)
        uow.session.add(row)
    row.kinds, row.priorities, row.senders = (
        ",".join(kinds),
        ",".join(priorities),
        ",".join(senders),
    )
    row.updated_at = utcnow()
    uow.session.flush()
    return _policy_read(row)


# The title held direct sends' threads were given before held threads existed (migration 0025):
# such a thread is titled from its message when the message is approved.
HELD_TITLE = "A message waiting for the operator's approval"


def holds(
    uow: UnitOfWork, caller: Caller, kind: str, priority: str, thread: Thread | None = None
) -> bool:
    """Whether a message of ``kind`` and ``priority`` that ``caller`` sends now (in ``thread``)
    is held: its kind, its priority or its sender is listed in the workspace's policy, or the
    thread is held (the send path asks, once per send). The operator's messages are never
    held."""
    if caller.is_operator:
        return False
    if thread is not None and not thread.is_released:
        return True
    row = uow.session.get(ApprovalPolicy, caller.workspace_id)
    return row is not None and row.holds(kind, priority, caller.username)


def release(thread: Thread) -> None:
    """Let a held (or rejected) thread out: its participants see it from now on."""
    if not thread.is_released:
        thread.approval = APPROVED


def on_held(uow: UnitOfWork, message: Message, count: int) -> None:
    """A message was just held (``count`` deliveries, in the send's transaction, not yet
    committed): the operator's alert webhook is told ``approval.requested``, sent only if the
    send commits."""
    alerts.approval_requested(
        uow,
        message.workspace_id,
        message.id,
        thread_id=message.thread_id,
        sender=message.sender_id,
        kind=message.kind,
        priority=message.priority,
        summary=shown_summary(message.summary, message.body, uow.settings.summary_shown),
    )


@reads
def list_pending(uow: UnitOfWork, caller: Caller) -> ApprovalList:
    """What waits for the operator, oldest first (operator only): held messages, held threads
    none of whose messages waits, held briefs (:mod:`.queue`)."""
    caller.require_operator()
    return ApprovalList(items=queue.pending(uow, caller.workspace_id))


@reads
def pending_count(uow: UnitOfWork, caller: Caller) -> int:
    """How many items wait for the operator (the dashboard's nav link)."""
    caller.require_operator()
    return queue.pending_count(uow, caller.workspace_id)


def _not_held(what: str, ident: str, approval: str | None, never: str) -> NotHeld:
    said = {APPROVED: "was already approved", REJECTED: "was already rejected"}.get(
        approval or "", never
    )
    return NotHeld(
        f"{what} {ident} is not waiting for approval: it {said}. GET /v1/approvals lists what is."
    )


def _held(uow: UnitOfWork, caller: Caller, message_id: str) -> tuple[Message, Agent, Thread]:
    """The message, locked, its sender and its thread; 404 if the operator cannot see it, 409
    not_held if it is not waiting for a decision."""
    message = None
    if kind_of(message_id) == "message":
        message = uow.session.scalars(
            select(Message)
            .where(Message.id == message_id, Message.workspace_id == caller.workspace_id)
            .with_for_update()
        ).first()
    if message is None:
        raise not_found("held message", message_id)
    if message.approval != HELD:
        never = "was never held (the approval policy did not match it)"
        raise _not_held("Message", message_id, message.approval, never)
    sender = uow.session.get_one(Agent, message.sender_id)
    return message, sender, uow.session.get_one(Thread, message.thread_id)


def _held_thread(uow: UnitOfWork, caller: Caller, thread_id: str) -> tuple[Thread, Agent]:
    """The thread, locked, and its opener; 404 or 409 not_held as :func:`_held`."""
    thread = uow.session.scalars(
        select(Thread)
        .where(Thread.id == thread_id, Thread.workspace_id == caller.workspace_id)
        .with_for_update()
    ).first()
    if thread is None:
        raise not_found("held thread", thread_id)
    if thread.approval != HELD:
        never = "was never held (its opener's sends were not held when it was opened)"
        raise _not_held("Thread", thread_id, thread.approval, never)
    return thread, uow.session.get_one(Agent, thread.opened_by_id)


def _held_brief(uow: UnitOfWork, caller: Caller, agent_id: str) -> Agent:
    """The agent whose brief waits, locked; 404 or 409 not_held as :func:`_held`."""
    agent = uow.session.scalars(
        select(Agent)
        .where(Agent.id == agent_id, Agent.workspace_id == caller.workspace_id)
        .with_for_update()
    ).first()
    if agent is None:
        raise not_found("agent", agent_id)
    if agent.brief_held_at is None:
        raise NotHeld(
            f"The brief of {agent.username} ({agent_id}) is not waiting for approval. GET "
            "/v1/approvals lists what is."
        )
    return agent


def _decision(
    item: ApprovalItem,
    state: str,
    approved_at: datetime | None,
    rejected_at: datetime | None,
    reason: str | None,
) -> ApprovalDecision:
    return ApprovalDecision(
        **item.model_dump(),
        state=state,
        approved_at=approved_at,
        rejected_at=rejected_at,
        reason=reason,
    )


def approve(
    uow: UnitOfWork, caller: Caller, ident: str, request: DecisionRequest | None = None
) -> ApprovalDecision:
    """Approve what waits (operator only), by the id its queue item gives, with an optional
    reason (checked and answered back, not stored). A message: its deliveries flow as a send
    would have made them flow at this moment (published to webhooks that receive
    message.created, long-polls woken, the stall clock started; deliveries that expired or whose
    thread closed meanwhile are only stamped), and its thread, if held, is let out with it. A
    thread (``th_…``): its participants see it. A brief (the agent's id): other agents read it.
    404: no such message, thread or agent; 409 ``not_held``: it is not waiting for a decision."""
    caller.require_operator()
    reason = _reason(uow, request)
    now = utcnow()
    what = kind_of(ident)
    if what == "thread":
        thread, opener = _held_thread(uow, caller, ident)
        (item,) = queue.thread_items(uow, [(thread, opener.username)])
        release(thread)
        thread.last_activity_at = max(thread.last_activity_at, now)
        uow.session.flush()
        return _decision(item, APPROVED, now, None, reason)
    if what == "agent":
        agent = _held_brief(uow, caller, ident)
        item = queue.brief_item(agent)
        agent.brief_held_at = None
        uow.session.flush()
        return _decision(item, APPROVED, now, None, reason)
    message, sender, opened = _held(uow, caller, ident)
    message.approval = APPROVED
    release(opened)
    if opened.title == HELD_TITLE:  # a direct send's thread, titled from this message now
        opened.title = shown_summary(message.summary, message.body, uow.settings.thread_title_max)
    (item,) = queue.message_items(uow, [(message, sender.username, opened)])
    _flow(uow, message, now)
    return _decision(item, APPROVED, now, None, reason)


def _flow(uow: UnitOfWork, message: Message, now: datetime) -> None:
    """An approved message's deliveries flow as a send's would at ``now``."""
    rows = uow.session.execute(
        select(Delivery, Agent, Thread.status)
        .join(Agent, Agent.id == Delivery.recipient_id)
        .join(Thread, Thread.id == Delivery.thread_id)
        .where(Delivery.message_id == message.id, Delivery.approved_at.is_(None))
        .order_by(Delivery.id)
        .with_for_update(of=Delivery)
    ).all()
    jobs: list[Job] = []
    woken: list[str] = []
    for delivery, recipient, thread_status in rows:
        delivery.approved_at = now
        if (
            delivery.expired_at is not None
            or (delivery.expires_at is not None and delivery.expires_at <= now)
            or thread_status == CLOSED
            or delivery.acknowledged_at is not None
        ):
            continue
        delivery.moved_at = now  # the stall clock starts at the approval
        woken.append(recipient.id)
        if (
            recipient.status == "active"
            and recipient.webhook_url
            and subscriptions.subscribed(recipient.webhook_events, subscriptions.MESSAGE_CREATED)
        ):
            delivery.publish_count += 1
            delivery.last_published_at = now
            jobs.append(Job(delivery.id, delivery.publish_count, "publish"))
    # The message shows in its thread from now on: the thread's activity moves with it.
    uow.session.execute(
        update(Thread)
        .where(Thread.id == message.thread_id, Thread.last_activity_at < now)
        .values(last_activity_at=now)
    )
    uow.session.flush()
    uow.wake(woken)
    uow.enqueue(*jobs)


def _reason(uow: UnitOfWork, request: DecisionRequest | None) -> str | None:
    """A decision's reason, trimmed (blank is none), at most ``note_max`` characters."""
    reason = request.reason if request is not None else None
    if reason is not None:
        reason = reason.strip() or None
    if reason is not None and len(reason) > uow.settings.note_max:
        raise Invalid(
            f"reason must be at most {uow.settings.note_max} characters (got {len(reason)}).",
            field="reason",
        )
    return reason


def reject(
    uow: UnitOfWork, caller: Caller, ident: str, request: DecisionRequest | None = None
) -> ApprovalDecision:
    """Reject what waits (operator only), by the id its queue item gives, with an optional
    reason. A message never reaches its recipients; its sender's receipts read ``rejected``
    (with the reason) and it is told with a ``message.rejected`` event; a held thread left with
    no message waiting stays hidden. A thread stays hidden for good (its waiting messages are
    rejected with it; a message posted in it later is held). A brief is removed. 404: no such
    message, thread or agent; 409 ``not_held``: not waiting."""
    caller.require_operator()
    reason = _reason(uow, request)
    now = utcnow()
    what = kind_of(ident)
    if what == "thread":
        thread, opener = _held_thread(uow, caller, ident)
        (item,) = queue.thread_items(uow, [(thread, opener.username)])
        thread.approval = REJECTED
        for message in uow.session.scalars(
            select(Message)
            .where(Message.thread_id == thread.id, Message.approval == HELD)
            .order_by(Message.id)
            .with_for_update()
        ).all():
            sender = uow.session.get_one(Agent, message.sender_id)
            _turn_down(uow, caller, message, sender, now, reason)
        return _decision(item, REJECTED, None, now, reason)
    if what == "agent":
        agent = _held_brief(uow, caller, ident)
        item = queue.brief_item(agent)
        agent.brief, agent.brief_held_at, agent.brief_updated_at = None, None, now
        uow.session.flush()
        return _decision(item, REJECTED, None, now, reason)
    message, sender, opened = _held(uow, caller, ident)
    (item,) = queue.message_items(uow, [(message, sender.username, opened)])
    _turn_down(uow, caller, message, sender, now, reason)
    if opened.approval == HELD and not uow.session.scalar(
        select(Message.id).where(Message.thread_id == opened.id, Message.approval == HELD)
    ):  # nothing of its own left to let it out: the thread is turned down with its message
        opened.approval = REJECTED
    return _decision(item, REJECTED, None, now, reason)


def _turn_down(
    uow: UnitOfWork,
    caller: Caller,
    message: Message,
    sender: Agent,
    now: datetime,
    reason: str | None,
) -> None:
    """Reject one held message: its deliveries stamped, its sender told."""
    message.approval = REJECTED
    for delivery in uow.session.scalars(
        select(Delivery).where(Delivery.message_id == message.id).with_for_update()
    ).all():
        delivery.rejected_at = now
        delivery.rejection_reason = reason
        delivery.next_attempt_at = None
    uow.session.flush()
    events.record_rejected(
        uow,
        workspace_id=message.workspace_id,
        message_id=message.id,
        thread_id=message.thread_id,
        sender=sender,
        actor_id=caller.agent_id,
        reason=reason,
        now=now,
    )
