"""The operator's alerts: the operator's webhook, and the alerts raised where things go wrong.

The webhook is the operator's own agent row's (``kind='operator'``): its URL, secret, previous
secret and ``webhook_events`` mean what they mean on an agent, with the same URL policy, the same
``whsec_`` secrets and the same rotation overlap (:mod:`inbots.webhooks`). Only the alert types
(``subscriptions.ALERT_TYPES``) may be chosen for it, so it never receives mail notifications.

An alert is an event (:mod:`inbots.events`) told to the operator's row, about no thread, its
fields frozen in ``detail`` (JSON): the one engine sends it (:mod:`inbots.deliveries.outbox`),
signed, retried, each attempt a row, republished by the renotify sweep if its publish is lost,
listed by ``GET /v1/events`` and redelivered as any event. An alert is stored only when the
operator's webhook receives its type (Prometheus, reading the same state, covers the rest).

Raised:

- ``delivery.stalled`` by the renotify sweep, for deliveries it stamps stalled
  (:func:`deliveries_stalled`);
- ``delivery.failed`` wherever a delivery is stamped failed — its attempts or its publishes
  exhausted, or its webhook answered 410 (:func:`deliveries_failed`);
- ``agent.webhook_failing`` when an agent's webhook attempts have failed
  ``INBOTS_ALERT_WEBHOOK_FAILURES`` times in a row, once a streak (:func:`webhook_attempted`);
- ``approval.requested`` by the approval gate (:func:`approval_requested`);
- ``queue.backlog`` and ``workers.down`` by the watch (:mod:`.watch`).

Stall and failure alerts are paced per agent (:mod:`.pace`): the first of an interval at once, with
the deliveries of that transaction (``count``); those that follow within the interval are counted,
and the sweep tells them in one alert when it ends (:func:`paced_alerts`). So a backlog of
thousands makes a few alerts, not thousands. Each is raised in the transaction of the stamp it
reports. Those raised by the engine's own units (which carry no effects) are returned as jobs for
the engine to publish; :func:`approval_requested` runs in a request's unit and publishes after its
commit. Every alert's job takes the alerts' own lane and in-flight slots
(:data:`~inbots.dispatch.jobs.ALERT_QUEUE`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import Select, and_, bindparam, func, insert, literal, or_, select, update
from sqlalchemy.orm import aliased

from inbots.alerts import pace
from inbots.alerts.schemas import AlertWebhookRead, AlertWebhookSet
from inbots.caller import Caller
from inbots.db.uow import UnitOfWork, reads
from inbots.dispatch.jobs import Job
from inbots.errors import NotFound
from inbots.kit.clock import rfc3339, utcnow
from inbots.kit.ids import new_id
from inbots.kit.text import cut
from inbots.models.agents import KIND_AGENT, KIND_OPERATOR, Agent
from inbots.models.alerts import AlertWindow
from inbots.models.deliveries import Delivery
from inbots.models.events import Event
from inbots.observability import metrics
from inbots.webhooks import signing, subscriptions
from inbots.webhooks.endpoint import apply_url, check_url
from inbots.webhooks.subscriptions import (
    AGENT_WEBHOOK_FAILING,
    ALERT_TYPES,
    APPROVAL_REQUESTED,
    DELIVERY_FAILED,
    DELIVERY_STALLED,
)
from inbots.webhooks.wanted import wants

# The webhook.


def _operator(uow: UnitOfWork, caller: Caller) -> Agent:
    caller.require_operator()
    return uow.session.get_one(Agent, caller.agent_id)


def _read(operator: Agent, *, reveal: bool) -> AlertWebhookRead:
    assert operator.webhook_url and operator.webhook_secret
    expires = operator.webhook_previous_secret_expires_at
    if expires is not None and expires <= utcnow():
        expires = None
    return AlertWebhookRead(
        url=operator.webhook_url,
        events=[t for t in subscriptions.decode(operator.webhook_events) if t in ALERT_TYPES],
        signing_secret=operator.webhook_secret if reveal else None,
        previous_secret_expires_at=expires,
    )


def _existing(operator: Agent) -> Agent:
    if not operator.webhook_url or not operator.webhook_secret:
        raise NotFound(
            "This workspace has no alert webhook: set one with PUT /v1/operator/webhook."
        )
    return operator


def set_alert_webhook(
    uow: UnitOfWork, caller: Caller, request: AlertWebhookSet
) -> AlertWebhookRead:
    """Set or change the operator's alert webhook URL (the agents' URL policy) and, when given,
    the alert types it receives (kept when omitted; a new webhook receives them all). The first
    registration mints the signing secret and shows it, once; a later change keeps it unshown."""
    operator = _operator(uow, caller)
    url = check_url(request.url, uow.settings)
    types = (
        subscriptions.check(request.events, "events", ALERT_TYPES)
        if request.events is not None
        else None
    )
    new = not operator.webhook_url or not operator.webhook_secret
    apply_url(operator, url)
    if types is not None:
        operator.webhook_events = subscriptions.encode(types)
    elif new:
        operator.webhook_events = subscriptions.encode(ALERT_TYPES)
    uow.session.flush()
    return _read(operator, reveal=new)


@reads
def get_alert_webhook(uow: UnitOfWork, caller: Caller) -> AlertWebhookRead:
    """The alert webhook's URL, types and overlap, never its secret; 404 when there is none."""
    return _read(_existing(_operator(uow, caller)), reveal=False)


