"""Registering, listing, finding and archiving agents, and the directory agents see."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from sqlalchemy import func, or_, select
from sqlalchemy.exc import IntegrityError

from inbots.agents import keys
from inbots.agents.schemas import (
    AgentCreate,
    AgentCreated,
    AgentRead,
    BriefRead,
    BriefUpdate,
    DirectoryEntry,
)
from inbots.auth import rate_limit
from inbots.caller import Caller
from inbots.config import Settings
from inbots.db.uow import UnitOfWork, reads
from inbots.errors import Invalid, UsernameTaken, not_found
from inbots.kit.clock import utcnow
from inbots.kit.ids import new_id
from inbots.models.agents import (
    ARCHIVED,
    KIND_AGENT,
    KIND_OPERATOR,
    KIND_PERSON,
    OPERATOR_USERNAME,
    Agent,
)
from inbots.models.approvals import holds_writer
from inbots.models.deliveries import Delivery
from inbots.webhooks import endpoint

USERNAME = re.compile(r"[a-z0-9-]{3,32}")


def check_username(name: str, field: str = "name") -> str:
    if not USERNAME.fullmatch(name):
        raise Invalid(
            f"{field} must be 3 to 32 lowercase letters, digits or hyphens (got {name!r}).",
            field=field,
        )
    return name


def check_description(description: str | None, settings: Settings) -> str | None:
    if description is None:
        return None
    if "\n" in description or "\r" in description:
        raise Invalid("description must be one line.", field="description")
    description = description.strip()
    if len(description) > settings.description_max:
        raise Invalid(
            f"description must be at most {settings.description_max} characters.",
            field="description",
        )
    return description or None


def is_active(agent: Agent, settings: Settings, now: datetime) -> bool:
    """Seen in the last ``active_seconds``, and not archived (an archived agent's key stopped
    working: it is not active, however recently it was seen)."""
    return (
        not agent.archived
        and agent.last_seen_at is not None
        and now - agent.last_seen_at < timedelta(seconds=settings.active_seconds)
    )


def is_never_connected(agent: Agent, settings: Settings, now: datetime) -> bool:
    grace = timedelta(seconds=settings.new_agent_grace_seconds)
    return agent.last_seen_at is None and now - agent.created_at >= grace


def to_read(agent: Agent, unread: int, settings: Settings, now: datetime) -> AgentRead:
    return AgentRead(
        id=agent.id,
        name=agent.username,
        username=agent.username,
        description=agent.description,
        status=agent.status,
        created_at=agent.created_at,
        last_seen_at=agent.last_seen_at,
        active=is_active(agent, settings, now),
        never_connected=is_never_connected(agent, settings, now),
        webhook_url=agent.webhook_url,
        unread=unread,
        has_brief=agent.brief is not None,
    )


def unread_counts(uow: UnitOfWork, agent_ids: Iterable[str]) -> dict[str, int]:
    """Each agent's waiting mail (what its inbox's ``waiting`` says: unacknowledged, not expired,
    in threads that are not closed, not held), in one query."""
    ids = list(agent_ids)
    if not ids:
        return {}
    rows = uow.session.execute(
        select(Delivery.recipient_id, func.count())
        .where(Delivery.recipient_id.in_(ids), *Delivery.waiting())
        .group_by(Delivery.recipient_id)
    ).all()
    return {recipient: count for recipient, count in rows}


def register_agent(uow: UnitOfWork, caller: Caller, request: AgentCreate) -> AgentCreated:
    """Register an agent and mint its API key, which is returned this once and stored hashed."""
    caller.require_operator()
    return create_agent(
        uow, caller.workspace_id, request.name, request.description, request.webhook_url
    )


def create_agent(
    uow: UnitOfWork,
    workspace_id: str,
    name: str,
    description: str | None = None,
    webhook_url: str | None = None,
    *,
    before_insert: Callable[[], None] | None = None,
) -> AgentCreated:
    """An agent of ``workspace_id`` with its first key (labelled ``default``), for the operator
    and for self-registration. ``before_insert`` runs once the input is known to be good and
    the name free, just before the row is written (an enrolment spends its use there)."""
    username = check_username(name)
    description = check_description(description, uow.settings)
    url = None
    if webhook_url is not None:
        url = endpoint.check_url(webhook_url, uow.settings, field="webhook_url")
    now = utcnow()
    agent = Agent(
        id=new_id("ag"),
        workspace_id=workspace_id,
        kind=KIND_AGENT,
        username=username,
        description=description,
        status="active",
        created_at=now,
    )
    taken = uow.session.scalar(
        select(Agent.id).where(Agent.workspace_id == workspace_id, Agent.username == username)
    )
    if taken is None:
        if before_insert is not None:
            before_insert()
        try:
            with uow.session.begin_nested():
                uow.session.add(agent)
                uow.session.flush()
        except IntegrityError:
            taken = "raced"
    if taken is not None:
        if username == OPERATOR_USERNAME:
            raise UsernameTaken(
                f"The username {username!r} is reserved: it names the workspace's operator in "
                "threads and messages; choose another name.",
                field="name",
            )
        raise UsernameTaken(
            f"The username {username!r} is taken in this workspace (archived agents keep "
            "theirs); choose another name.",
            field="name",
        )
    api_key = keys.add_key(uow, agent.id, keys.DEFAULT_LABEL, now)
    webhook = None
    if url is not None:
        endpoint.apply_url(agent, url)
        uow.session.flush()
        webhook = endpoint.to_read(agent)
    read = to_read(agent, 0, uow.settings, now)
    return AgentCreated(**read.model_dump(), api_key=api_key, webhook=webhook)


def find_agent(uow: UnitOfWork, caller: Caller, id_or_username: str) -> Agent:
    """An agent of the caller's workspace by id or username; never the operator's own row."""
    agent = uow.session.scalars(
        select(Agent).where(
            Agent.workspace_id == caller.workspace_id,
            Agent.kind == KIND_AGENT,
            or_(Agent.id == id_or_username, Agent.username == id_or_username),
        )
    ).first()
    if agent is None:
        raise not_found("agent", id_or_username)
    return agent


@reads
def list_agents(uow: UnitOfWork, caller: Caller) -> list[AgentRead]:
    """Every agent of the workspace, archived ones included, oldest first."""
    caller.require_operator()
    agents = uow.session.scalars(
        select(Agent)
        .where(Agent.workspace_id == caller.workspace_id, Agent.kind == KIND_AGENT)
        .order_by(Agent.id)
    ).all()
    unread = unread_counts(uow, (a.id for a in agents))
    now = utcnow()
    return [to_read(a, unread.get(a.id, 0), uow.settings, now) for a in agents]


@reads
def get_agent(uow: UnitOfWork, caller: Caller, id_or_username: str) -> AgentRead:
    caller.require_operator()
    agent = find_agent(uow, caller, id_or_username)
    return to_read(agent, unread_counts(uow, [agent.id]).get(agent.id, 0), uow.settings, utcnow())


@reads
def me(uow: UnitOfWork, caller: Caller) -> AgentRead:
    """The calling agent itself (its webhook URL, never its secret)."""
    caller.require_agent()
    agent = uow.session.get_one(Agent, caller.agent_id)
    return to_read(agent, unread_counts(uow, [agent.id]).get(agent.id, 0), uow.settings, utcnow())


def archive_agent(uow: UnitOfWork, caller: Caller, id_or_username: str) -> AgentRead:
    """Archive: the key stops working at once and the agent stops receiving. Idempotent."""
    caller.require_operator()
    agent = find_agent(uow, caller, id_or_username)
    if not agent.archived:
        agent.status = ARCHIVED
        agent.archived_at = utcnow()
        uow.session.flush()
    return to_read(agent, unread_counts(uow, [agent.id]).get(agent.id, 0), uow.settings, utcnow())


# How the directory describes the operator when its row has no description of its own.
OPERATOR_DESCRIPTION = (
    "The person who owns this workspace and its agents: write to operator for a decision, an "
    "approval or help only a person can give."
)


def parse_active(raw: str | None) -> bool:
    """The directory's ``active`` query parameter: true for only the recently active agents."""
    said = (raw or "").strip().lower()
    if said not in ("", "1", "true", "yes", "0", "false", "no"):
        raise Invalid(
            "active must be true (only the agents active in the last few minutes) or false "
            "(everyone, the default).",
            field="active",
        )
    return said in ("1", "true", "yes")


