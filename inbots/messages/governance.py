"""What a send must pass before its deliveries are stored: the caps and the send rate limit
(agents-and-governance.md §3).

- **Caps**: a recipient may hold at most ``cap_per_recipient`` unacknowledged, unexpired
  deliveries, and at most ``cap_per_pair`` of them from one sender. Counted from
  ``ix_deliveries_caps`` with one statement however many recipients (each count stops at the
  cap + 1). On PostgreSQL the counting transaction first takes a transaction-scoped advisory
  lock per recipient, in a stable order (no deadlock between two sends), so two web processes
  can never both pass the last free place; SQLite's ``BEGIN IMMEDIATE`` already serialises
  writers.
- **Rate limit**: each agent has a token bucket (``send_buckets``) of ``rate_limit_burst``
  tokens refilled at ``rate_limit_per_minute``; a send spends one. One upsert refills and spends
  atomically in the sending transaction (the row stays locked until it commits), so every web
  process shares the bucket. The operator's own sends are not rate-limited.

A refusal raises :class:`~inbots.errors.RateLimited` (429 with ``Retry-After``): the send's
transaction rolls back, so nothing of it is stored and no token is spent. A cap or limit set to
0 is off. An idempotent replay never reaches this module (it is answered before).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from sqlalchemy import ColumnElement, Float, case, cast, false, literal, or_, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from inbots.agents.models import Agent
from inbots.auth.service import Caller
from inbots.db.uow import UnitOfWork
from inbots.deliveries.models import Delivery
from inbots.errors import RateLimited
from inbots.messages.models import SendBucket

# A full inbox frees a place when its recipient acknowledges something: there is no clock to
# quote, so the caller is told to come back after this long.
CAP_RETRY_AFTER_SECONDS = 60

_LOCK_RECIPIENTS = text(
    "SELECT count(*) FROM (SELECT pg_advisory_xact_lock(hashtextextended('inbots.caps:' || k, 0))"
    " FROM (SELECT k FROM unnest(CAST(:keys AS text[])) AS k ORDER BY k) AS ordered) AS locked"
)


def admit(uow: UnitOfWork, caller: Caller, recipients: Sequence[tuple[str, str]]) -> None:
    """Refuse the send (``RateLimited``) if the caller's rate limit or a recipient's cap forbids
    it; otherwise spend one of the caller's tokens. ``recipients`` are (id, username) pairs."""
    s = uow.settings
    if s.rate_limit_per_minute and s.rate_limit_burst and not caller.is_operator:
        _spend_token(uow, caller)
    if (s.cap_per_recipient or s.cap_per_pair) and recipients:
        _check_caps(uow, caller, recipients)


def _spend_token(uow: UnitOfWork, caller: Caller) -> None:
    s = uow.settings
    burst = float(s.rate_limit_burst)
    per_second = s.rate_limit_per_minute / 60.0
    now = time.time()
    insert = pg_insert if uow.session.get_bind().dialect.name == "postgresql" else sqlite_insert
    refilled = SendBucket.tokens + (literal(now, Float) - SendBucket.stamp) * per_second
    statement = (
        insert(SendBucket)
        .values(agent_id=caller.agent_id, tokens=burst - 1, stamp=now)
        .on_conflict_do_update(
            index_elements=[SendBucket.agent_id],
            set_={
                "tokens": case((refilled > burst, burst), else_=refilled) - 1,
                "stamp": cast(literal(now), Float),
            },
        )
        .returning(SendBucket.tokens)
    )
    left = uow.session.execute(statement).scalar_one()
    if left < 0:
        wait = max(1, math.ceil(-left / per_second))
        raise RateLimited(
            f"You sent more than {s.rate_limit_per_minute} messages a minute (bursts of up to "
            f"{s.rate_limit_burst}); your next send is allowed in {wait} s. Wait that long "
            "(Retry-After) and send again; nothing of this one was stored.",
            retry_after=wait,
        )


def _check_caps(uow: UnitOfWork, caller: Caller, recipients: Sequence[tuple[str, str]]) -> None:
    s = uow.settings
    ids = sorted({rid for rid, _ in recipients})
    if uow.session.get_bind().dialect.name == "postgresql":
        uow.session.execute(_LOCK_RECIPIENTS, {"keys": ids})
    off = false()
    total = _full(s.cap_per_recipient) if s.cap_per_recipient else off
    pair = _full(s.cap_per_pair, Delivery.sender_id == caller.agent_id) if s.cap_per_pair else off
    full = uow.session.execute(
        select(Agent.id, total.label("total"), pair.label("pair"))
        .where(Agent.id.in_(ids), or_(total, pair))
        .order_by(Agent.id)
        .limit(1)
    ).first()
    if full is not None:
        name = dict(recipients).get(full.id, full.id)
        if full.total:
            raise RateLimited(
                f"{name}'s inbox is full: it holds {s.cap_per_recipient} unacknowledged "
                "messages, the most one agent may hold (INBOTS_CAP_PER_RECIPIENT). A place "
                f"frees up when {name} acknowledges mail or a message expires; try again in "
                f"{CAP_RETRY_AFTER_SECONDS} s or later. Nothing of this send was stored.",
                retry_after=CAP_RETRY_AFTER_SECONDS,
            )
        raise RateLimited(
            f"{name} has {s.cap_per_pair} unacknowledged messages from you, the most one "
            "sender may leave with one recipient (INBOTS_CAP_PER_PAIR). A place frees up "
            f"when {name} acknowledges one of yours or one expires; try again in "
            f"{CAP_RETRY_AFTER_SECONDS} s or later. Nothing of this send was stored.",
            retry_after=CAP_RETRY_AFTER_SECONDS,
        )


def _full(cap: int, *extra: ColumnElement[bool]) -> ColumnElement[bool]:
    """Whether the recipient (``Agent.id``) holds ``cap`` or more unacknowledged, unexpired
    deliveries (of those matching ``extra``): is there a cap-th one? A correlated subquery that
    reads at most ``cap`` entries of ``ix_deliveries_caps``."""
    cap_th = (
        select(literal(1))
        .select_from(Delivery)
        .where(
            Delivery.recipient_id == Agent.id,
            Delivery.acknowledged_at.is_(None),
            Delivery.expired_at.is_(None),
            *extra,
        )
        .limit(1)
        .offset(cap - 1)
        .correlate(Agent)
        .scalar_subquery()
    )
    return cap_th.is_not(None)
