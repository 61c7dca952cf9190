"""Caller resolution: an ``agt_`` key is one agent (through ``agent_keys``: an agent may hold
several), an ``ops_`` token one workspace's operator. Resolution also notes the agent's session
(``X-Inbots-Session``, or an MCP session) when it is due, in the same write as ``last_seen_at``."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, and_, bindparam, func, literal, or_, select, update

from inbots.auth import rate_limit
from inbots.caller import Caller, SessionSeen
from inbots.config import Settings
from inbots.db.engine import Database, upsert_for
from inbots.db.uow import UnitOfWork, unit_of_work
from inbots.dispatch.effects import Effects
from inbots.errors import Invalid, Unauthorized
from inbots.kit import tokens
from inbots.kit.clock import utcnow
from inbots.kit.ids import new_id
from inbots.models.agents import ARCHIVED, KIND_OPERATOR, Agent, AgentKey, AgentSession
from inbots.models.workspaces import OperatorToken

SESSION_HEADER = "X-Inbots-Session"
_SESSION_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._:@/+=-]*")
# What the MCP endpoint hands out as Mcp-Session-Id (and accepts back): a session id's shape.
MCP_SESSION_ID = re.compile(r"ses_[0-9a-z]{26}")
_CLIENT_MAX = 200


def session_seen(
    settings: Settings,
    label: str | None,
    user_agent: str | None = None,
    *,
    mcp_key: str | None = None,
    mcp_client: str | None = None,
    minted: bool = False,
) -> SessionSeen | None:
    """The session a request names, or None: an ``X-Inbots-Session`` label (its client the MCP
    clientInfo, else the User-Agent), else an MCP session (``mcp_key``, from the MCP endpoint).
    422 for a label that is too long or has characters a label cannot have."""
    if label is not None:
        label = label.strip()
        if (
            not label
            or len(label) > settings.session_label_max
            or not _SESSION_LABEL.fullmatch(label)
        ):
            raise Invalid(
                f"The {SESSION_HEADER} header names your session: 1 to "
                f"{settings.session_label_max} characters, letters, digits, spaces and . _ : @ / "
                "+ = -, starting with a letter or digit (like worker-1). Fix the header, or leave "
                "it out.",
                field=SESSION_HEADER,
            )
        return SessionSeen(f"label:{label}", label, _cut(mcp_client or user_agent))
    if mcp_key is not None:
        return SessionSeen(mcp_key[:220], None, _cut(mcp_client), minted=minted)
    return None


def _cut(client: str | None) -> str | None:
    if client is None:
        return None
    client = "".join(c for c in client if c.isprintable()).strip()
    return client[:_CLIENT_MAX] or None


_BAD_TOKEN = "The bearer token is missing, malformed, unknown or belongs to an archived agent."


def one_authorization(values: Sequence[str]) -> str | None:
    """The request's one ``Authorization`` header (None without one), or 401 when it has more:
    two credentials name no single caller, and a proxy that reads the last one would act as
    someone other than the one this server resolved."""
    if len(values) > 1:
        raise Unauthorized(
            f"Send one Authorization: Bearer <token> header; this request has {len(values)}."
        )
    return values[0] if values else None


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


# The lookups, built once (their values are bound per request): building a SELECT costs more
# than running it.
_OPERATOR_TOKEN = (
    select(
        OperatorToken.id,
        OperatorToken.token_hash,
        OperatorToken.last_used_at,
        Agent.workspace_id,
        Agent.id,
        Agent.username,
    )
    .join(Agent, Agent.workspace_id == OperatorToken.workspace_id)
    .where(
        OperatorToken.token_hash == bindparam("digest"),
        OperatorToken.revoked_at.is_(None),
        Agent.kind == KIND_OPERATOR,
    )
)


def _agent_key(session: bool) -> Select[*tuple[Any, ...]]:
    """An agent's key, its agent and (``session``: the named one, by ``session_key``) the
    session's row, in one indexed query."""
    named = (
        and_(AgentSession.agent_id == Agent.id, AgentSession.session_key == bindparam("session"))
        if session
        else literal(False)
    )
    return (
        select(
            AgentKey.id,
            AgentKey.key_hash,
            AgentKey.last_used_at,
            Agent.workspace_id,
            Agent.id,
            Agent.username,
            Agent.last_seen_at,
            Agent.status,
            AgentSession.last_seen_at,
        )
        .join(Agent, Agent.id == AgentKey.agent_id)
        .outerjoin(AgentSession, named)
        .where(AgentKey.key_hash == bindparam("digest"))
    )


_AGENT_KEY = {False: _agent_key(False), True: _agent_key(True)}


def authenticate(uow: UnitOfWork, token: str, session: SessionSeen | None = None) -> Caller:
    """Resolve a well-formed token to its caller, or 401. Compares hashes in constant time. A
    revoked operator token, or a revoked agent key (its row is gone), authenticates nothing.
    An agent's key, its agent and the named session's row are one indexed query."""
    digest = tokens.hash_token(token)
    run = uow.session.connection().execute
    if token.startswith(tokens.OPERATOR_TOKEN_PREFIX):
        row = run(_OPERATOR_TOKEN, {"digest": digest}).first()
        if row is None or not tokens.matches(token, row[1]):
            raise Unauthorized(_BAD_TOKEN)
        token_id, _, last_used, workspace_id, operator_id, username = row
        return Caller(workspace_id, operator_id, username, True, last_used, token_id)
    # The named session's row comes along (None when there is none yet, or none is named).
    values = {"digest": digest} if session is None else {"digest": digest, "session": session.key}
    found = run(_AGENT_KEY[session is not None], values).first()
    if found is None:
        raise Unauthorized(_BAD_TOKEN)
    # session_seen_at is None when there is no session row yet (or none is named).
    (key_id, key_hash, key_last_used, workspace_id, agent_id, username, seen_at, status,
     session_seen_at) = found  # fmt: skip
    if not tokens.matches(token, key_hash) or status == ARCHIVED:
        raise Unauthorized(_BAD_TOKEN)
    return Caller(
        workspace_id,
        agent_id,
        username,
        False,
        seen_at,
        key_id=key_id,
        key_last_used_at=key_last_used,
        session=session,
        session_last_seen_at=session_seen_at,
    )


