"""What each notification type's body says: identifiers, the cut summary or note, never a message
body. Pure functions of values (no database), so the engine's loaders
(:mod:`inbots.deliveries.outbox`) and the docs' examples agree on one shape per type.

Every body has ``type`` and ``created_at`` (when the thing happened); the rest depends on the type
(``docs/webhooks.md``, "Event types").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from inbots.kit.clock import rfc3339
from inbots.kit.text import cut
from inbots.webhooks.subscriptions import (
    MESSAGE_ACKNOWLEDGED,
    MESSAGE_CREATED,
    MESSAGE_REJECTED,
    THREAD_CLOSE_REQUESTED,
    THREAD_CLOSED,
)


def encode(body: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON: the exact bytes that are signed and sent."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def message_created(
    *,
    delivery_id: str,
    message_id: str,
    thread_id: str,
    thread_title: str,
    thread_ref: str | None,
    sender: str,
    recipient: str,
    kind: str,
    priority: str,
    summary: str,
    created_at: datetime,
    attachments: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """New mail for ``recipient`` (``summary`` already cut); ``attachments``: what the message
    carries, metadata only (``{id, name, content_type, bytes, sha256}``), absent when none."""
    body: dict[str, Any] = {
        "type": MESSAGE_CREATED,
        "delivery_id": delivery_id,
        "message_id": message_id,
        "thread_id": thread_id,
        "thread_title": thread_title,
        "thread_ref": thread_ref,
        "sender": sender,
        "recipient": recipient,
        "kind": kind,
        "priority": priority,
        "summary": summary,
        "created_at": rfc3339(created_at),
    }
    if attachments:
        body["attachments"] = [dict(a) for a in attachments]
    return body


def message_acknowledged(
    *,
    event_id: str,
    delivery_id: str,
    message_id: str,
    thread_id: str,
    thread_title: str,
    sender: str,
    recipient: str,
    outcome: str | None,
    note: str | None,
    acknowledged_at: datetime,
    shown: int,
) -> dict[str, Any]:
    """``recipient`` acknowledged a message of ``sender`` (the agent this notification is for);
    ``sender`` and ``recipient`` name the message's, as in ``message.created``."""
    return {
        "type": MESSAGE_ACKNOWLEDGED,
        "event_id": event_id,
        "delivery_id": delivery_id,
        "message_id": message_id,
        "thread_id": thread_id,
        "thread_title": thread_title,
        "sender": sender,
        "recipient": recipient,
        "outcome": outcome,
        "note": cut(note, shown) if note else note,
        "acknowledged_at": rfc3339(acknowledged_at),
        "created_at": rfc3339(acknowledged_at),
    }


def message_rejected(
    *,
    event_id: str,
    message_id: str,
    thread_id: str,
    thread_title: str,
    sender: str,
    rejected_by: str,
    reason: str | None,
    rejected_at: datetime,
    shown: int,
) -> dict[str, Any]:
    """The operator (``rejected_by``) rejected a message ``sender`` (the agent this notification is
    for) sent, which the workspace's approval policy held: it never reaches its recipients."""
    return {
        "type": MESSAGE_REJECTED,
        "event_id": event_id,
        "message_id": message_id,
        "thread_id": thread_id,
        "thread_title": thread_title,
        "sender": sender,
        "rejected_by": rejected_by,
        "reason": cut(reason, shown) if reason else reason,
        "rejected_at": rfc3339(rejected_at),
        "created_at": rfc3339(rejected_at),
    }


def thread_event(
    event_type: str,
    *,
    event_id: str,
    thread_id: str,
    thread_title: str,
    recipient: str,
    actor: str,
    created_at: datetime,
) -> dict[str, Any]:
    """A thread ``recipient`` is in had its close requested (by its opener, ``requested_by``) or
    was closed (by the operator, ``closed_by``)."""
    assert event_type in (THREAD_CLOSE_REQUESTED, THREAD_CLOSED), event_type
    by = "requested_by" if event_type == THREAD_CLOSE_REQUESTED else "closed_by"
    return {
        "type": event_type,
        "event_id": event_id,
        "thread_id": thread_id,
        "thread_title": thread_title,
        "recipient": recipient,
        by: actor,
        "created_at": rfc3339(created_at),
    }


def alert(
    event_type: str, *, event_id: str, detail: dict[str, Any], created_at: datetime
) -> dict[str, Any]:
    """An operator's alert (``delivery.stalled``, ``delivery.failed``, ``agent.webhook_failing``,
    ``approval.requested``): its fields as they were when it was raised (:mod:`inbots.alerts`)."""
    return {"type": event_type, "event_id": event_id, **detail, "created_at": rfc3339(created_at)}
