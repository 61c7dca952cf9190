"""What a send must pass for its deliveries to be kept: the caps and the send rate limit
(agents-and-governance.md §3).

- **Caps**: a recipient may hold at most ``cap_per_recipient`` unacknowledged, unexpired
  deliveries in threads that are not closed (what its inbox holds, plus mail the approval gate
  holds for it; rejected mail does not count), and at most
  ``cap_per_pair`` of them from one sender. A ledger (``cap_ledger``) holds an upper bound of
  each count without a hot row: one row per recipient and sender, which each send increments
  (one upsert, whatever the number of recipients; only that sender's own sends wait on it),
  and one row per recipient (``sender_id`` "") holding the correction that makes the sum of its
  rows exact as of the last recount. Acknowledgements, expiry, closes and retention never touch
  the ledger, so the sum only overestimates.

  Far from the caps a send takes each recipient's advisory lock *shared* (PostgreSQL), so sends
  to one recipient from many senders run side by side; it passes if the sum, read under that
  lock, stays ``max_connections`` (the most transactions that can be in flight beside it, each
  invisible to the others until it commits) below the cap. Within twice that of a cap, the
  lock is taken *exclusive*: sends to that recipient queue, and each counts exactly (one
  statement over ``ix_deliveries_caps``), sets the ledger to the exact figures and is refused
  only if the exact count passes a cap. So two web processes can never both pass the last free
  place, and a recipient far from its caps costs a send one statement (the ``inbots_admit``
  function of migration 0018: token, ledger, locks and the read under them) and no wait.
  SQLite's ``BEGIN IMMEDIATE`` runs one writer at a time: there is nothing in flight, no lock
  and no margin. Locks are taken in one key order, so sends never deadlock.
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
import weakref
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection, Engine, Float, case, cast, func, literal, select, text, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from inbots.caller import Caller
from inbots.db.engine import upsert_for
from inbots.db.uow import UnitOfWork
from inbots.errors import RateLimited
from inbots.models.deliveries import Delivery
from inbots.models.messages import CapLedger, SendBucket

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
    limited = bool(s.rate_limit_per_minute and s.rate_limit_burst and not caller.is_operator)
    capped = bool((s.cap_per_recipient or s.cap_per_pair) and recipients)
    if not (limited or capped):
        return
    names = dict(recipients)
    postgres = uow.session.get_bind().dialect.name == "postgresql"
    count = _count_postgres if postgres else _count_sqlite
    counted = count(uow, caller.agent_id, sorted(names) if capped else [], limited)
    if counted.tokens is not None and counted.tokens < 0:
        per_second = s.rate_limit_per_minute / 60.0
        wait = max(1, math.ceil(-counted.tokens / per_second))
        raise RateLimited(
            f"You sent more than {s.rate_limit_per_minute} messages a minute (bursts of up to "
            f"{s.rate_limit_burst}); your next send is allowed in {wait} s. Wait that long "
            "and send again; nothing of this one was stored.",
            retry_after=wait,
        )
    if capped:
        _check_caps(uow, caller, names, counted, postgres)


@dataclass
class _Counted:
    """What a send's counting found: the caller's tokens left after spending one (None: not
    rate-limited), and per recipient its (recipient, caller) ledger row with this send in it and
    the recipient's ledger sum (an upper bound of what the caps count; on PostgreSQL read under
    the recipient's lock), and which recipients PostgreSQL locked exclusively."""

    tokens: float | None
    pairs: dict[str, int]
    estimates: dict[str, int]
    exclusive: set[str] = field(default_factory=set)  # PostgreSQL: locked exclusive


# PostgreSQL admits a send in one statement: ``inbots_admit`` (migration 0018) spends the token,
# upserts the pair rows (in the order given), takes each recipient's lock in key order (exclusive
# for those near a cap by the ledger as it stood) and, with a fresh snapshot, reads each
# recipient's ledger sum again under its lock.
_ADMIT_SQL = (
    "SELECT recipient_id, pair_count, total, exclusive, tokens FROM inbots_admit("
    "%(agent)s, CAST(%(recipients)s AS varchar[]), CAST(%(keys)s AS integer[]), %(limited)s, "
    "%(burst)s, %(per_second)s, %(now)s, %(space)s, %(pair_cap)s, %(exclusive_above)s)"
)

