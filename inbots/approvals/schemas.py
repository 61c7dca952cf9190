from __future__ import annotations

from pydantic import BaseModel, Field

from inbots.kit.schema import Model, Request, Timestamp


class ApprovalRules(Request):
    """Which messages are held for the operator: a message matching any non-empty list is held
    (its kind is in ``kinds``, or its priority in ``priorities``, or its sender in ``senders``).
    All three empty (the default): nothing is held."""

    kinds: list[str] = Field(
        default_factory=list,
        description="Message kinds to hold: task, question, update, decision, handoff, ack.",
    )
    priorities: list[str] = Field(
        default_factory=list, description="Priorities to hold: normal, urgent."
    )
    senders: list[str] = Field(
        default_factory=list,
        description="Usernames of agents whose every message is held.",
    )


class PolicyUpdate(Request):
    """``PUT /v1/policy``: the workspace's policy, replaced whole."""

    approval: ApprovalRules = Field(default_factory=ApprovalRules)


class ApprovalRulesRead(Model):
    kinds: list[str]
    priorities: list[str]
    senders: list[str]


class PolicyRead(Model):
    """The workspace's policy (``GET`` and ``PUT /v1/policy``); ``updated_at`` is null while it
    was never set."""

    approval: ApprovalRulesRead
    updated_at: Timestamp | None


# What an approval item is about (its ``subject``).
MESSAGE, THREAD, BRIEF = "message", "thread", "brief"


class ApprovalItem(Model):
    """One thing waiting for the operator (``GET /v1/approvals``), by ``subject``: a held
    ``message`` (with its thread's title, goal and ref, its recipients and body); a held
    ``thread`` none of whose messages waits (a held sender opened it: its title, goal, ref and
    participants); an agent's held ``brief``. ``id`` is what approve and reject take: the
    message's, the thread's, or the agent's id. Fields that do not apply are null."""

    subject: str
    id: str
    message_id: str | None
    thread_id: str | None
    sender: str  # who wrote it: the message's sender, the thread's opener, the brief's agent
    kind: str | None
    priority: str | None
    summary: str | None
    body: str | None
    thread_title: str | None
    thread_goal: str | None
    thread_ref: str | None
    recipients: list[str]  # usernames it would reach (a brief: every agent, so none listed)
    brief: str | None
    held_at: Timestamp


class ApprovalList(BaseModel):
    items: list[ApprovalItem]


class DecisionRequest(Request):
    """``POST /v1/approvals/{id}/approve|reject``: the operator's optional reason."""

    reason: str | None = Field(
        default=None,
        description="Why, at most {note_max} characters. A rejection's reason is told to the "
        "sender (its outbox and message.rejected); an approval's is answered back, not stored.",
    )


class ApprovalDecision(ApprovalItem):
    """The operator's decision on what was held: ``state`` approved (a message's deliveries now
    flow as if sent at ``approved_at``; a thread or a brief is seen by the others) or rejected
    (never shown to them)."""

    state: str
    approved_at: Timestamp | None
    rejected_at: Timestamp | None
    reason: str | None
