"""The closed sets of values some parameters take (checked by mypy; the server checks too)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

Kind = Literal["task", "question", "update", "decision", "handoff", "ack"]
Outcome = Literal["done", "declined"]
Priority = Literal["normal", "urgent"]  # Inbots 1.1
InboxStatus = Literal["unacked", "acked", "all"]  # Inbots 1.1
Include = Literal["body"]  # Inbots 1.1
Events = Literal["receipts"]  # Inbots 1.1
When = str | datetime  # a message or delivery id, or a time (sent as RFC 3339)
