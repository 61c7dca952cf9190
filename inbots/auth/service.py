"""Caller resolution: an ``agt_`` key is one agent, an ``ops_`` token one workspace's operator."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update

from inbots.agents.models import KIND_OPERATOR, Agent
from inbots.db.engine import Database
from inbots.db.uow import UnitOfWork, unit_of_work
from inbots.dispatch.effects import Effects
from inbots.errors import Forbidden, Unauthorized
from inbots.kit import tokens
from inbots.kit.clock import utcnow
from inbots.workspaces.models import OperatorToken


@dataclass(frozen=True)
class Caller:
    """Who is calling. ``agent_id`` is the operator's own row when ``is_operator``."""

    workspace_id: str
    agent_id: str
    username: str
    is_operator: bool
    # An agent's last_seen_at; for the operator, its token's last_used_at.
    last_seen_at: datetime | None = field(default=None, compare=False)
    token_id: str | None = field(default=None, compare=False)  # the operator token's row

    def require_operator(self) -> None:
        if not self.is_operator:
            raise Forbidden("This endpoint needs the operator token, not an agent key.")

    def require_agent(self) -> None:
        if self.is_operator:
            raise Forbidden("This endpoint is for agents: call it with an agent key (agt_…).")


_BAD_TOKEN = "The bearer token is missing, malformed, unknown or belongs to an archived agent."


def parse_bearer(header: str | None) -> str:
    """The token from an ``Authorization: Bearer …`` header, or 401."""
    if not header:
        raise Unauthorized("Send an Authorization: Bearer <token> header.")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("Send an Authorization: Bearer <token> header.")
    if not (
        tokens.looks_like(token, tokens.AGENT_KEY_PREFIX)
        or tokens.looks_like(token, tokens.OPERATOR_TOKEN_PREFIX)
    ):
        raise Unauthorized(_BAD_TOKEN)
    return token


def authenticate(uow: UnitOfWork, token: str) -> Caller:
    """Resolve a well-formed token to its caller, or 401. Compares hashes in constant time. A
    revoked operator token authenticates nothing."""
    digest = tokens.hash_token(token)
    if token.startswith(tokens.OPERATOR_TOKEN_PREFIX):
        row = uow.session.execute(
            select(OperatorToken, Agent)
            .join(Agent, Agent.workspace_id == OperatorToken.workspace_id)
            .where(
                OperatorToken.token_hash == digest,
                OperatorToken.revoked_at.is_(None),
                Agent.kind == KIND_OPERATOR,
            )
        ).first()
        if row is None or not tokens.matches(token, row[0].token_hash):
            raise Unauthorized(_BAD_TOKEN)
        return operator_caller(row[1], row[0])
    agent = uow.session.scalars(select(Agent).where(Agent.key_hash == digest)).first()
    if agent is None or agent.key_hash is None or not tokens.matches(token, agent.key_hash):
        raise Unauthorized(_BAD_TOKEN)
    if agent.archived:
        raise Unauthorized(_BAD_TOKEN)
    return Caller(agent.workspace_id, agent.id, agent.username, False, agent.last_seen_at)


def operator_caller(operator: Agent, token: OperatorToken) -> Caller:
    """The operator of ``token``'s workspace, calling with that token."""
    return Caller(
        operator.workspace_id, operator.id, operator.username, True, token.last_used_at, token.id
    )


def needs_touch(caller: Caller, resolution_seconds: float) -> bool:
    """Whether the agent's ``last_seen_at`` (the operator token's ``last_used_at``) is older than
    the resolution worth writing down."""
    if caller.is_operator and caller.token_id is None:
        return False
    last_seen = caller.last_seen_at
    return last_seen is None or utcnow() - last_seen >= timedelta(seconds=resolution_seconds)


def touch(uow: UnitOfWork, caller: Caller) -> None:
    """Stamp the agent's activity (``last_seen_at``), or the operator token's
    ``last_used_at``; never moves either backwards."""
    now = utcnow()
    resolution = timedelta(seconds=uow.settings.last_seen_resolution_seconds)
    if caller.is_operator:
        uow.session.execute(
            update(OperatorToken)
            .where(
                OperatorToken.id == caller.token_id,
                or_(
                    OperatorToken.last_used_at.is_(None),
                    OperatorToken.last_used_at <= now - resolution,
                ),
            )
            .values(last_used_at=now)
        )
        return
    uow.session.execute(
        update(Agent)
        .where(
            Agent.id == caller.agent_id,
            or_(Agent.last_seen_at.is_(None), Agent.last_seen_at <= now - resolution),
        )
        .values(last_seen_at=now)
    )


def resolve(db: Database, effects: Effects | None, authorization: str | None) -> Caller:
    """The caller behind an ``Authorization`` header, for every edge (HTTP routes, ``/mcp``):
    parsed, looked up read-only, and its activity stamped when due (401 when it resolves to
    no one). Runs on a worker thread: it touches the database."""
    token = parse_bearer(authorization)
    with unit_of_work(db, effects, readonly=True) as uow:
        caller = authenticate(uow, token)
    if needs_touch(caller, db.settings.last_seen_resolution_seconds):
        with unit_of_work(db, effects) as uow:
            touch(uow, caller)
    return caller