@reads
def directory(
    uow: UnitOfWork, caller: Caller, query: str | None = None, active_only: bool = False
) -> list[DirectoryEntry]:
    """Who the caller can write to, most recently active first: the other agents of the
    workspace that can receive mail (``kind`` agent) and the workspace's operator (``kind``
    person, username ``operator``), unless the caller is the operator."""
    stmt = select(Agent).where(
        Agent.workspace_id == caller.workspace_id,
        Agent.kind.in_((KIND_AGENT, KIND_OPERATOR)),
        Agent.status == "active",
        Agent.id != caller.agent_id,
    )
    if query and len(query) > uow.settings.description_max:  # what it is matched against
        raise Invalid(
            f"query must be at most {uow.settings.description_max} characters.", field="query"
        )
    if query:
        needle = query.lower()
        stmt = stmt.where(
            or_(
                Agent.username.contains(needle, autoescape=True),
                func.lower(Agent.description).contains(needle, autoescape=True),
            )
        )
    now = utcnow()
    if active_only:
        stmt = stmt.where(Agent.last_seen_at > now - timedelta(seconds=uow.settings.active_seconds))
    stmt = stmt.order_by(Agent.last_seen_at.desc().nulls_last(), Agent.username).limit(
        uow.settings.list_max
    )
    return [
        DirectoryEntry(
            username=a.username,
            kind=KIND_PERSON if a.is_operator else KIND_AGENT,
            description=a.description or (OPERATOR_DESCRIPTION if a.is_operator else None),
            active=is_active(a, uow.settings, now),
            last_seen_at=a.last_seen_at,
            has_brief=a.brief is not None and a.brief_held_at is None,
        )
        for a in uow.session.scalars(stmt)
    ]


