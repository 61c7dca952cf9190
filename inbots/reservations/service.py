"""Reservations (coordination.md §1): an agent says "I am changing these paths until T"; every
agent and the operator see it; a request that overlaps another agent's active reservation is
refused naming the holder, so the agent can ask it, or wait. Advisory: nothing stops a write (the
git guard, ``inbots guard``, turns it into a check before a commit).

Two patterns conflict when some path matches both (:func:`.patterns.overlaps`). An exclusive
request conflicts with the others' active reservations; a shared one only with their exclusive
ones. The same agent overlapping its own reservation extends it instead.

Race-free across web processes: a reservation request runs check-then-insert under one lock per
workspace (PostgreSQL: ``pg_advisory_xact_lock`` until the transaction ends; SQLite: every writer
already holds the database's single write lock from ``BEGIN IMMEDIATE``).

A refused request stores nothing but its ``reservation.conflict`` event (operator's, in
``GET /v1/events``, pushed to the alert webhook when it receives that type) and spends its
rate-limit token: it is returned, not raised, so that its unit commits them.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.orm import aliased

from inbots.alerts.service import alert_row, receives, store
from inbots.auth import rate_limit
from inbots.caller import Caller
from inbots.db.uow import UnitOfWork, reads
from inbots.errors import Conflict, Forbidden, Invalid, NotFound
from inbots.kit.clock import rfc3339, utcnow
from inbots.kit.cursor import LAST_ID
from inbots.kit.ids import new_id
from inbots.models.agents import KIND_OPERATOR, Agent
from inbots.models.reservations import Reservation
from inbots.reservations.patterns import overlaps
from inbots.reservations.schemas import (
    PATH_MAX,
    PATHS_MAX,
    TTL_DEFAULT,
    TTL_MAX,
    TTL_MIN,
    ConflictList,
    ReleasedList,
    ReservationCheck,
    ReservationConflictRead,
    ReservationCreate,
    ReservationPage,
    ReservationRead,
    ReservationRenew,
    ReservationResult,
)
from inbots.webhooks.subscriptions import RESERVATION_CONFLICT

# Advisory-lock namespace of reservations (the first key of pg_advisory_xact_lock(int, int)).
_LOCK_SPACE = 0x1B08


class ReservationConflict(Conflict):
    """409 reservation_conflict: the paths overlap another agent's reservation (nothing
    reserved). ``conflicts`` lists each one."""

    code = "reservation_conflict"

    def __init__(self, conflicts: Sequence[ReservationConflictRead]) -> None:
        holders = sorted({c.held_by for c in conflicts})
        first = conflicts[0]
        super().__init__(
            f"{len(conflicts)} of your paths overlap reservations of {', '.join(holders)} "
            f"(first: {first.path} by {first.held_by}, {first.reservation_id}, until "
            f"{rfc3339(first.expires_at)}): nothing was reserved. Ask the holder, or wait.",
            field="paths",
        )
        self.conflicts = list(conflicts)
        plural = "" if len(conflicts) == 1 else "s"
        # The tools' answer: one line per conflict, holder and expiry in it.
        self.tool_message = "\n".join(
            [f"Nothing reserved: {len(conflicts)} conflict{plural}. Ask the holder, or wait."]
            + [
                f"- {c.path}: held by {c.held_by} until {rfc3339(c.expires_at)} ({c.pattern}, "
                f"{c.reservation_id})" + (f" — {c.reason}" if c.reason else "")
                for c in conflicts
            ]
        )


class NotActive(Conflict):
    code = "not_active"


# --- checking what is asked ----------------------------------------------------------------------


def check_paths(paths: Sequence[str], field: str = "paths") -> list[str]:
    """Repository-relative paths or globs, stripped: 1 to :data:`PATHS_MAX`, each 1 to
    :data:`PATH_MAX` characters, no ``..`` segment, no leading ``/`` (422 naming ``field``)."""
    if not paths:
        raise Invalid(f"{field} needs 1 to {PATHS_MAX} paths (got none).", field=field)
    if len(paths) > PATHS_MAX:
        raise Invalid(
            f"{field} takes at most {PATHS_MAX} paths (got {len(paths)}): reserve a directory "
            "glob such as 'src/api/**' instead.",
            field=field,
        )
    out: list[str] = []
    for raw in paths:
        path = raw.strip()
        if not path or len(path) > PATH_MAX:
            raise Invalid(
                f"each of {field} must be 1 to {PATH_MAX} characters (got {len(path)}).",
                field=field,
            )
        if "\x00" in path or "\\" in path:
            raise Invalid(f"{path!r} in {field}: use '/' between segments.", field=field)
        if path.startswith("/"):
            raise Invalid(
                f"{path!r} in {field} starts with '/': give it relative to the repository root.",
                field=field,
            )
        if ".." in path.split("/"):
            raise Invalid(f"{path!r} in {field} has a '..' segment.", field=field)
        if path not in out:
            out.append(path)
    return out


def _ttl(value: int | None) -> int:
    ttl = TTL_DEFAULT if value is None else value
    if not TTL_MIN <= ttl <= TTL_MAX:
        raise Invalid(
            f"ttl_seconds must be {TTL_MIN} to {TTL_MAX} (got {ttl}).", field="ttl_seconds"
        )
    return ttl


def _reason(uow: UnitOfWork, reason: str | None) -> str | None:
    reason = (reason or "").strip() or None
    if reason is not None and len(reason) > uow.settings.note_max:
        raise Invalid(
            f"reason must be at most {uow.settings.note_max} characters (got {len(reason)}).",
            field="reason",
        )
    return reason


# --- reading -------------------------------------------------------------------------------------


@dataclass
class _Row:
    row: Reservation
    holder: str
    paths: list[str]


def _read(found: _Row) -> ReservationRead:
    r = found.row
    return ReservationRead(
        id=r.id,
        agent=found.holder,
        paths=found.paths,
        exclusive=r.exclusive,
        reason=r.reason,
        created_at=r.created_at,
        expires_at=r.expires_at,
        released_at=r.released_at,
    )


def _active(now: datetime) -> list[Any]:
    return [Reservation.released_at.is_(None), Reservation.expires_at > now]


def _rows(uow: UnitOfWork, *where: Any, order: Any = None, limit: int | None = None) -> list[_Row]:
    query = select(Reservation, Agent.username).join(Agent, Agent.id == Reservation.agent_id)
    query = query.where(*where).order_by(order if order is not None else Reservation.id)
    if limit is not None:
        query = query.limit(limit)
    return [
        _Row(row, username, json.loads(row.paths)) for row, username in uow.session.execute(query)
    ]


def _conflicts(
    paths: Sequence[str], held: Sequence[_Row], *, exclusive: bool, agent_id: str | None
) -> list[ReservationConflictRead]:
    """Each (path, reservation pattern) that meets, of the others' reservations in ``held``:
    their exclusive ones, and their shared ones too when ``exclusive``."""
    found: list[ReservationConflictRead] = []
    for h in held:
        if h.row.agent_id == agent_id or not (exclusive or h.row.exclusive):
            continue
        for path in paths:
            for pattern in h.paths:
                if overlaps(path, pattern):
                    found.append(
                        ReservationConflictRead(
                            path=path,
                            held_by=h.holder,
                            pattern=pattern,
                            reservation_id=h.row.id,
                            expires_at=h.row.expires_at,
                            reason=h.row.reason,
                        )
                    )
    return found


def _lock_workspace(uow: UnitOfWork, workspace_id: str) -> None:
    """Serialize reservation writes of one workspace until this transaction ends."""
    if uow.session.get_bind().dialect.name == "postgresql":
        key = zlib.crc32(workspace_id.encode()) & 0x7FFFFFFF
        uow.session.execute(
            text("SELECT pg_advisory_xact_lock(:space, :key)"), {"space": _LOCK_SPACE, "key": key}
        )


# --- writing -------------------------------------------------------------------------------------


def reserve(uow: UnitOfWork, caller: Caller, request: ReservationCreate) -> ReservationResult:
    """Reserve ``paths`` for the caller (an agent) until now + ``ttl_seconds``. Refused, with
    nothing reserved, when any path overlaps another agent's active reservation (an exclusive one;
    a shared one too when this request is exclusive): the answer lists each conflict. An active
    reservation of the caller's own that overlaps, of the same exclusivity, is extended (its
    expiry moved out, the new paths added) instead of a second one made."""
    caller.require_agent()
    paths = check_paths(request.paths)
    ttl = _ttl(request.ttl_seconds)
    reason = _reason(uow, request.reason)
    rate_limit.spend(uow, caller)
    _lock_workspace(uow, caller.workspace_id)
    now = utcnow()
    held = _rows(uow, Reservation.workspace_id == caller.workspace_id, *_active(now))
    conflicts = _conflicts(paths, held, exclusive=request.exclusive, agent_id=caller.agent_id)
    if conflicts:
        _conflict_event(uow, caller, paths, conflicts, now)
        return ReservationResult(reservation=None, conflicts=conflicts)
    expires = now + timedelta(seconds=ttl)
    own = [
        h
        for h in held
        if h.row.agent_id == caller.agent_id
        and h.row.exclusive == request.exclusive
        and any(overlaps(p, q) for p in paths for q in h.paths)
    ]
    merged = own[0].paths + [p for p in paths if p not in own[0].paths] if own else []
    if own and len(merged) <= PATHS_MAX:
        mine = own[0]
        mine.row.paths = json.dumps(merged, ensure_ascii=False)
        mine.paths = merged
        mine.row.expires_at = max(mine.row.expires_at, expires)
        if reason is not None:
            mine.row.reason = reason
        uow.session.flush()
        return ReservationResult(reservation=_read(mine), conflicts=[])
    row = Reservation(
        id=new_id("rsv"),
        workspace_id=caller.workspace_id,
        agent_id=caller.agent_id,
        paths=json.dumps(paths, ensure_ascii=False),
        exclusive=request.exclusive,
        reason=reason,
        created_at=now,
        expires_at=expires,
    )
    uow.session.add(row)
    uow.session.flush()
    return ReservationResult(reservation=_read(_Row(row, caller.username, paths)), conflicts=[])


def _one(uow: UnitOfWork, caller: Caller, reservation_id: str) -> _Row:
    found = (
        _rows(
            uow,
            Reservation.id == reservation_id,
            Reservation.workspace_id == caller.workspace_id,
        )
        if reservation_id.startswith("rsv_")
        else []
    )
    if not found:
        raise NotFound(f"No reservation {reservation_id} in this workspace.")
    return found[0]


def _holder_only(caller: Caller, found: _Row, verb: str) -> None:
    if found.row.agent_id != caller.agent_id:
        raise Forbidden(
            f"Reservation {found.row.id} is {found.holder}'s: only its holder may {verb} it"
            + (" (and the operator release it)." if verb == "release" else ".")
        )


def renew(
    uow: UnitOfWork, caller: Caller, reservation_id: str, request: ReservationRenew
) -> ReservationRead:
    """Extend the caller's active reservation to now + ``ttl_seconds``; 409 not_active when it
    has expired or been released (reserve again instead)."""
    found = _one(uow, caller, reservation_id)
    _holder_only(caller, found, "renew")
    ttl = _ttl(request.ttl_seconds)
    now = utcnow()
    if found.row.released_at is not None or found.row.expires_at <= now:
        state = "released" if found.row.released_at is not None else "expired"
        raise NotActive(f"Reservation {found.row.id} has {state}: reserve the paths again.")
    rate_limit.spend(uow, caller)
    found.row.expires_at = now + timedelta(seconds=ttl)
    uow.session.flush()
    return _read(found)


def release(
    uow: UnitOfWork, caller: Caller, reservation_id: str, reason: str | None = None
) -> ReservationRead:
    """Release a reservation: its holder, or the operator (whose ``reason`` is recorded).
    Releasing one no longer active changes nothing."""
    found = _one(uow, caller, reservation_id)
    if not caller.is_operator:
        _holder_only(caller, found, "release")
    reason = _reason(uow, reason)
    now = utcnow()
    if found.row.released_at is None and found.row.expires_at > now:
        rate_limit.spend(uow, caller)
        found.row.released_at = now
        found.row.released_by_id = caller.agent_id
        found.row.release_reason = reason
        uow.session.flush()
    return _read(found)


def release_mine(uow: UnitOfWork, caller: Caller) -> ReleasedList:
    """Release every active reservation of the caller's (an agent)."""
    caller.require_agent()
    now = utcnow()
    mine = _rows(uow, Reservation.agent_id == caller.agent_id, *_active(now))
    if mine:
        rate_limit.spend(uow, caller)
    for found in mine:
        found.row.released_at = now
        found.row.released_by_id = caller.agent_id
    uow.session.flush()
    return ReleasedList(released=[_read(found) for found in mine])