def operator_caller(operator: Agent, token: OperatorToken) -> Caller:
    """The operator of ``token``'s workspace, calling with that token."""
    return Caller(
        operator.workspace_id, operator.id, operator.username, True, token.last_used_at, token.id
    )


def needs_touch(caller: Caller, resolution_seconds: float) -> bool:
    """Whether the agent's ``last_seen_at``, its key's ``last_used_at`` or its session's
    ``last_seen_at`` (for the operator: its token's ``last_used_at``) is older than the
    resolution worth writing down."""
    if caller.is_operator and caller.token_id is None:
        return False
    now = utcnow()
    resolution = timedelta(seconds=resolution_seconds)

    def due(seen: datetime | None) -> bool:
        return seen is None or now - seen >= resolution

    if caller.is_operator:
        return due(caller.last_seen_at)
    return (
        due(caller.last_seen_at)
        or (caller.key_id is not None and due(caller.key_last_used_at))
        or (caller.session is not None and due(caller.session_last_seen_at))
    )


def _stamp_activity(column: Any, key: Any) -> Any:
    """``UPDATE … SET column = :at WHERE key = :row AND (column IS NULL OR column <= :cutoff)``:
    an activity stamp that never moves backwards, built once."""
    return (
        update(column.class_)
        .where(
            key == bindparam("row"),
            or_(column.is_(None), column <= bindparam("cutoff", type_=column.type)),
        )
        .values({column.key: bindparam("at", type_=column.type)})
    )


_TOUCH_TOKEN = _stamp_activity(OperatorToken.last_used_at, OperatorToken.id)
_TOUCH_AGENT = _stamp_activity(Agent.last_seen_at, Agent.id)
_TOUCH_KEY = _stamp_activity(AgentKey.last_used_at, AgentKey.id)


def touch(uow: UnitOfWork, caller: Caller) -> None:
    """Stamp the agent's activity (``last_seen_at``), or the operator token's
    ``last_used_at``; never moves either backwards."""
    now = utcnow()
    resolution = timedelta(seconds=uow.settings.last_seen_resolution_seconds)
    run = uow.session.connection().execute
    values = {"at": now, "cutoff": now - resolution}
    if caller.is_operator:
        run(_TOUCH_TOKEN, {**values, "row": caller.token_id})
        return
    run(_TOUCH_AGENT, {**values, "row": caller.agent_id})
    if caller.key_id is not None:
        run(_TOUCH_KEY, {**values, "row": caller.key_id})
    seen = caller.session
    if seen is not None:
        last = caller.session_last_seen_at
        if last is None:  # a session never seen before: a new row, a write like any other
            rate_limit.spend(uow, caller)
        if last is None or now - last >= resolution:
            upsert_session(uow, caller.agent_id, seen, now)


def upsert_session(uow: UnitOfWork, agent_id: str, seen: SessionSeen, now: datetime) -> None:
    """Insert the session's row, or move its ``last_seen_at`` on (and its client, when the
    request says one): one statement, safe when two processes see the session at once."""
    stmt = upsert_for(uow.session)(AgentSession).values(
        id=seen.key if seen.minted else new_id("ses"),
        agent_id=agent_id,
        session_key=seen.key,
        label=seen.label,
        client=seen.client,
        first_seen_at=now,
        last_seen_at=now,
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=[AgentSession.agent_id, AgentSession.session_key],
        set_={
            "last_seen_at": stmt.excluded.last_seen_at,
            "client": func.coalesce(stmt.excluded.client, AgentSession.client),
        },
    )
    uow.session.execute(stmt)


def resolve(
    db: Database,
    effects: Effects | None,
    authorization: str | None,
    session: Callable[[], SessionSeen | None] | None = None,
) -> Caller:
    """The caller behind an ``Authorization`` header, for every edge (HTTP routes, ``/mcp``):
    parsed, looked up read-only, and its activity (its key's, its session's) stamped when due
    (401 when it resolves to no one). ``session`` reads the session the request names; a bad
    label is 422, after the token is known good (401 comes first). Runs on a worker thread: it
    touches the database."""
    token = parse_bearer(authorization)
    seen, bad_session = None, None
    if session is not None and not token.startswith(tokens.OPERATOR_TOKEN_PREFIX):
        try:  # the operator has no sessions of an agent: its header is not even read
            seen = session()
        except Invalid as exc:
            bad_session = exc  # told once the token is known good: 401 comes first
    with unit_of_work(db, effects, readonly=True, hand_on=True) as uow:
        caller = authenticate(uow, token, seen)
    if bad_session is not None:
        raise bad_session
    if needs_touch(caller, db.settings.last_seen_resolution_seconds):
        with unit_of_work(db, effects) as uow:
            touch(uow, caller)
    return caller