# Advisory-lock namespace of the caps (the first key of pg_advisory_xact_lock(int, int)).
_LOCK_SPACE = 0x1B07


def _lock_key(recipient_id: str) -> int:
    return zlib.crc32(recipient_id.encode()) & 0x7FFFFFFF


def _count_postgres(
    uow: UnitOfWork, agent_id: str, recipient_ids: list[str], limited: bool
) -> _Counted:
    s = uow.settings
    margin = _in_flight_bound(uow) if s.cap_per_recipient else 0
    rows = (
        uow.session.connection()
        .exec_driver_sql(
            _ADMIT_SQL,
            {
                "agent": agent_id,
                "recipients": recipient_ids,
                "keys": [_lock_key(rid) for rid in recipient_ids],
                "limited": limited,
                "burst": float(s.rate_limit_burst),
                "per_second": s.rate_limit_per_minute / 60.0,
                "now": time.time(),
                "space": _LOCK_SPACE,
                "pair_cap": s.cap_per_pair,
                "exclusive_above": s.cap_per_recipient - 2 * margin
                if s.cap_per_recipient
                else None,
            },
        )
        .all()
    )
    tokens = float(rows[0][4]) if limited else None
    if rows[0][0] is None:  # refused by the bucket, or no recipients
        return _Counted(tokens, {}, {})
    return _Counted(
        tokens,
        {row[0]: int(row[1]) for row in rows},
        {row[0]: int(row[2]) for row in rows},
        {row[0] for row in rows if row[3]},
    )


def _count_sqlite(
    uow: UnitOfWork, agent_id: str, recipient_ids: list[str], limited: bool
) -> _Counted:
    s = uow.settings
    connection = uow.session.connection()
    tokens = None
    if limited:
        burst = float(s.rate_limit_burst)
        now = time.time()
        refilled = SendBucket.tokens + (literal(now, Float) - SendBucket.stamp) * (
            s.rate_limit_per_minute / 60.0
        )
        tokens = connection.execute(
            sqlite_insert(SendBucket)
            .values(agent_id=agent_id, tokens=burst - 1, stamp=now)
            .on_conflict_do_update(
                index_elements=[SendBucket.agent_id],
                set_={
                    "tokens": case((refilled > burst, burst), else_=refilled) - 1,
                    "stamp": cast(literal(now), Float),
                },
            )
            .returning(SendBucket.tokens)
        ).scalar_one()
    if not recipient_ids:
        return _Counted(tokens, {}, {})
    pairs = {
        rid: count
        for rid, count in connection.execute(
            sqlite_insert(CapLedger)
            .values(
                [{"recipient_id": r, "sender_id": agent_id, "open_count": 1} for r in recipient_ids]
            )
            .on_conflict_do_update(
                index_elements=[CapLedger.recipient_id, CapLedger.sender_id],
                set_={"open_count": CapLedger.open_count + 1},
            )
            .returning(CapLedger.recipient_id, CapLedger.open_count)
        ).all()
    }
    return _Counted(tokens, pairs, _estimates(uow, recipient_ids))


