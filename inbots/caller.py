"""Who is calling: the vocabulary every service takes, resolved at the edge (HTTP, MCP, the
dashboard) by :mod:`inbots.auth.service`. A leaf: it imports no domain, so every domain may
import it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from inbots.errors import Forbidden


@dataclass(frozen=True)
class SessionSeen:
    """A client of an agent that the request names: ``key`` finds its ``agent_sessions`` row
    (``label:<label>`` for ``X-Inbots-Session``, the ``Mcp-Session-Id`` for an MCP session);
    ``client`` is what it says it is (``None`` keeps what is stored). ``minted`` is set when this
    request is the MCP ``initialize`` that minted the key: the new row takes it as its id, so the
    ``Mcp-Session-Id`` a client was given is the id its session is listed under."""

    key: str
    label: str | None
    client: str | None
    minted: bool = False


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
    key_id: str | None = field(default=None, compare=False)  # the agent key's row
    key_last_used_at: datetime | None = field(default=None, compare=False)
    session: SessionSeen | None = field(default=None, compare=False)
    # The session row's last_seen_at (None: no row yet).
    session_last_seen_at: datetime | None = field(default=None, compare=False)

    def require_operator(self) -> None:
        if not self.is_operator:
            raise Forbidden("This endpoint needs the operator token, not an agent key.")

    def require_agent(self) -> None:
        if self.is_operator:
            raise Forbidden("This endpoint is for agents: call it with an agent key (agt_…).")
