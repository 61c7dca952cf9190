"""Which notification types an agent's webhook receives (``webhook_events``).

Stored on the agent row as the chosen types joined by commas (``agents.webhook_events``, never
empty of meaning: the empty string is "none"), so the renotify sweep can ask SQL whether a row's
recipient still wants its type (:func:`inbots.webhooks.wanted.wants`) without loading anyone.
"""

from __future__ import annotations

from collections.abc import Sequence

from inbots.errors import Invalid

MESSAGE_CREATED = "message.created"
MESSAGE_ACKNOWLEDGED = "message.acknowledged"
THREAD_CLOSE_REQUESTED = "thread.close_requested"
THREAD_CLOSED = "thread.closed"
MESSAGE_REJECTED = "message.rejected"  # the operator rejected a held message (to its sender)
EVENT_TYPES = (
    MESSAGE_CREATED,
    MESSAGE_ACKNOWLEDGED,
    THREAD_CLOSE_REQUESTED,
    THREAD_CLOSED,
    MESSAGE_REJECTED,
)
DEFAULT = (MESSAGE_CREATED,)
DEFAULT_STORED = MESSAGE_CREATED

# The operator's alerts (:mod:`inbots.alerts`): received by the operator's own row's webhook,
# never by an agent's.
DELIVERY_STALLED = "delivery.stalled"
DELIVERY_FAILED = "delivery.failed"
AGENT_WEBHOOK_FAILING = "agent.webhook_failing"
APPROVAL_REQUESTED = "approval.requested"
QUEUE_BACKLOG = "queue.backlog"
WORKERS_DOWN = "workers.down"
RESERVATION_CONFLICT = "reservation.conflict"  # a reservation refused (inbots.reservations)
ALERT_TYPES = (
    DELIVERY_STALLED,
    DELIVERY_FAILED,
    AGENT_WEBHOOK_FAILING,
    APPROVAL_REQUESTED,
    QUEUE_BACKLOG,
    WORKERS_DOWN,
    RESERVATION_CONFLICT,
)
_KNOWN = (*EVENT_TYPES, *ALERT_TYPES)


def check(
    value: Sequence[str], field: str = "webhook_events", types: Sequence[str] = EVENT_TYPES
) -> list[str]:
    """The chosen types (from ``types``), in their canonical order, or 422 naming the allowed
    ones."""
    allowed = ", ".join(types)
    unknown = [v for v in dict.fromkeys(value) if v not in types]
    if unknown:
        raise Invalid(
            f"{field} has unknown notification types ({', '.join(map(repr, unknown))}); the "
            f"types are {allowed}.",
            field=field,
        )
    return [t for t in types if t in value]


def encode(types: Sequence[str]) -> str:
    return ",".join(types)


def decode(stored: str | None) -> list[str]:
    if stored is None:
        return list(DEFAULT)
    return [t for t in stored.split(",") if t in _KNOWN]


def subscribed(stored: str | None, event_type: str) -> bool:
    return event_type in decode(stored)
