"""The derived state of a delivery, defined once.

``RULES`` lists the states in the spec's order, first match wins::

    acknowledged > working > fetched > delivered > failed > rejected > expired > held > stalled
    > notified > accepted

Each rule is data, and two small interpreters read it: :func:`state_of` for a loaded row, and
:mod:`inbots.deliveries.state_sql` for queries (its own module, so that reading a state imports
no SQL). Neither repeats the order or the conditions.
``stalled`` holds only while the stall stamp is newer than every progress stamp, so a stalled
delivery that moves again is no longer stalled. ``failed`` holds only while the give-up is newer
than the notification: a failed delivery that a redeliver then notifies (its 2xx stamps
``notified_at``) is ``notified``, as an event's push state is whichever happened last.
``working`` (the recipient said it is working on it,
:func:`inbots.deliveries.service.mark_working`) comes right after ``acknowledged``: it is the
furthest a delivery gets before it is done. ``held`` (the approval gate holds its message,
:mod:`inbots.approvals`) holds only until the operator approves it; ``rejected`` is final.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

PROGRESS_STAMPS = (
    "accepted_at",
    "notified_at",
    "delivered_at",
    "fetched_at",
    "working_at",
    "acknowledged_at",
)


@dataclass(frozen=True)
class Rule:
    state: str
    stamp: str | None  # the stamp that must be set; None for the catch-all
    newer_than: tuple[str, ...] = ()  # ...and be newer than each of these that is set
    unless: tuple[str, ...] = ()  # ...and each of these must not be set


RULES: tuple[Rule, ...] = (
    Rule("acknowledged", "acknowledged_at"),
    Rule("working", "working_at"),
    Rule("fetched", "fetched_at"),
    Rule("delivered", "delivered_at"),
    # A redeliver answered 2xx after the give-up: the push got through, so no longer failed.
    Rule("failed", "failed_at", newer_than=("notified_at",)),
    Rule("rejected", "rejected_at"),
    Rule("expired", "expired_at"),
    Rule("held", "held_at", unless=("approved_at",)),
    Rule("stalled", "stalled_at", newer_than=PROGRESS_STAMPS),
    Rule("notified", "notified_at"),
    Rule("accepted", None),
)
STATES: tuple[str, ...] = tuple(rule.state for rule in RULES)
# Every stamp the rules read: what a row needs for state_of().
STATE_STAMPS: tuple[str, ...] = tuple(
    dict.fromkeys(
        name for rule in RULES for name in (rule.stamp, *rule.unless, *rule.newer_than) if name
    )
)


def _holds(rule: Rule, row: Any) -> bool:
    if rule.stamp is None:
        return True
    value: datetime | None = getattr(row, rule.stamp)
    if value is None:
        return False
    if any(getattr(row, name) is not None for name in rule.unless):
        return False
    return all((other := getattr(row, name)) is None or value > other for name in rule.newer_than)


def state_of(row: Any) -> str:
    """The state of a delivery (any object with the stamp attributes)."""
    for rule in RULES:
        if _holds(rule, row):
            return rule.state
    raise AssertionError("the catch-all rule always holds")