# --- reading -------------------------------------------------------------------------------------


@reads
def check(uow: UnitOfWork, caller: Caller, request: ReservationCheck) -> ConflictList:
    """Which of ``paths`` the other agents' active exclusive reservations hold (read-only: what
    the git guard asks before a commit)."""
    paths = check_paths(request.paths)
    held = _rows(
        uow,
        Reservation.workspace_id == caller.workspace_id,
        Reservation.exclusive.is_(True),
        *_active(utcnow()),
    )
    agent = None if caller.is_operator else caller.agent_id
    return ConflictList(conflicts=_conflicts(paths, held, exclusive=False, agent_id=agent))


_SCAN = 500  # rows read at a time when ?path= filters in Python


@reads
def list_reservations(
    uow: UnitOfWork,
    caller: Caller,
    *,
    agent: str | None = None,
    path: str | None = None,
    active: bool | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> ReservationPage:
    """The workspace's reservations, newest first: by holder (username or id), those that
    would conflict with ``path`` (any of their patterns meets it), active or not."""
    count = limit or uow.settings.list_default
    after = LAST_ID.decode(cursor)
    wanted = check_paths([path], "path")[0] if path is not None else None
    now = utcnow()
    where: list[Any] = [Reservation.workspace_id == caller.workspace_id]
    if agent:
        where.append((Agent.username == agent) | (Agent.id == agent))
    if active is True:
        where.extend(_active(now))
    elif active is False:
        where.append(Reservation.released_at.is_not(None) | (Reservation.expires_at <= now))
    page: list[_Row] = []
    more = False
    while True:
        batch = _rows(
            uow,
            *where,
            *([Reservation.id < after] if after else []),
            order=Reservation.id.desc(),
            limit=_SCAN if wanted else count + 1,
        )
        for found in batch:
            if wanted is None or any(overlaps(wanted, p) for p in found.paths):
                if len(page) == count:
                    more = True
                    break
                page.append(found)
        if more or len(batch) < (_SCAN if wanted else count + 1) or not batch:
            break
        after = batch[-1].row.id
    next_cursor = LAST_ID.encode(page[-1].row.id) if more and page else None
    return ReservationPage(items=[_read(f) for f in page], next_cursor=next_cursor)


@reads
def active_count(uow: UnitOfWork, caller: Caller) -> int:
    """How many reservations of the workspace are active now (the dashboard's card)."""
    found = uow.session.scalar(
        select(func.count()).where(
            Reservation.workspace_id == caller.workspace_id, *_active(utcnow())
        )
    )
    return int(found or 0)


# --- the event -----------------------------------------------------------------------------------


def _conflict_event(
    uow: UnitOfWork,
    caller: Caller,
    paths: list[str],
    conflicts: list[ReservationConflictRead],
    now: datetime,
) -> None:
    """``reservation.conflict``: told to the workspace's operator row (``GET /v1/events``), and
    pushed to the operator's alert webhook when it receives that type."""
    operator = aliased(Agent)
    operator_id = uow.session.scalar(
        select(operator.id)
        .where(operator.workspace_id == caller.workspace_id, operator.kind == KIND_OPERATOR)
        .limit(1)
    )
    if operator_id is None:
        return
    pushed = uow.session.execute(
        select(operator.id).where(
            operator.id == operator_id, *receives(operator, RESERVATION_CONFLICT)
        )
    ).first()
    detail = {
        "agent": caller.username,
        "holders": sorted({c.held_by for c in conflicts}),
        "paths": paths,
        "conflicts": [c.model_dump(mode="json") for c in conflicts],
        "at": rfc3339(now),
    }
    row = alert_row(
        caller.workspace_id, RESERVATION_CONFLICT, operator_id, caller.agent_id, detail, now
    )
    if pushed is None:
        row.update(publish_count=0, last_published_at=None)
        store(uow, [row])
    else:
        uow.enqueue(*store(uow, [row]))