def remove_alert_webhook(uow: UnitOfWork, caller: Caller) -> None:
    """Remove the alert webhook and discard its secret for good. Idempotent."""
    operator = _operator(uow, caller)
    operator.webhook_url = None
    operator.webhook_secret = None
    operator.webhook_previous_secret = None
    operator.webhook_previous_secret_expires_at = None
    operator.webhook_events = subscriptions.DEFAULT_STORED
    uow.session.flush()


def rotate_alert_secret(uow: UnitOfWork, caller: Caller) -> AlertWebhookRead:
    """Mint a new signing secret and show it, once; the previous one keeps signing (a second
    signature) for the overlap agents get (24 h, ``signing.ROTATION_OVERLAP_SECONDS``)."""
    operator = _existing(_operator(uow, caller))
    operator.webhook_previous_secret = operator.webhook_secret
    operator.webhook_previous_secret_expires_at = utcnow() + timedelta(
        seconds=signing.ROTATION_OVERLAP_SECONDS
    )
    operator.webhook_secret = signing.new_secret()
    uow.session.flush()
    return _read(operator, reveal=True)


# Raising alerts.


def receives(operator: Any, event_type: str) -> list[Any]:
    """SQL: ``operator`` (an alias of Agent) is a workspace's operator row whose webhook
    receives ``event_type``."""
    return [
        operator.kind == KIND_OPERATOR,
        operator.status == "active",
        operator.webhook_url.is_not(None),
        wants(operator.webhook_events, event_type),
    ]


def alert_row(
    workspace_id: str,
    event_type: str,
    operator_id: str,
    actor_id: str,
    detail: dict[str, Any],
    now: datetime,
) -> dict[str, Any]:
    return {
        "id": new_id("evt"),
        "workspace_id": workspace_id,
        "type": event_type,
        "recipient_id": operator_id,
        "actor_id": actor_id,
        "thread_id": None,
        "message_id": None,
        "delivery_id": None,
        "outcome": None,
        "note": None,
        "detail": json.dumps(detail, ensure_ascii=False, separators=(",", ":")),
        "created_at": now,
        "publish_count": 1,
        "last_published_at": now,
    }


def store(uow: UnitOfWork, rows: list[dict[str, Any]]) -> list[Job]:
    """Store alerts (one INSERT: NULLs are sent as NULL) and return their first publish's jobs."""
    if not rows:
        return []
    uow.session.execute(insert(Event).execution_options(render_nulls=True), rows)
    raised = [row["type"] for row in rows]
    uow.after_commit(lambda: metrics.observe_alerts(raised))
    return [Job(row["id"], 1, "publish", alert=True) for row in rows]


# An alert about several deliveries lists this many of their ids (``count`` says how many).
LISTED = 10


def _delivery_detail(
    uow: UnitOfWork, event_type: str, d: Any, reason: str | None, now: datetime
) -> dict[str, Any]:
    """The fields of an alert about delivery ``d`` (its newest, when it reports several)."""
    why = reason or d.failure_reason
    if event_type == DELIVERY_STALLED:
        why = (
            f"not acknowledged and no progress since {rfc3339(d.moved_at)} "
            f"(INBOTS_STALL_SECONDS {uow.settings.stall_seconds:g})"
        )
    return {
        "delivery_id": d.id,
        "message_id": d.message_id,
        "thread_id": d.thread_id,
        "recipient": d.username,
        "state": "stalled" if event_type == DELIVERY_STALLED else "failed",
        "at": rfc3339(now),
        "reason": why,
    }


