"""In SQL, whether an agent's webhook receives a notification type (see
:mod:`inbots.webhooks.subscriptions`): the renotify sweep and the event engine ask it of many rows
at once without loading anyone."""

from __future__ import annotations

from sqlalchemy import ColumnElement, literal
from sqlalchemy.orm import InstrumentedAttribute


def wants(
    column: InstrumentedAttribute[str], event_type: str | ColumnElement[str]
) -> ColumnElement[bool]:
    """SQL: the agent whose ``webhook_events`` is ``column`` receives ``event_type`` (a type, or
    a column holding one)."""
    wanted = literal(event_type) if isinstance(event_type, str) else event_type
    return (literal(",") + column + literal(",")).like(literal("%,") + wanted + literal(",%"))
