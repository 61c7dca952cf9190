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

The operator's own messages are never held: the operator is who approves.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select, update

from inbots.alerts import service as alerts
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
from inbots.models.approvals import ApprovalPolicy
from inbots.models.deliveries import Delivery
from inbots.models.messages import APPROVED, HELD, KINDS, PRIORITIES, REJECTED, Message
from inbots.models.threads import CLOSED, Thread
from inbots.webhooks import subscriptions


def _split(stored: str) -> list[str]:
    return [v for v in stored.split(",") if v]


def _policy_read(row: ApprovalPolicy | None) -> PolicyRead:
    if row is None:
        return PolicyRead(
            approval=ApprovalRulesRead(kinds=[], priorities=[], senders=[]), updated_at=None
        )
    return PolicyRead(
        approval=ApprovalRulesRead(
            kinds=_split(row.kinds), priorities=_split(row.priorities), senders=_split(row.senders)
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


# The title of a thread a held direct send opened, while its message waits: the title it would
# have had comes from the message (its summary or first line), which its recipients may not see
# before the operator approves. The approval gives the thread that title; a rejection leaves this.
HELD_TITLE = "A message waiting for the operator's approval"


def holds(uow: UnitOfWork, caller: Caller, kind: str, priority: str) -> bool:
    """Whether the workspace's policy holds a message of ``kind`` and ``priority`` that
    ``caller`` sends now: its kind, its priority or its sender is listed (the send path asks,
    once per send). The operator's messages are never held."""
    if caller.is_operator:
        return False
    row = uow.session.get(ApprovalPolicy, caller.workspace_id)
    if row is None:
        return False
    return (
        kind in _split(row.kinds)
        or priority in _split(row.priorities)
        or caller.username in _split(row.senders)
    )


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


def _item(message: Message, sender: str, uow: UnitOfWork) -> ApprovalItem:
    return ApprovalItem(
        message_id=message.id,
        thread_id=message.thread_id,
        sender=sender,
        kind=message.kind,
        priority=message.priority,
        summary=shown_summary(message.summary, message.body, uow.settings.summary_shown),
        held_at=message.created_at,  # the deliveries' held_at: held as they were stored
    )


@reads
def list_pending(uow: UnitOfWork, caller: Caller) -> ApprovalList:
    """The held messages waiting for the operator, oldest first (operator only)."""
    caller.require_operator()
    rows = uow.session.execute(
        select(Message, Agent.username)
        .join(Agent, Agent.id == Message.sender_id)
        .where(Message.workspace_id == caller.workspace_id, Message.approval == HELD)
        .order_by(Message.id)
        .limit(uow.settings.list_max)
    ).all()
    return ApprovalList(items=[_item(m, name, uow) for m, name in rows])


@reads
def pending_count(uow: UnitOfWork, caller: Caller) -> int:
    """How many messages wait for the operator (the dashboard's nav link)."""
    caller.require_operator()
    return (
        uow.session.scalar(
            select(func.count())
            .select_from(Message)
            .where(Message.workspace_id == caller.workspace_id, Message.approval == HELD)
        )
        or 0
    )


def _held(uow: UnitOfWork, caller: Caller, message_id: str) -> tuple[Message, Agent]:
    """The message, locked, and its sender; 404 if the operator cannot see it, 409 not_held if it
    is not waiting for a decision."""
    caller.require_operator()
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
        what = {
            APPROVED: "was already approved",
            REJECTED: "was already rejected",
        }.get(message.approval or "", "was never held (the approval policy did not match it)")
        raise NotHeld(
            f"Message {message_id} is not waiting for approval: it {what}. GET /v1/approvals "
            "lists the messages that are."
        )
    sender = uow.session.get_one(Agent, message.sender_id)
    return message, sender


def _decision(
    uow: UnitOfWork,
    message: Message,
    sender: str,
    approved_at: datetime | None,
    rejected_at: datetime | None,
    reason: str | None,
) -> ApprovalDecision:
    return ApprovalDecision(
        **_item(message, sender, uow).model_dump(),
        state=message.approval or "",
        approved_at=approved_at,
        rejected_at=rejected_at,
        reason=reason,
    )


def approve(
    uow: UnitOfWork, caller: Caller, message_id: str, request: DecisionRequest | None = None
) -> ApprovalDecision:
    """Approve a held message (operator only): its deliveries flow as a send would have made them
    flow at this moment (published to webhooks that receive message.created, long-polls woken,
    the stall clock started). Deliveries that expired or whose thread closed meanwhile are only
    stamped. The optional reason is checked and answered back, not stored. 404: no such
    message; 409 ``not_held``: it is not waiting for a decision."""
    reason = _reason(uow, request)
    message, sender = _held(uow, caller, message_id)
    now = utcnow()
    message.approval = APPROVED
    opened = uow.session.get_one(Thread, message.thread_id)
    if opened.title == HELD_TITLE:  # a direct send's thread, titled from this message now
        opened.title = shown_summary(message.summary, message.body, uow.settings.thread_title_max)
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
    return _decision(uow, message, sender.username, now, None, reason)


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
    uow: UnitOfWork, caller: Caller, message_id: str, request: DecisionRequest | None = None
) -> ApprovalDecision:
    """Reject a held message (operator only), with an optional reason: it never reaches its
    recipients; its sender's receipts read ``rejected`` (with the reason) and it is told with a
    ``message.rejected`` event. 404: no such message; 409 ``not_held``: not waiting."""
    reason = _reason(uow, request)
    message, sender = _held(uow, caller, message_id)
    now = utcnow()
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
    return _decision(uow, message, sender.username, None, now, reason)
