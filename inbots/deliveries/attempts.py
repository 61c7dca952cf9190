"""The attempt log: how many attempts a publish may make and has made, and the row written for
an attempt whose worker died before recording it (``worker_lost``). One log for both kinds of
outbox row: an attempt names its delivery (``delivery_id``) or its event (``event_id``)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from sqlalchemy import Select, bindparam, exists, func, insert, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from inbots.config import Settings
from inbots.kit.clock import rfc3339
from inbots.kit.ids import kind_of, new_id
from inbots.models.deliveries import DeliveryAttempt
from inbots.observability import metrics

log = logging.getLogger(__name__)

WORKER_LOST = "worker_lost"


def attempts_allowed(settings: Settings) -> int:
    return 1 + len(settings.retry_schedule)


THIS_PUBLISH = DeliveryAttempt.publish == bindparam("publish")


def _so_far(owner: InstrumentedAttribute[str | None]) -> Select[int, int, int]:
    return select(
        func.count(),
        func.count().filter(THIS_PUBLISH),
        func.count().filter(THIS_PUBLISH, DeliveryAttempt.reason == "ok"),
    ).where(owner == bindparam("row_id"))


# Attempts of one row (all, this publish's, this publish's successes), by the row's kind.
_SO_FAR = {
    "delivery": _so_far(DeliveryAttempt.delivery_id),
    "event": _so_far(DeliveryAttempt.event_id),
}


def _is_event(row_id: str) -> bool:
    return kind_of(row_id) == "event"


def count_attempts(session: Session, row_id: str, publish: int) -> tuple[int, int, bool]:
    """How many attempts ``row_id`` has had in all and in ``publish``, and whether one of those
    succeeded."""
    query = _SO_FAR["event" if _is_event(row_id) else "delivery"]
    total, so_far, ok = session.execute(query, {"row_id": row_id, "publish": publish}).one()
    return int(total), int(so_far), bool(ok)


def delivery_so_far(delivery: Any) -> tuple[Any, Any, Any]:
    """:func:`count_attempts` as three columns of a statement over deliveries (``delivery``:
    the entity): each row's attempts in all and in its current publish, and whether one of
    those succeeded (correlated subqueries, each an index lookup)."""
    mine = DeliveryAttempt.delivery_id == delivery.id
    current = DeliveryAttempt.publish == delivery.publish_count
    return (
        select(func.count()).where(mine).scalar_subquery(),
        select(func.count()).where(mine, current).scalar_subquery(),
        exists().where(mine, current, DeliveryAttempt.reason == "ok"),
    )


def attempt_values(row_id: str, **values: Any) -> dict[str, Any]:
    """An attempt row's values for ``insert(DeliveryAttempt)``, owned by ``row_id``."""
    event = _is_event(row_id)
    return {
        "id": new_id("att"),
        "delivery_id": None if event else row_id,
        "event_id": row_id if event else None,
        **values,
    }


def record_lost_attempt(session: Session, settings: Settings, row: Any, url: str) -> int:
    """Log the attempt of a claim that ran out unrecorded (its worker died mid-attempt) as
    ``worker_lost``, for the current publish, and return how many attempts that publish has now.
    ``row``: a delivery or an event (or a row of one) with ``id``, ``publish_count``,
    ``claimed_until`` and ``job_trigger``. The caller clears the claim in the same transaction."""
    total, so_far, _ = count_attempts(session, row.id, row.publish_count)
    started = row.claimed_until - timedelta(seconds=settings.claim_seconds)
    session.execute(
        insert(DeliveryAttempt),
        attempt_values(
            row.id,
            number=total + 1,
            publish=row.publish_count,
            trigger="retry" if so_far else (row.job_trigger or "publish"),
            url=url,
            started_at=started,
            duration_ms=None,
            status_code=None,
            reason=WORKER_LOST,
            response_excerpt=(
                "no outcome: the worker making this attempt stopped before recording it; its "
                f"claim ran out at {rfc3339(row.claimed_until)}"
            ),
        ),
    )
    metrics.observe_attempt(WORKER_LOST, None, None, "lost", not _is_event(row.id))
    kind = "event_id" if _is_event(row.id) else "delivery_id"
    ids = {name: getattr(row, name, None) for name in ("message_id", "thread_id")}
    log.warning(
        "webhook attempt %s: %s",
        total + 1,
        WORKER_LOST,
        extra={kind: row.id, **{k: v for k, v in ids.items() if v}, "reason": WORKER_LOST},
    )
    return so_far + 1
