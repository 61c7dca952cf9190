"""What a send must pass for its deliveries to be kept: the caps and the send rate limit
(agents-and-governance.md §3).

- **Caps**: a recipient may hold at most ``cap_per_recipient`` unacknowledged, unexpired
  deliveries in threads that are not closed (what its inbox holds), and at most
  ``cap_per_pair`` of them from one sender. A ledger (``cap_ledger``: one row per recipient,
  one per recipient and sender) holds an upper bound of each count: every send adds itself with
  one upsert, whatever the number of recipients, and the rows it touches stay locked until it
  commits, in one order for all sends (PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` serialises
  writers anyway), so two web processes can never both pass the last free place.
  Acknowledgements, expiry, closes and retention never touch the ledger, so it only
  overestimates: when a row passes its cap, the deliveries are counted exactly (one statement
  over ``ix_deliveries_caps``), the row is corrected, and only then is the send refused. A
  send costs one small upsert until an inbox is near its cap.
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

from sqlalchemy import Float, case, cast, func, literal, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from inbots.auth.service import Caller
from inbots.db.uow import UnitOfWork
from inbots.deliveries.models import Delivery
from inbots.errors import RateLimited
from inbots.messages.models import CapLedger, SendBucket

# A full inbox frees a place when its recipient acknowledges something: there is no clock to
# quote, so the caller is told to come back after this long.
CAP_RETRY_AFTER_SECONDS = 60

TOTAL = ""  # the ledger row of a recipient's total (the others name a sender)


def admit(uow: UnitOfWork, caller: Caller, recipients: Sequence[tuple[str, str]]) -> None:
    """Refuse the send (``RateLimited``) if the caller's rate limit or a recipient's cap forbids
    it; otherwise spend one of the caller's tokens. Called once the send's deliveries are
    stored, in its transaction (a refusal rolls them back). ``recipients`` are (id, username)
    pairs."""
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
    names = dict(recipients)
    caps: dict[str, int] = {}  # ledger sender_id -> its cap ("" is the recipient's total)
    if s.cap_per_recipient:
        caps[TOTAL] = s.cap_per_recipient
    if s.cap_per_pair:
        caps[caller.agent_id] = s.cap_per_pair
    # One upsert counts this send in every ledger row it touches and locks them (PostgreSQL:
    # until commit, in one order for every send, so two sends never deadlock and a second
    # process waits here for the first to commit or roll back).
    keys = sorted((rid, sender) for rid in names for sender in caps)
    insert = pg_insert if uow.session.get_bind().dialect.name == "postgresql" else sqlite_insert
    counted = uow.session.execute(
        insert(CapLedger)
        .values([{"recipient_id": r, "sender_id": k, "open_count": 1} for r, k in keys])
        .on_conflict_do_update(
            index_elements=[CapLedger.recipient_id, CapLedger.sender_id],
            set_={"open_count": CapLedger.open_count + 1},
        )
        .returning(CapLedger.recipient_id, CapLedger.sender_id, CapLedger.open_count)
    ).all()
    over = [row for row in counted if row.open_count > caps[row.sender_id]]
    if not over:
        return
    # The ledger only ever overestimates (acknowledgements, expiry and closes do not touch it):
    # past a cap, count exactly, and keep the exact figure (with this send) for the next sends.
    exact = _open_counts(uow, sorted({row.recipient_id for row in over}), caller.agent_id)
    full: tuple[str, str] | None = None
    corrected = []
    for row in over:
        total, pair = exact.get(row.recipient_id, (0, 0))
        # The send's own deliveries are stored already (uncommitted): the count includes them.
        now_open = total if row.sender_id == TOTAL else pair
        corrected.append(
            {"recipient_id": row.recipient_id, "sender_id": row.sender_id, "open_count": now_open}
        )
        if now_open > caps[row.sender_id] and full is None:
            full = (row.recipient_id, row.sender_id)
    uow.session.execute(update(CapLedger), corrected)  # by primary key, one executemany
    if full is None:
        return
    name = names.get(full[0], full[0])
    if full[1] == TOTAL:
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


def _open_counts(
    uow: UnitOfWork, recipient_ids: Sequence[str], sender_id: str
) -> dict[str, tuple[int, int]]:
    """Each recipient's deliveries that the caps count, in all and from ``sender_id``: one
    statement over ``ix_deliveries_caps``."""
    rows = uow.session.execute(
        select(
            Delivery.recipient_id,
            func.count(),
            func.coalesce(func.sum(case((Delivery.sender_id == sender_id, 1), else_=0)), 0),
        )
        .where(
            Delivery.recipient_id.in_(recipient_ids),
            Delivery.acknowledged_at.is_(None),
            Delivery.expired_at.is_(None),
            Delivery.thread_closed_at.is_(None),
        )
        .group_by(Delivery.recipient_id)
    ).all()
    return {rid: (int(total), int(pair)) for rid, total, pair in rows}