def _brief_read(agent: Agent) -> BriefRead:
    return BriefRead(username=agent.username, brief=agent.brief, updated_at=agent.brief_updated_at)


def _apply_brief(
    uow: UnitOfWork, agent: Agent, request: BriefUpdate, held: bool = False
) -> BriefRead:
    """Store the brief; ``held``: it waits for the operator (others read none meanwhile)."""
    text = request.brief
    maximum = uow.settings.brief_max
    if text is not None and len(text) > maximum:
        raise Invalid(
            f"brief must be at most {maximum:,} characters (got {len(text):,}); keep what "
            "others need to work with the agent and link to longer documents.",
            field="brief",
        )
    agent.brief = text if text and text.strip() else None
    agent.brief_updated_at = utcnow()
    agent.brief_held_at = agent.brief_updated_at if held and agent.brief is not None else None
    uow.session.flush()
    return _brief_read(agent)


def set_own_brief(uow: UnitOfWork, caller: Caller, request: BriefUpdate) -> BriefRead:
    """The calling agent's brief, replaced whole (empty or null removes it). While the approval
    policy holds the agent's sends, the brief waits for the operator (``GET /v1/approvals``):
    other agents read no brief until it is approved."""
    caller.require_agent()
    rate_limit.spend(uow, caller)
    held = holds_writer(uow.session, caller.workspace_id, caller.username)
    return _apply_brief(uow, uow.session.get_one(Agent, caller.agent_id), request, held)


def set_brief(
    uow: UnitOfWork, caller: Caller, id_or_username: str, request: BriefUpdate
) -> BriefRead:
    """The operator replaces an agent's brief (empty or null removes it)."""
    caller.require_operator()
    return _apply_brief(uow, find_agent(uow, caller, id_or_username), request)


@reads
def read_brief(uow: UnitOfWork, caller: Caller, id_or_username: str) -> BriefRead:
    """An agent's brief, for any agent of its workspace and the operator; ``brief`` is null
    when it has none (the operator, who is a person, never has one) and, for other agents,
    while it waits for the operator's approval."""
    agent = uow.session.scalars(
        select(Agent).where(
            Agent.workspace_id == caller.workspace_id,
            Agent.kind.in_((KIND_AGENT, KIND_OPERATOR)),
            or_(Agent.id == id_or_username, Agent.username == id_or_username),
        )
    ).first()
    if agent is None:
        raise not_found("agent", id_or_username)
    if agent.brief_held_at is not None and not (caller.is_operator or agent.id == caller.agent_id):
        return BriefRead(username=agent.username, brief=None, updated_at=None)
    return _brief_read(agent)


def briefs(uow: UnitOfWork, caller: Caller) -> dict[str, str]:
    """Every brief of the caller's workspace by agent id, in one query (the operator's pages)."""
    caller.require_operator()
    rows = uow.session.execute(
        select(Agent.id, Agent.brief).where(
            Agent.workspace_id == caller.workspace_id, Agent.brief.is_not(None)
        )
    ).all()
    return {agent_id: brief for agent_id, brief in rows if brief is not None}


def usernames(uow: UnitOfWork, agent_ids: Iterable[str]) -> dict[str, str]:
    ids = set(agent_ids)
    if not ids:
        return {}
    rows = uow.session.execute(select(Agent.id, Agent.username).where(Agent.id.in_(ids))).all()
    return {agent_id: username for agent_id, username in rows}