def _about_deliveries(event_type: str) -> Any:
    """Deliveries with their recipient's name and the id of a workspace operator whose webhook
    receives ``event_type`` (none: no row)."""
    recipient, operator = aliased(Agent), aliased(Agent)
    return (
        select(
            Delivery.id,
            Delivery.workspace_id,
            Delivery.message_id,
            Delivery.thread_id,
            Delivery.recipient_id,
            Delivery.moved_at,
            Delivery.failure_reason,
            recipient.username,
            operator.id.label("operator_id"),
        )
        .join(recipient, recipient.id == Delivery.recipient_id)
        .join(operator, operator.workspace_id == Delivery.workspace_id)
        .where(*receives(operator, event_type))
    )


def _delivery_alerts(
    uow: UnitOfWork,
    event_type: str,
    delivery_ids: Sequence[str],
    now: datetime,
    reason: str | None,
) -> list[Job]:
    """Count these deliveries in their recipients' windows, and alert about each recipient whose
    last alert of this type is an interval old (or who has none): one alert for all of them,
    with the ones counted since (``count``)."""
    if not delivery_ids:
        return []
    found = uow.session.execute(
        _about_deliveries(event_type)
        .where(Delivery.id.in_(delivery_ids))
        .order_by(Delivery.recipient_id, Delivery.id)
    ).all()
    by_recipient: dict[str, list[Any]] = {}
    for d in found:
        by_recipient.setdefault(d.recipient_id, []).append(d)
    rows = []
    interval = uow.settings.alert_interval_seconds
    for recipient_id, ds in by_recipient.items():  # in id order: two units lock in one order
        window = pace.count(uow, recipient_id, event_type, len(ds), now)
        if not pace.due(window.alerted_at, now, interval):
            continue  # told when this window ends (paced_alerts)
        last = ds[-1]
        detail = _delivery_detail(uow, event_type, last, reason, now)
        detail["count"] = window.unreported
        detail["since"] = rfc3339(window.since)
        detail["delivery_ids"] = [d.id for d in ds[-LISTED:]]
        operator_id = last.operator_id
        rows.append(
            alert_row(last.workspace_id, event_type, operator_id, recipient_id, detail, now)
        )
        pace.reported(uow, recipient_id, event_type, now)
    return store(uow, rows)


@cache
def _paced_windows(batch: int) -> Select[str, str, int, datetime | None]:
    """The windows whose interval ended with deliveries still to tell (built once: the sweep
    reads it every run)."""
    return (
        select(AlertWindow.subject_id, AlertWindow.type, AlertWindow.unreported, AlertWindow.since)
        .where(
            AlertWindow.type.in_((DELIVERY_STALLED, DELIVERY_FAILED)),
            AlertWindow.unreported > 0,
            AlertWindow.alerted_at <= bindparam("cutoff"),
        )
        .order_by(AlertWindow.subject_id, AlertWindow.type)
        .limit(batch)
        .with_for_update(skip_locked=True)
    )


def paced_alerts(uow: UnitOfWork, now: datetime) -> list[Job]:
    """The stall and failure alerts held back by the pace: for each agent whose deliveries were
    counted since its last alert of a type and whose interval has passed, one alert telling how
    many (``count``) and listing the newest. Run by the renotify sweep."""
    cutoff = now - timedelta(seconds=uow.settings.alert_interval_seconds)
    query = _paced_windows(uow.settings.renotify_batch_size)
    windows = uow.session.execute(query, {"cutoff": cutoff}).all()
    rows = []
    for w in windows:
        stamp = Delivery.stalled_at if w.type == DELIVERY_STALLED else Delivery.failed_at
        ds = uow.session.execute(
            _about_deliveries(w.type)
            .where(Delivery.recipient_id == w.subject_id, stamp >= w.since)
            .order_by(stamp.desc(), Delivery.id.desc())
            .limit(LISTED)
        ).all()
        pace.reported(uow, w.subject_id, w.type, now)
        if not ds:  # gone (purged), or the operator no longer receives the type
            continue
        newest = ds[0]
        detail = _delivery_detail(uow, w.type, newest, None, now)
        detail["count"] = w.unreported
        detail["since"] = rfc3339(w.since)
        detail["delivery_ids"] = [d.id for d in ds]
        rows.append(
            alert_row(newest.workspace_id, w.type, newest.operator_id, w.subject_id, detail, now)
        )
    return store(uow, rows)


def deliveries_stalled(uow: UnitOfWork, delivery_ids: Sequence[str], now: datetime) -> list[Job]:
    """``delivery.stalled`` for each of these deliveries, just stamped stalled (in this unit),
    whose workspace's operator webhook receives it; returns the jobs to publish after the
    commit."""
    return _delivery_alerts(uow, DELIVERY_STALLED, delivery_ids, now, None)


