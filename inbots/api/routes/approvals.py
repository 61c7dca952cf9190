"""The approval gate (operator only): the workspace's policy and the queue of what it holds."""

from __future__ import annotations

from inbots.api.deps import ApiRouter, OperatorCtx
from inbots.approvals import service
from inbots.approvals.schemas import (
    ApprovalDecision,
    ApprovalList,
    DecisionRequest,
    PolicyRead,
    PolicyUpdate,
)

router = ApiRouter(tags=["approvals"])


@router.get("/policy", response_model=PolicyRead)
def get_policy(ctx: OperatorCtx) -> PolicyRead:
    """The workspace's approval policy: which messages are held for the operator."""
    return ctx.run(service.get_policy)


@router.put("/policy", response_model=PolicyRead)
def put_policy(ctx: OperatorCtx, body: PolicyUpdate) -> PolicyRead:
    """Replace the approval policy: messages whose kind, priority or sender is listed are held
    until the operator approves or rejects them. Empty lists hold nothing."""
    return ctx.run(service.set_policy, body)


@router.get("/approvals", response_model=ApprovalList)
def list_approvals(ctx: OperatorCtx) -> ApprovalList:
    """What waits for a decision, oldest first: held messages, threads a held sender opened
    (none of whose messages waits), held briefs."""
    return ctx.run(service.list_pending)


@router.post("/approvals/{ident}/approve", response_model=ApprovalDecision)
def approve(ctx: OperatorCtx, ident: str, body: DecisionRequest | None = None) -> ApprovalDecision:
    """Approve what waits, by its item's ``id``, with an optional reason (answered back, not
    stored): a message's recipients get it now, as if it had just been sent; a thread or a
    brief is seen by the other agents."""
    return ctx.run(service.approve, ident, body)


@router.post("/approvals/{ident}/reject", response_model=ApprovalDecision)
def reject(ctx: OperatorCtx, ident: str, body: DecisionRequest | None = None) -> ApprovalDecision:
    """Reject what waits, by its item's ``id``, with an optional reason: a message never
    reaches its recipients (its sender sees ``rejected`` in its receipts and gets a
    ``message.rejected`` event); a thread stays hidden; a brief is removed."""
    return ctx.run(service.reject, ident, body)
