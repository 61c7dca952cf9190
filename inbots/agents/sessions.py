"""An agent's sessions: the MCP sessions and ``X-Inbots-Session`` clients it was seen through
(recorded by :mod:`inbots.auth.service` when the caller is resolved), for the agent itself, the
operator and the dashboard."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from inbots.agents.keys import agent_of
from inbots.agents.schemas import SessionRead
from inbots.caller import Caller
from inbots.config import Settings
from inbots.db.uow import UnitOfWork, reads
from inbots.kit.clock import utcnow
from inbots.models.agents import AgentSession


def to_read(row: AgentSession, settings: Settings) -> SessionRead:
    active = utcnow() - row.last_seen_at < timedelta(seconds=settings.session_active_seconds)
    return SessionRead(
        id=row.id,
        label=row.label,
        client=row.client,
        first_seen_at=row.first_seen_at,
        last_seen_at=row.last_seen_at,
        active=active,
    )


def recent_sessions(uow: UnitOfWork, agent_id: str) -> list[SessionRead]:
    """An agent's sessions, most recently seen first (at most ``list_max``)."""
    rows = uow.session.scalars(
        select(AgentSession)
        .where(AgentSession.agent_id == agent_id)
        .order_by(AgentSession.last_seen_at.desc(), AgentSession.id)
        .limit(uow.settings.list_max)
    ).all()
    return [to_read(r, uow.settings) for r in rows]


@reads
def list_sessions(uow: UnitOfWork, caller: Caller, agent_ref: str | None) -> list[SessionRead]:
    """An agent's sessions (``agent_ref`` None: the calling agent's own), most recent first;
    ``active`` when seen within ``INBOTS_SESSION_ACTIVE_SECONDS``."""
    agent = agent_of(uow, caller, agent_ref)
    return recent_sessions(uow, agent.id)
