"""The approval gate (operator only): the workspace's policy and the queue of held messages."""

from __future__ import annotations

from fastapi import APIRouter

from inbots.api.deps import AuthFirstRoute, OperatorCtx
from inbots.approvals import service
from inbots.approvals.schemas import (
    ApprovalDecision,
    ApprovalList,
    DecisionRequest,
    PolicyRead,
    PolicyUpdate,
)

router = APIRouter(tags=["approvals"], route_class=AuthFirstRoute)


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
    """The held messages waiting for a decision, oldest first."""
    return ctx.run(service.list_pending)


@router.post("/approvals/{message_id}/approve", response_model=ApprovalDecision)
def approve(
    ctx: OperatorCtx, message_id: str, body: DecisionRequest | None = None
) -> ApprovalDecision:
    """Approve a held message, with an optional reason (answered back, not stored): its
    recipients get it now, as if it had just been sent."""
    return ctx.run(service.approve, message_id, body)


@router.post("/approvals/{message_id}/reject", response_model=ApprovalDecision)
def reject(
    ctx: OperatorCtx, message_id: str, body: DecisionRequest | None = None
) -> ApprovalDecision:
    """Reject a held message, with an optional reason: it never reaches its recipients; its
    sender sees ``rejected`` in its receipts and gets a ``message.rejected`` event."""
    return ctx.run(service.reject, message_id, body)
