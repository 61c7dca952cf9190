"""An agent's keys: several, each with a label, issued by the operator or by the agent itself,
listed without the key, revoked at once.

Callers are resolved through ``agent_keys`` (see :func:`inbots.auth.service.authenticate`): one
indexed lookup by hash per request and no cache, so a revoked key (its row deleted) stops
working on every web process from the next request on. An agent always keeps one key: the last
one cannot be revoked (issue another first, or archive the agent).
"""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import delete, func, select

from inbots.agents.schemas import KeyCreated, KeyRead
from inbots.auth import rate_limit
from inbots.caller import Caller
from inbots.db.uow import UnitOfWork, reads
from inbots.errors import Conflict, Invalid, NotFound, not_found
from inbots.kit import tokens
from inbots.kit.clock import utcnow
from inbots.kit.ids import new_id
from inbots.models.agents import KIND_AGENT, Agent, AgentKey

log = logging.getLogger(__name__)

DEFAULT_LABEL = "default"  # the first key of an agent (and the key it had before keys had rows)


def add_key(uow: UnitOfWork, agent_id: str, label: str | None, now: datetime) -> str:
    """Mint a key for ``agent_id`` and store its hash; the key itself is returned, once."""
    return _add(uow, agent_id, label, now)[1]


def _add(uow: UnitOfWork, agent_id: str, label: str | None, now: datetime) -> tuple[AgentKey, str]:
    api_key = tokens.mint(tokens.AGENT_KEY_PREFIX)
    row = AgentKey(
        id=new_id("key"),
        agent_id=agent_id,
        key_hash=tokens.hash_token(api_key),
        hint=tokens.hint(api_key, tokens.AGENT_KEY_PREFIX),
        label=label,
        created_at=now,
    )
    uow.session.add(row)
    uow.session.flush()
    return row, api_key


def agent_of(
    uow: UnitOfWork, caller: Caller, agent_ref: str | None, *, lock: bool = False
) -> Agent:
    """The agent whose keys are meant: the caller itself (``agent_ref`` None, an agent's own
    keys), or an agent of the operator's workspace by id or username. ``lock`` holds its row
    for the transaction, so counting its keys and changing them cannot interleave."""
    if agent_ref is None:
        caller.require_agent()
        stmt = select(Agent).where(Agent.id == caller.agent_id)
    else:
        caller.require_operator()
        stmt = select(Agent).where(
            Agent.workspace_id == caller.workspace_id,
            Agent.kind == KIND_AGENT,
            (Agent.id == agent_ref) | (Agent.username == agent_ref),
        )
    if lock:
        stmt = stmt.with_for_update()
    agent = uow.session.scalars(stmt).first()
    if agent is None:
        raise not_found("agent", agent_ref or caller.agent_id)
    return agent


def _listing(agent_ref: str | None) -> str:
    return "GET /v1/me/keys" if agent_ref is None else f"GET /v1/agents/{agent_ref}/keys"


def _check_label(label: str | None, uow: UnitOfWork) -> str | None:
    if label is None:
        return None
    label = label.strip()
    limit = uow.settings.key_label_max
    if len(label) > limit or not label.isprintable():
        raise Invalid(
            f"label: at most {limit} printable characters on one line, like 'laptop' or 'ci'.",
            field="label",
        )
    return label or None


def issue_key(
    uow: UnitOfWork, caller: Caller, agent_ref: str | None, label: str | None = None
) -> KeyCreated:
    """Issue another key for an agent (``agent_ref`` None: the calling agent itself). The key
    is in this answer only; at most ``agent_keys_max`` live keys an agent."""
    label = _check_label(label, uow)
    agent = agent_of(uow, caller, agent_ref, lock=True)
    if agent.archived:
        raise Conflict(
            f"Agent {agent.username!r} is archived: no key of it authenticates any more, so a new "
            "one would serve nothing. Register a new agent instead (POST /v1/agents)."
        )
    held = uow.session.scalar(
        select(func.count()).select_from(AgentKey).where(AgentKey.agent_id == agent.id)
    )
    limit = uow.settings.agent_keys_max
    if (held or 0) >= limit:
        raise Conflict(
            f"This agent already holds {limit} keys, the most it may; revoke one it no longer "
            f"needs (DELETE …/keys/{{id}}; {_listing(agent_ref)} lists them), then issue again."
        )
    rate_limit.spend(uow, caller)
    row, api_key = _add(uow, agent.id, label, utcnow())
    log.info("agent key issued", extra={"agent_id": agent.id, "key_id": row.id})
    return KeyCreated(
        id=row.id, label=row.label, api_key=api_key, hint=row.hint, created_at=row.created_at
    )


@reads
def list_keys(uow: UnitOfWork, caller: Caller, agent_ref: str | None) -> list[KeyRead]:
    """An agent's live keys, oldest first, without the keys themselves."""
    agent = agent_of(uow, caller, agent_ref)
    rows = uow.session.scalars(
        select(AgentKey).where(AgentKey.agent_id == agent.id).order_by(AgentKey.id)
    ).all()
    return [
        KeyRead(
            id=r.id,
            label=r.label,
            hint=r.hint,
            created_at=r.created_at,
            last_used_at=r.last_used_at,
            current=r.id == caller.key_id,
        )
        for r in rows
    ]


def revoke_key(uow: UnitOfWork, caller: Caller, agent_ref: str | None, key_id: str) -> None:
    """Revoke one of an agent's keys at once: from the next request on it authenticates
    nothing, on every web process. The agent's last key cannot be revoked (409)."""
    agent = agent_of(uow, caller, agent_ref, lock=True)
    ids = uow.session.scalars(select(AgentKey.id).where(AgentKey.agent_id == agent.id)).all()
    if key_id not in ids:
        raise NotFound(
            f"No key {key_id!r} of this agent was found; key ids look like key_…, and "
            f"{_listing(agent_ref)} lists them."
        )
    if len(ids) <= 1:
        archive = (
            "" if agent_ref is None else ", or archive the agent (POST /v1/agents/{id}/archive)"
        )
        raise Conflict(
            "This is the agent's last key; issue another first (POST …/keys), then revoke this "
            f"one{archive}."
        )
    rate_limit.spend(uow, caller)
    uow.session.execute(delete(AgentKey).where(AgentKey.id == key_id))
    log.info("agent key revoked", extra={"agent_id": agent.id, "key_id": key_id})
