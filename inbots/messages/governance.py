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
- **Rate limit**: a send spends from the agent's token bucket, which all its writes share
  (:mod:`inbots.auth.rate_limit`): one token, plus one per recipient beyond the first ten. On
  PostgreSQL ``inbots_admit`` spends a one-token send in its one statement; a dearer one spends
  in one upsert before it (``inbots_admit`` spends one token only). The operator's own sends are
  not rate-limited.
- **Skipping**: a send to several recipients leaves out those at a cap (their deliveries are
  deleted and their pair rows taken back, in the send's transaction) and is refused only when
  every recipient is at one; :func:`admit` returns whom it left out and why.

A refusal raises :class:`~inbots.errors.RateLimited` (429 with ``Retry-After``): the send's
transaction rolls back, so nothing of it is stored and no token is spent. A cap or limit set to
0 is off. An idempotent replay never reaches this module (it is answered before).
"""

from __future__ import annotations

import functools
import time
import weakref
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, case, delete, func, select, text, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from inbots.auth import rate_limit
from inbots.caller import Caller
from inbots.config import Settings
from inbots.db.engine import upsert_for
from inbots.db.uow import UnitOfWork
from inbots.errors import RateLimited
from inbots.models.deliveries import Delivery
from inbots.models.messages import CapLedger

# A full inbox frees a place when its recipient acknowledges something: there is no clock to
# quote, so the caller is told to come back after this long.
CAP_RETRY_AFTER_SECONDS = 60

TOTAL = ""  # the ledger row of a recipient's total (the others name a sender)


# Why a send left a recipient out (``skipped`` in its answer).
INBOX_FULL = "inbox_full"  # it holds cap_per_recipient unacknowledged deliveries
PAIR_FULL = "pair_full"  # it holds cap_per_pair of them from this sender


def admit(
    uow: UnitOfWork, caller: Caller, message_id: str, recipients: Sequence[tuple[str, str]]
) -> dict[str, str]:
    """Refuse the send (``RateLimited``) if the caller's rate limit forbids it, or a cap forbids
    it for every recipient; otherwise spend the caller's tokens and leave out the recipients at
    a cap (their deliveries deleted). Called once the send's deliveries are stored, in its
    transaction (a refusal rolls them back). ``recipients`` are (id, username) pairs; returns the
    ids left out, each with why (:data:`INBOX_FULL` or :data:`PAIR_FULL`)."""
    s = uow.settings
    limited = rate_limit.applies(s, caller)
    capped = bool((s.cap_per_recipient or s.cap_per_pair) and recipients)
    if not (limited or capped):
        return {}
    names = dict(recipients)
    postgres = uow.session.get_bind().dialect.name == "postgresql"
    cost = rate_limit.check_send_cost(s, len(names), None) if limited else 0
    # PostgreSQL spends a one-token send inside inbots_admit, in the same statement as the caps.
    in_admit = postgres and cost == 1
    if limited and not in_admit:
        rate_limit.spend(uow, caller, cost, recipients=len(names))
    if not (capped or in_admit):
        return {}
    ids = sorted(names) if capped else []
    if postgres:
        counted = _count_postgres(uow, caller.agent_id, ids, in_admit)
        if counted.tokens is not None and counted.tokens < 0:
            raise rate_limit.refusal(s, counted.tokens, cost)
        if not capped:
            return {}
    else:
        counted = _count_sqlite(uow, caller.agent_id, ids)
    full = _check_caps(uow, caller, names, counted, postgres)
    if full and len(full) == len(names):  # nobody left to send to: refuse it whole
        first = min(full)
        raise _full(s, names[first], full[first])
    if full:
        _leave_out(uow, caller, message_id, full)
    return full


@dataclass
class _Counted:
    """What a send's counting found: the caller's tokens left after ``inbots_admit`` spent one
    (None: it spent none), and per recipient its (recipient, caller) ledger row with this send
    in it and the recipient's ledger sum (an upper bound of what the caps count; on PostgreSQL
    read under the recipient's lock), and which recipients PostgreSQL locked exclusively."""

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


@functools.lru_cache(maxsize=64)
def _pair_upsert(recipients: int) -> Any:
    """SQLite: one upsert of the (recipient, sender) ledger rows of a send to ``recipients``
    agents, returning each row's count with this send in it; built once per number of
    recipients. Its values: ``agent`` and ``r0``, ``r1``, … (the recipients)."""
    rows = [
        {"recipient_id": bindparam(f"r{i}"), "sender_id": bindparam("agent"), "open_count": 1}
        for i in range(recipients)
    ]
    return (
        sqlite_insert(CapLedger)
        .values(rows)
        .on_conflict_do_update(
            index_elements=[CapLedger.recipient_id, CapLedger.sender_id],
            set_={"open_count": CapLedger.open_count + 1},
        )
        .returning(CapLedger.recipient_id, CapLedger.open_count)
    )


def _count_sqlite(uow: UnitOfWork, agent_id: str, recipient_ids: list[str]) -> _Counted:
    values = {"agent": agent_id, **{f"r{i}": rid for i, rid in enumerate(recipient_ids)}}
    found = uow.session.connection().execute(_pair_upsert(len(recipient_ids)), values)
    pairs = {rid: count for rid, count in found.all()}
    return _Counted(None, pairs, _estimates(uow, recipient_ids))


def _check_caps(
    uow: UnitOfWork, caller: Caller, names: dict[str, str], counted: _Counted, postgres: bool
) -> dict[str, str]:
    """The recipients a cap refuses (id: why). Raises instead when many sends reach a recipient
    at once near its cap (PostgreSQL): it cannot be counted exactly without waiting."""
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
    return _recount(uow, caller, pairs, exact_ids) if exact_ids else {}


def _recount(
    uow: UnitOfWork, caller: Caller, pairs: dict[str, int], ids: Sequence[str]
) -> dict[str, str]:
    """Count exactly, set the ledger to the exact figures, and return the recipients whose cap
    the send passes (id: why). No other send to these recipients is in flight: PostgreSQL holds
    them locked exclusively, SQLite runs one writer at a time."""
    s = uow.settings
    exact = _open_counts(uow, ids, caller.agent_id)  # includes this send's own deliveries
    pair_sums = _estimates(uow, ids, pairs_only=True)
    own, offsets = [], []
    full: dict[str, str] = {}
    for rid in ids:
        total, pair = exact.get(rid, (0, 0))
        own.append({"recipient_id": rid, "sender_id": caller.agent_id, "open_count": pair})
        # The recipient's own row holds what makes the sum of its rows exact.
        others = pair_sums.get(rid, 0) - pairs[rid]
        offsets.append(
            {"recipient_id": rid, "sender_id": TOTAL, "open_count": total - others - pair}
        )
        if s.cap_per_recipient and total > s.cap_per_recipient:
            full[rid] = INBOX_FULL
        elif s.cap_per_pair and pair > s.cap_per_pair:
            full[rid] = PAIR_FULL
    uow.session.execute(update(CapLedger), own)  # by primary key, one executemany
    statement = upsert_for(uow.session)(CapLedger).values(offsets)
    uow.session.execute(
        statement.on_conflict_do_update(
            index_elements=[CapLedger.recipient_id, CapLedger.sender_id],
            set_={"open_count": statement.excluded.open_count},
        )
    )
    return full


def _full(s: Settings, name: str, reason: str) -> RateLimited:
    """The refusal of a send whose every recipient is at a cap, naming the first."""
    if reason == INBOX_FULL:
        return RateLimited(
            f"{name}'s inbox is full: it holds {s.cap_per_recipient} unacknowledged "
            "messages, the most one agent may hold (INBOTS_CAP_PER_RECIPIENT). A place "
            f"frees up when {name} acknowledges mail or a message expires; try again in "
            f"{CAP_RETRY_AFTER_SECONDS} s or later. Nothing of this send was stored.",
            retry_after=CAP_RETRY_AFTER_SECONDS,
        )
    return RateLimited(
        f"{name} has {s.cap_per_pair} unacknowledged messages from you, the most one "
        "sender may leave with one recipient (INBOTS_CAP_PER_PAIR). A place frees up "
        f"when {name} acknowledges one of yours or one expires; try again in "
        f"{CAP_RETRY_AFTER_SECONDS} s or later. Nothing of this send was stored.",
        retry_after=CAP_RETRY_AFTER_SECONDS,
    )


def _leave_out(uow: UnitOfWork, caller: Caller, message_id: str, full: dict[str, str]) -> None:
    """Take the send's deliveries to ``full`` back, and their count out of the caller's pair
    rows (just recounted, so they stay exact)."""
    ids = list(full)
    uow.session.execute(
        delete(Delivery)
        .where(Delivery.message_id == message_id, Delivery.recipient_id.in_(ids))
        .execution_options(synchronize_session=False)
    )
    uow.session.execute(
        update(CapLedger)
        .where(CapLedger.recipient_id.in_(ids), CapLedger.sender_id == caller.agent_id)
        .values(open_count=CapLedger.open_count - 1)
        .execution_options(synchronize_session=False)
    )


def _sums(pairs_only: bool) -> Any:
    """:func:`_estimates`' statement, built once; its value is ``ids``."""
    statement = (
        select(CapLedger.recipient_id, func.sum(CapLedger.open_count))
        .where(CapLedger.recipient_id.in_(bindparam("ids", expanding=True)))
        .group_by(CapLedger.recipient_id)
    )
    return statement.where(CapLedger.sender_id != TOTAL) if pairs_only else statement


_SUMS = {pairs_only: _sums(pairs_only) for pairs_only in (False, True)}


def _estimates(
    uow: UnitOfWork, recipient_ids: Sequence[str], *, pairs_only: bool = False
) -> dict[str, int]:
    """Each recipient's ledger sum: an upper bound of what the caps count (as this transaction
    sees it), or with ``pairs_only`` the sum of its (recipient, sender) rows alone."""
    rows = uow.session.connection().execute(_SUMS[pairs_only], {"ids": list(recipient_ids)})
    found = {rid: int(total or 0) for rid, total in rows.all()}
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
