"""Workspaces and their operator tokens: creating a workspace, seeding a token from the settings,
and the operator minting, listing and revoking tokens."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import select

from inbots.auth.sessions import end_sessions_of_token
from inbots.caller import Caller
from inbots.db.uow import UnitOfWork, reads
from inbots.errors import Conflict, Invalid, NotFound
from inbots.kit import tokens
from inbots.kit.clock import utcnow
from inbots.kit.ids import new_id
from inbots.models.agents import KIND_OPERATOR, OPERATOR_USERNAME, Agent
from inbots.models.workspaces import OperatorToken, Workspace
from inbots.workspaces.schemas import OperatorTokenCreated, OperatorTokenRead

log = logging.getLogger(__name__)

LABEL_MAX = 100
SEEDED_LABEL = "INBOTS_OPERATOR_TOKEN"
MINTED_LABEL = "minted with the workspace"


@dataclass(frozen=True)
class Seeded:
    workspace_id: str
    minted_token: str | None  # set only when a token was generated now: print it once
    seeded_token_revoked: bool = False  # INBOTS_OPERATOR_TOKEN names a revoked token


def _add_token(uow: UnitOfWork, workspace_id: str, token: str, label: str) -> bool:
    """Store ``token`` unless it is stored already; whether the stored one is revoked."""
    if not tokens.looks_like(token, tokens.OPERATOR_TOKEN_PREFIX):
        raise Invalid(
            "An operator token must start with ops_ followed by at least 32 url-safe characters.",
            field="operator_token",
        )
    digest = tokens.hash_token(token)
    exists = uow.session.scalars(
        select(OperatorToken).where(OperatorToken.token_hash == digest)
    ).first()
    if exists is not None:
        return exists.revoked_at is not None
    uow.session.add(
        OperatorToken(
            id=new_id("otk"),
            workspace_id=workspace_id,
            token_hash=digest,
            created_at=utcnow(),
            label=label,
        )
    )
    uow.session.flush()
    return False


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
    _add_token(uow, workspace.id, token, MINTED_LABEL if minted else SEEDED_LABEL)
    return Seeded(workspace.id, minted)


def ensure_first_workspace(uow: UnitOfWork, operator_token: str | None) -> Seeded:
    """On start-up: create the first workspace if there is none, and make sure the token from
    ``INBOTS_OPERATOR_TOKEN`` (if set) is one of its operator tokens."""
    first = uow.session.scalars(select(Workspace).order_by(Workspace.id).limit(1)).first()
    if first is None:
        return create_workspace(uow, "default", operator_token)
    revoked = bool(operator_token) and _add_token(uow, first.id, str(operator_token), SEEDED_LABEL)
    if revoked:
        log.warning(
            "INBOTS_OPERATOR_TOKEN names an operator token that was revoked: it stays revoked and"
            " signs nothing in; unset it, or set it to a live token"
        )
    return Seeded(first.id, None, revoked)


# --- the operator's tokens ------------------------------------------------------------------


def _read(row: OperatorToken, caller: Caller) -> OperatorTokenRead:
    return OperatorTokenRead(
        id=row.id,
        label=row.label,
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        revoked_at=row.revoked_at,
        current=row.id == caller.token_id,
    )


def create_operator_token(
    uow: UnitOfWork, caller: Caller, label: str | None = None
) -> OperatorTokenCreated:
    """Mint another operator token for the caller's workspace. The token is in this answer
    only; the database keeps its hash."""
    caller.require_operator()
    label = (label or "").strip() or None
    if label is not None and len(label) > LABEL_MAX:
        raise Invalid(f"label: at most {LABEL_MAX} characters.", field="label")
    token = tokens.mint(tokens.OPERATOR_TOKEN_PREFIX)
    row = OperatorToken(
        id=new_id("otk"),
        workspace_id=caller.workspace_id,
        token_hash=tokens.hash_token(token),
        created_at=utcnow(),
        label=label,
    )
    uow.session.add(row)
    uow.session.flush()
    log.info("operator token created", extra={"operator_token_id": row.id})
    return OperatorTokenCreated(id=row.id, label=label, token=token, created_at=row.created_at)


@reads
def list_operator_tokens(uow: UnitOfWork, caller: Caller) -> list[OperatorTokenRead]:
    """Every operator token of the workspace, revoked ones included, oldest first; never the
    token itself. ``current`` marks the one making this call."""
    caller.require_operator()
    rows = uow.session.scalars(
        select(OperatorToken)
        .where(OperatorToken.workspace_id == caller.workspace_id)
        .order_by(OperatorToken.created_at, OperatorToken.id)
    ).all()
    return [_read(row, caller) for row in rows]


def revoke_operator_token(uow: UnitOfWork, caller: Caller, token_id: str) -> None:
    """Revoke an operator token at once: it authenticates nothing more, and every dashboard
    session signed in with it ends. Revoking a revoked token changes nothing. The workspace's
    last live token cannot be revoked (409): nobody could operate it any more."""
    caller.require_operator()
    row = uow.session.scalars(
        select(OperatorToken).where(
            OperatorToken.id == token_id, OperatorToken.workspace_id == caller.workspace_id
        )
    ).first()
    if row is None:
        raise NotFound(
            f"No operator token with id {token_id!r} was found; ids look like otk_…, and "
            "GET /v1/tokens (inbots tokens list) lists them."
        )
    if row.revoked_at is not None:
        return
    # Lock the live tokens, so two revocations at once cannot leave the workspace with none.
    live = uow.session.scalars(
        select(OperatorToken.id)
        .where(
            OperatorToken.workspace_id == caller.workspace_id,
            OperatorToken.revoked_at.is_(None),
        )
        .with_for_update()
    ).all()
    if len(live) <= 1:
        raise Conflict(
            "This is the workspace's last live operator token; create another first "
            "(POST /v1/tokens, inbots tokens create), then revoke this one."
        )
    now = utcnow()
    row.revoked_at = now
    ended = end_sessions_of_token(uow, row.id, now)
    uow.session.flush()
    log.info(
        "operator token revoked",
        extra={"operator_token_id": row.id, "sessions_ended": ended},
    )
