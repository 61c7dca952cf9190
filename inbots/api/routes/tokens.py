"""Operator tokens: mint, list and revoke (operator only). A revoked token authenticates nothing
and ends the dashboard sessions signed in with it."""

from __future__ import annotations

from fastapi import Response

from inbots.api.deps import ApiRouter, OperatorCtx
from inbots.workspaces import service
from inbots.workspaces.schemas import (
    OperatorTokenCreate,
    OperatorTokenCreated,
    OperatorTokenList,
)

router = ApiRouter(tags=["tokens"])


@router.post("/tokens", status_code=201, response_model=OperatorTokenCreated)
def create_token(ctx: OperatorCtx, body: OperatorTokenCreate | None = None) -> OperatorTokenCreated:
    """Mint another operator token for this workspace. The token is shown this once."""
    return ctx.run(service.create_operator_token, body.label if body else None)


@router.get("/tokens", response_model=OperatorTokenList)
def list_tokens(ctx: OperatorCtx) -> OperatorTokenList:
    """Every operator token of the workspace, revoked ones included; never the token itself."""
    return OperatorTokenList(items=ctx.run(service.list_operator_tokens))


@router.delete("/tokens/{token_id}", status_code=204)
def revoke_token(ctx: OperatorCtx, token_id: str) -> Response:
    """Revoke an operator token at once (its dashboard sessions end too). 409 for the
    workspace's last live token: create another first."""
    ctx.run(service.revoke_operator_token, token_id)
    return Response(status_code=204)