def deliveries_failed(
    uow: UnitOfWork, delivery_ids: Sequence[str], now: datetime, reason: str | None = None
) -> list[Job]:
    """``delivery.failed`` for each of these deliveries, just stamped failed (in this unit),
    with ``reason`` (else the stored failure reason); returns the jobs to publish after the
    commit."""
    return _delivery_alerts(uow, DELIVERY_FAILED, delivery_ids, now, reason)


def webhook_attempted(
    uow: UnitOfWork,
    agent_id: str,
    *,
    ok: bool,
    failures_before: int,
    url: str,
    reason: str,
    status_code: int | None,
    now: datetime,
) -> list[Job]:
    """Count an attempt of agent ``agent_id``'s webhook: a success resets its failures in a row
    (``failures_before``: the count read when the attempt was claimed, so a success costs a
    statement only after failures); a failure adds one, and the one that reaches
    ``INBOTS_ALERT_WEBHOOK_FAILURES`` raises ``agent.webhook_failing`` (once a streak: the next
    failures pass the threshold without another). Only agents count, not the operator's own
    webhook. Returns the jobs to publish after the commit."""
    session = uow.session
    mine = and_(Agent.id == agent_id, Agent.kind == KIND_AGENT)
    if ok:
        if failures_before:
            session.execute(
                update(Agent)
                .where(mine, Agent.webhook_failures > 0)
                .values(webhook_failures=0)
                .execution_options(synchronize_session=False)
            )
        return []
    # The row's lock (PostgreSQL) makes each failure's count its own: exactly one reaches N.
    session.execute(
        update(Agent)
        .where(mine)
        .values(webhook_failures=Agent.webhook_failures + 1)
        .execution_options(synchronize_session=False)
    )
    threshold = uow.settings.alert_webhook_failures
    operator = aliased(Agent)
    found = session.execute(
        select(Agent.workspace_id, Agent.username, Agent.webhook_failures, operator.id)
        .join(operator, operator.workspace_id == Agent.workspace_id)
        .where(
            mine,
            Agent.webhook_failures == threshold,
            *receives(operator, AGENT_WEBHOOK_FAILING),
        )
    ).first()
    if found is None:
        return []
    workspace_id, username, failures, operator_id = found
    detail = {
        "agent": username,
        "agent_id": agent_id,
        "failures": failures,
        "url": url,
        "last_reason": reason,
        "last_status_code": status_code,
        "at": rfc3339(now),
    }
    return store(
        uow, [alert_row(workspace_id, AGENT_WEBHOOK_FAILING, operator_id, agent_id, detail, now)]
    )


def approval_requested(
    uow: UnitOfWork,
    workspace_id: str,
    message_id: str,
    *,
    thread_id: str,
    sender: str,
    kind: str,
    priority: str,
    summary: str | None,
) -> None:
    """``approval.requested``: the approval gate held message ``message_id`` of ``sender`` (its
    username or agent id) in ``workspace_id``. Told to the operator's alert webhook, if it
    receives that type, after this unit commits (nothing when it rolls back)."""
    now = utcnow()
    operator = aliased(Agent)
    found = uow.session.execute(
        select(operator.id, Agent.id, Agent.username)
        .select_from(operator)
        .outerjoin(
            Agent,
            and_(
                Agent.workspace_id == workspace_id,
                or_(Agent.id == sender, Agent.username == sender),
            ),
        )
        .where(operator.workspace_id == workspace_id, *receives(operator, APPROVAL_REQUESTED))
    ).first()
    if found is None:
        return
    operator_id, sender_id, sender_name = found
    detail = {
        "message_id": message_id,
        "thread_id": thread_id,
        "sender": sender_name or sender,
        "kind": kind,
        "priority": priority,
        "summary": cut(summary, uow.settings.summary_shown) if summary else summary,
        "at": rfc3339(now),
    }
    actor = sender_id or operator_id
    uow.enqueue(
        *store(uow, [alert_row(workspace_id, APPROVAL_REQUESTED, operator_id, actor, detail, now)])
    )


def failing_webhooks(db: Any, threshold: int) -> int:
    """How many active agents' webhooks have failed at least ``threshold`` attempts in a row
    (``db``: a connection or session; the scrape's gauge)."""
    count = db.execute(
        select(func.count()).where(
            Agent.kind == literal(KIND_AGENT),
            Agent.status == "active",
            Agent.webhook_url.is_not(None),
            Agent.webhook_failures >= threshold,
        )
    ).scalar_one()
    return int(count)
