"""The words of a message that every layer shares (request schemas, the MCP tools, the client
side of ``inbots mcp``): kinds, priorities, approval states. Plain constants, so that reading
them imports no database code."""

from __future__ import annotations

KINDS = ("task", "question", "update", "decision", "handoff", "ack")
DEFAULT_KIND = "update"
NORMAL, URGENT = "normal", "urgent"
PRIORITIES = (NORMAL, URGENT)
HELD, APPROVED, REJECTED = "held", "approved", "rejected"  # Message.approval


def priority_rank(priority: str) -> int:
    """Where a priority sorts in an inbox, urgent first (a delivery's ``priority_rank``)."""
    return 0 if priority == URGENT else 1
