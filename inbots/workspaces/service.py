"""Creating workspaces and seeding the operator token."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from inbots.agents.models import KIND_OPERATOR, OPERATOR_USERNAME, Agent
from inbots.db.uow import UnitOfWork
from inbots.errors import Invalid
from inbots.kit import tokens
from inbots.kit.clock import utcnow
from inbots.kit.ids import new_id
from inbots.workspaces.models import OperatorToken, Workspace


@dataclass(frozen=True)
class Seeded:
    workspace_id: str
    minted_token: str | None  # set only when a token was generated now: print it once


def _add_token(uow: UnitOfWork, workspace_id: str, token: str) -> None:
    if not tokens.looks_like(token, tokens.OPERATOR_TOKEN_PREFIX):
        raise Invalid(
            "An operator token must start with ops_ followed by at least 32 url-safe characters.",
            field="operator_token",
        )
    digest = tokens.hash_token(token)
    exists = uow.session.scalar(select(OperatorToken.id).where(OperatorToken.token_hash == digest))
    if exists is None:
        uow.session.add(
            OperatorToken(
                id=new_id("otk"), workspace_id=workspace_id, token_hash=digest, created_at=utcnow()
            )
        )
        uow.session.flush()


def create_workspace(uow: UnitOfWork, name: str, token: str | None = None) -> Seeded:
    """A new workspace with its operator row and one operator token (given, or minted)."""
    now = utcnow()
    workspace = Workspace(id=new_id("ws"), name=name, created_at=now)
    uow.session.add(workspace)
    uow.session.flush()
    uow.session.add(
        Agent(
            id=new_id("ag"),
            workspace_id=workspace.id,
            kind=KIND_OPERATOR,
            username=OPERATOR_USERNAME,
            description="The human owner of this workspace.",
            status="active",
            created_at=now,
        )
    )
    minted = None
    if token is None:
        token = minted = tokens.mint(tokens.OPERATOR_TOKEN_PREFIX)
    _add_token(uow, workspace.id, token)
    return Seeded(workspace.id, minted)


def ensure_first_workspace(uow: UnitOfWork, operator_token: str | None) -> Seeded:
    """On start-up: create the first workspace if there is none, and make sure the token from
    ``INBOTS_OPERATOR_TOKEN`` (if set) is one of its operator tokens."""
    first = uow.session.scalars(select(Workspace).order_by(Workspace.id).limit(1)).first()
    if first is None:
        return create_workspace(uow, "default", operator_token)
    if operator_token:
        _add_token(uow, first.id, operator_token)
    return Seeded(first.id, None)
