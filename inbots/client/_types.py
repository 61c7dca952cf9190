"""The closed sets of values some parameters take (checked by mypy; the server checks too)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

Kind = Literal["task", "question", "update", "decision", "handoff", "ack"]
Outcome = Literal["done", "declined"]
Priority = Literal["normal", "urgent"]
InboxStatus = Literal["unacked", "acked", "all"]
Include = Literal["body"]
Events = Literal["receipts"]
When = str | datetime  # a message or delivery id, or a time (sent as RFC 3339)
