"""Caller resolution: an ``agt_`` key is one agent, an ``ops_`` token one workspace's operator."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update

from inbots.agents.models import KIND_OPERATOR, Agent
from inbots.db.uow import UnitOfWork
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
    last_seen_at: datetime | None = field(default=None, compare=False)

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
    """Resolve a well-formed token to its caller, or 401. Compares hashes in constant time."""
    digest = tokens.hash_token(token)
    if token.startswith(tokens.OPERATOR_TOKEN_PREFIX):
        row = uow.session.execute(
            select(OperatorToken.token_hash, Agent)
            .join(Agent, Agent.workspace_id == OperatorToken.workspace_id)
            .where(OperatorToken.token_hash == digest, Agent.kind == KIND_OPERATOR)
        ).first()
        if row is None or not tokens.matches(token, row[0]):
            raise Unauthorized(_BAD_TOKEN)
        operator: Agent = row[1]
        return Caller(operator.workspace_id, operator.id, operator.username, True)
    agent = uow.session.scalars(select(Agent).where(Agent.key_hash == digest)).first()
    if agent is None or agent.key_hash is None or not tokens.matches(token, agent.key_hash):
        raise Unauthorized(_BAD_TOKEN)
    if agent.archived:
        raise Unauthorized(_BAD_TOKEN)
    return Caller(agent.workspace_id, agent.id, agent.username, False, agent.last_seen_at)


def needs_touch(caller: Caller, resolution_seconds: float) -> bool:
    """Whether the agent's ``last_seen_at`` is older than the resolution worth writing down."""
    if caller.is_operator:
        return False
    last_seen = caller.last_seen_at
    return last_seen is None or utcnow() - last_seen >= timedelta(seconds=resolution_seconds)


def touch(uow: UnitOfWork, caller: Caller) -> None:
    """Stamp the agent's activity (``last_seen_at``); never moves it backwards."""
    now = utcnow()
    resolution = timedelta(seconds=uow.settings.last_seen_resolution_seconds)
    uow.session.execute(
        update(Agent)
        .where(
            Agent.id == caller.agent_id,
            or_(Agent.last_seen_at.is_(None), Agent.last_seen_at <= now - resolution),
        )
        .values(last_seen_at=now)
    )


def authenticate_operator(uow: UnitOfWork, token: str) -> tuple[str, Caller]:
    """Resolve a raw operator token (the dashboard's sign-in) to its token row's id and the
    operator caller, or 401. Agent keys are refused: only the operator signs in."""
    token = token.strip()
    if not tokens.looks_like(token, tokens.OPERATOR_TOKEN_PREFIX):
        raise Unauthorized(_BAD_TOKEN)
    caller = authenticate(uow, token)
    token_id = uow.session.scalar(
        select(OperatorToken.id).where(OperatorToken.token_hash == tokens.hash_token(token))
    )
    if token_id is None:  # revoked between the two reads
        raise Unauthorized(_BAD_TOKEN)
    return token_id, caller


def operator_by_token_id(uow: UnitOfWork, token_id: str) -> Caller:
    """The operator caller for an operator token row that still exists, or 401. A dashboard
    session holds only the row's id, so revoking the token ends the session."""
    row = uow.session.execute(
        select(Agent)
        .join(OperatorToken, OperatorToken.workspace_id == Agent.workspace_id)
        .where(OperatorToken.id == token_id, Agent.kind == KIND_OPERATOR)
    ).first()
    if row is None:
        raise Unauthorized("The operator token of this session no longer exists; sign in again.")
    operator: Agent = row[0]
    return Caller(operator.workspace_id, operator.id, operator.username, True)
