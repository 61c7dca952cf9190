"""The attempt log: how many attempts a publish may make and has made, and the row written for
an attempt whose worker died before recording it (``worker_lost``)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from sqlalchemy import bindparam, func, insert, select
from sqlalchemy.orm import Session

from inbots.config import Settings
from inbots.deliveries.models import DeliveryAttempt
from inbots.kit.clock import rfc3339
from inbots.kit.ids import new_id
from inbots.observability import metrics

log = logging.getLogger(__name__)

WORKER_LOST = "worker_lost"


def attempts_allowed(settings: Settings) -> int:
    return 1 + len(settings.retry_schedule)


THIS_PUBLISH = DeliveryAttempt.publish == bindparam("publish")
ATTEMPTS_SO_FAR = select(
    func.count(),
    func.count().filter(THIS_PUBLISH),
    func.count().filter(THIS_PUBLISH, DeliveryAttempt.reason == "ok"),
).where(DeliveryAttempt.delivery_id == bindparam("delivery_id"))


def record_lost_attempt(session: Session, settings: Settings, delivery: Any, url: str) -> int:
    """Log the attempt of a claim that ran out unrecorded (its worker died mid-attempt) as
    ``worker_lost``, for the current publish, and return how many attempts that publish has now.
    ``delivery``: a row with ``id``, ``publish_count``, ``claimed_until`` and ``job_trigger``.
    The caller clears the claim in the same transaction."""
    params = {"delivery_id": delivery.id, "publish": delivery.publish_count}
    total, so_far, _ = session.execute(ATTEMPTS_SO_FAR, params).one()
    started = delivery.claimed_until - timedelta(seconds=settings.claim_seconds)
    session.execute(
        insert(DeliveryAttempt),
        {
            "id": new_id("att"),
            "delivery_id": delivery.id,
            "number": int(total) + 1,
            "publish": delivery.publish_count,
            "trigger": "retry" if so_far else (delivery.job_trigger or "publish"),
            "url": url,
            "started_at": started,
            "duration_ms": None,
            "status_code": None,
            "reason": WORKER_LOST,
            "response_excerpt": (
                "no outcome: the worker making this attempt stopped before recording it; its "
                f"claim ran out at {rfc3339(delivery.claimed_until)}"
            ),
        },
    )
    metrics.observe_attempt(WORKER_LOST, None, None, "lost")
    log.warning(
        "webhook attempt %s: %s",
        int(total) + 1,
        WORKER_LOST,
        extra={"delivery_id": delivery.id, "reason": WORKER_LOST},
    )
    return int(so_far) + 1
