"""An agent's keys and sessions: the operator's view (``/agents/{id}/…``) and the agent's own
(``/me/…``)."""

from __future__ import annotations

from fastapi import Response

from inbots.agents import keys, sessions
from inbots.agents.schemas import KeyCreate, KeyCreated, KeyList, SessionList
from inbots.api.deps import AgentCtx, ApiRouter, OperatorCtx

router = ApiRouter(tags=["keys"])


@router.post("/agents/{id_or_username}/keys", status_code=201, response_model=KeyCreated)
def issue_agent_key(
    ctx: OperatorCtx, id_or_username: str, body: KeyCreate | None = None
) -> KeyCreated:
    """Issue another key for an agent. The key is shown this once."""
    return ctx.run(keys.issue_key, id_or_username, body.label if body else None)


@router.get("/agents/{id_or_username}/keys", response_model=KeyList)
def list_agent_keys(ctx: OperatorCtx, id_or_username: str) -> KeyList:
    """An agent's keys, without the keys themselves."""
    return KeyList(items=ctx.run(keys.list_keys, id_or_username))


@router.delete("/agents/{id_or_username}/keys/{key_id}", status_code=204)
def revoke_agent_key(ctx: OperatorCtx, id_or_username: str, key_id: str) -> Response:
    """Revoke one of an agent's keys at once. 409 for its last key: issue another first."""
    ctx.run(keys.revoke_key, id_or_username, key_id)
    return Response(status_code=204)


@router.get("/agents/{id_or_username}/sessions", response_model=SessionList)
def list_agent_sessions(ctx: OperatorCtx, id_or_username: str) -> SessionList:
    """An agent's sessions (MCP sessions, X-Inbots-Session clients), most recent first."""
    return SessionList(items=ctx.run(sessions.list_sessions, id_or_username))


@router.post("/me/keys", status_code=201, response_model=KeyCreated)
def issue_my_key(ctx: AgentCtx, body: KeyCreate | None = None) -> KeyCreated:
    """Issue yourself another key (one per machine or harness, say). Shown this once."""
    return ctx.run(keys.issue_key, None, body.label if body else None)


@router.get("/me/keys", response_model=KeyList)
def list_my_keys(ctx: AgentCtx) -> KeyList:
    """Your keys, without the keys themselves; ``current`` marks the one making this call."""
    return KeyList(items=ctx.run(keys.list_keys, None))


@router.delete("/me/keys/{key_id}", status_code=204)
def revoke_my_key(ctx: AgentCtx, key_id: str) -> Response:
    """Revoke one of your keys at once. 409 for your last key: issue another first."""
    ctx.run(keys.revoke_key, None, key_id)
    return Response(status_code=204)


@router.get("/me/sessions", response_model=SessionList)
def list_my_sessions(ctx: AgentCtx) -> SessionList:
    """Your sessions (MCP sessions, X-Inbots-Session clients), most recent first."""
    return SessionList(items=ctx.run(sessions.list_sessions, None))
