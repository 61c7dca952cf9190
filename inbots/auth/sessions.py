"""Dashboard sessions: signing in with an operator token, the session row every dashboard request
re-reads, and signing out.

A session is a row (:class:`~inbots.models.auth.DashboardSession`) named by a random key that
only the browser's signed cookie holds; the row keeps the key's hash. Every request resolves the
key to the operator through the row and its token, so signing out (the row revoked), revoking
the token (every row of it revoked) or the session's age ending it takes effect at the next
request on every web process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, or_, select, update

from inbots.auth import throttle
from inbots.auth.service import authenticate, operator_caller
from inbots.caller import Caller
from inbots.db.uow import UnitOfWork
from inbots.errors import Unauthorized
from inbots.kit import tokens
from inbots.kit.clock import utcnow
from inbots.kit.ids import new_id
from inbots.models.agents import KIND_OPERATOR, Agent
from inbots.models.auth import DashboardSession
from inbots.models.workspaces import OperatorToken
from inbots.observability import metrics

log = logging.getLogger(__name__)

SESSION_ENDED = "Your session has ended; sign in again."
# Revoked and expired rows are kept this long (for a look after an incident), then deleted.
_KEEP_ENDED = timedelta(days=7)


@dataclass(frozen=True)
class SignIn:
    """What became of one sign-in: ``key`` and ``caller`` when it worked; ``held`` when the
    throttle refused it unseen; neither when the token was wrong (the failure is recorded)."""

    key: str | None = None
    caller: Caller | None = None
    held: throttle.Held | None = None


def sign_in(uow: UnitOfWork, token: str, client_host: str | None) -> SignIn:
    """Check an operator token typed into the dashboard and start a session for it, unless
    sign-ins from this client (or from everywhere) are held back by the throttle.

    Returns rather than raises on a wrong token, so the failure it records is committed."""
    now = utcnow()
    bucket = throttle.client_bucket(client_host)
    throttle.serialize(uow)
    held = throttle.held(uow, bucket, now)
    if held is not None:
        metrics.SIGNIN_FAILURES.labels(f"throttled_{held.scope}").inc()
        log.warning(
            "dashboard sign-in throttled: too many failures from %s",
            "this address" if held.scope == throttle.SCOPE_ADDRESS else "all addresses",
            extra={"client": bucket, "scope": held.scope},
        )
        return SignIn(held=held)
    token = token.strip()
    try:
        if not tokens.looks_like(token, tokens.OPERATOR_TOKEN_PREFIX):
            raise Unauthorized("not an operator token")
        caller = authenticate(uow, token)
    except Unauthorized:
        throttle.record_failure(uow, bucket, now)
        metrics.SIGNIN_FAILURES.labels("bad_token").inc()
        log.warning(
            "dashboard sign-in refused: not a live operator token",
            extra={"client": bucket, "reason": "bad_token"},
        )
        return SignIn()
    key = tokens.mint("")
    uow.session.execute(
        delete(DashboardSession).where(
            or_(
                DashboardSession.expires_at <= now - _KEEP_ENDED,
                DashboardSession.revoked_at <= now - _KEEP_ENDED,
            )
        )
    )
    uow.session.add(
        DashboardSession(
            id=new_id("dss"),
            key_hash=tokens.hash_token(key),
            token_id=caller.token_id,
            created_at=now,
            expires_at=now + timedelta(seconds=uow.settings.session_max_age_seconds),
        )
    )
    uow.session.execute(
        update(OperatorToken).where(OperatorToken.id == caller.token_id).values(last_used_at=now)
    )
    uow.session.flush()
    log.info("dashboard sign-in", extra={"client": bucket})
    return SignIn(key=key, caller=caller)


def session_caller(uow: UnitOfWork, key: str, now: datetime | None = None) -> Caller:
    """The operator of a live session: not signed out, not expired, its token not revoked.
    Otherwise 401 (the dashboard then asks to sign in again)."""
    now = now or utcnow()
    row = uow.session.execute(
        select(DashboardSession.key_hash, OperatorToken, Agent)
        .join(OperatorToken, OperatorToken.id == DashboardSession.token_id)
        .join(Agent, Agent.workspace_id == OperatorToken.workspace_id)
        .where(
            DashboardSession.key_hash == tokens.hash_token(key),
            DashboardSession.revoked_at.is_(None),
            DashboardSession.expires_at > now,
            OperatorToken.revoked_at.is_(None),
            Agent.kind == KIND_OPERATOR,
        )
    ).first()
    if row is None or not tokens.matches(key, row[0]):
        raise Unauthorized(SESSION_ENDED)
    return operator_caller(row[2], row[1])


def end_session(uow: UnitOfWork, key: str) -> None:
    """Sign out: the session stops working on every web process at once. Idempotent."""
    uow.session.execute(
        update(DashboardSession)
        .where(
            DashboardSession.key_hash == tokens.hash_token(key),
            DashboardSession.revoked_at.is_(None),
        )
        .values(revoked_at=utcnow())
    )


def end_sessions_of_token(uow: UnitOfWork, token_id: str, now: datetime) -> int:
    """Revoke every live session signed in with one operator token; how many there were."""
    result = uow.session.execute(
        update(DashboardSession)
        .where(DashboardSession.token_id == token_id, DashboardSession.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    return int(getattr(result, "rowcount", 0) or 0)