def _check_caps(
    uow: UnitOfWork, caller: Caller, names: dict[str, str], counted: _Counted, postgres: bool
) -> None:
    s = uow.settings
    ids = sorted(names)
    pairs, estimates = counted.pairs, counted.estimates

    def near(rid: str, slack: int) -> bool:
        if s.cap_per_pair and pairs[rid] > s.cap_per_pair:
            return True
        return bool(s.cap_per_recipient) and estimates[rid] > s.cap_per_recipient - slack

    if postgres:
        # Far from its caps, a recipient was locked shared (sends to it run side by side) and
        # its sum read again under the lock: what committed since, plus at most `margin` sends
        # in flight beside this one, must still fit. Near them, exclusive: counted exactly.
        exact_ids = [rid for rid in ids if rid in counted.exclusive]
        margin = _in_flight_bound(uow) if s.cap_per_recipient else 0
        shared = [rid for rid in ids if rid not in counted.exclusive]
        if s.cap_per_recipient and any(near(rid, margin) for rid in shared):
            raise RateLimited(
                "Many sends reached this recipient at once, close to its cap of "
                f"{s.cap_per_recipient} unacknowledged messages "
                "(INBOTS_CAP_PER_RECIPIENT); try again in 1 s. Nothing of this send was "
                "stored.",
                retry_after=1,
            )
    else:
        exact_ids = [rid for rid in ids if near(rid, 0)]
    if exact_ids:
        _recount(uow, caller, names, pairs, exact_ids)


def _recount(
    uow: UnitOfWork,
    caller: Caller,
    names: dict[str, str],
    pairs: dict[str, int],
    ids: Sequence[str],
) -> None:
    """Count exactly, set the ledger to the exact figures, and refuse the send if a cap is
    passed. No other send to these recipients is in flight: PostgreSQL holds them locked
    exclusively, SQLite runs one writer at a time."""
    s = uow.settings
    exact = _open_counts(uow, ids, caller.agent_id)  # includes this send's own deliveries
    pair_sums = _estimates(uow, ids, pairs_only=True)
    own, offsets = [], []
    full: tuple[str, str] | None = None
    for rid in ids:
        total, pair = exact.get(rid, (0, 0))
        own.append({"recipient_id": rid, "sender_id": caller.agent_id, "open_count": pair})
        # The recipient's own row holds what makes the sum of its rows exact.
        others = pair_sums.get(rid, 0) - pairs[rid]
        offsets.append(
            {"recipient_id": rid, "sender_id": TOTAL, "open_count": total - others - pair}
        )
        if full is None and s.cap_per_recipient and total > s.cap_per_recipient:
            full = (rid, TOTAL)
        if full is None and s.cap_per_pair and pair > s.cap_per_pair:
            full = (rid, caller.agent_id)
    uow.session.execute(update(CapLedger), own)  # by primary key, one executemany
    statement = upsert_for(uow.session)(CapLedger).values(offsets)
    uow.session.execute(
        statement.on_conflict_do_update(
            index_elements=[CapLedger.recipient_id, CapLedger.sender_id],
            set_={"open_count": statement.excluded.open_count},
        )
    )
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


def _estimates(
    uow: UnitOfWork, recipient_ids: Sequence[str], *, pairs_only: bool = False
) -> dict[str, int]:
    """Each recipient's ledger sum: an upper bound of what the caps count (as this transaction
    sees it), or with ``pairs_only`` the sum of its (recipient, sender) rows alone."""
    statement = (
        select(CapLedger.recipient_id, func.sum(CapLedger.open_count))
        .where(CapLedger.recipient_id.in_(recipient_ids))
        .group_by(CapLedger.recipient_id)
    )
    if pairs_only:
        statement = statement.where(CapLedger.sender_id != TOTAL)
    found = {rid: int(total or 0) for rid, total in uow.session.execute(statement).all()}
    return {rid: found.get(rid, 0) for rid in recipient_ids}


_BOUNDS: weakref.WeakKeyDictionary[Engine, int] = weakref.WeakKeyDictionary()


def _in_flight_bound(uow: UnitOfWork) -> int:
    """How many sends can be in flight at once beside one, at most: PostgreSQL's
    ``max_connections`` (each open transaction holds a connection). Read once per engine."""
    bind = uow.session.get_bind()
    engine = bind.engine if isinstance(bind, Connection) else bind
    if engine not in _BOUNDS:
        _BOUNDS[engine] = int(uow.session.execute(text("SHOW max_connections")).scalar_one())
    return _BOUNDS[engine]


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
            Delivery.rejected_at.is_(None),  # held mail counts; rejected mail never arrives
        )
        .group_by(Delivery.recipient_id)
    ).all()
    return {rid: (int(total), int(pair)) for rid, total, pair in rows}
