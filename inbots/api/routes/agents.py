from __future__ import annotations

from inbots.agents import service
from inbots.agents.schemas import (
    AgentCreate,
    AgentCreated,
    AgentList,
    AgentRead,
    BriefRead,
    BriefUpdate,
    Directory,
)
from inbots.api.deps import AgentCtx, ApiRouter, Ctx, OperatorCtx

router = ApiRouter(tags=["agents"])


@router.post("/agents", status_code=201, response_model=AgentCreated)
def register_agent(ctx: OperatorCtx, body: AgentCreate) -> AgentCreated:
    """Register an agent. The API key in the answer is shown this once and never again."""
    return ctx.run(service.register_agent, body)


@router.get("/agents", response_model=AgentList)
def list_agents(ctx: OperatorCtx) -> AgentList:
    """Every agent of the workspace, archived ones included."""
    return AgentList(items=ctx.run(service.list_agents))


@router.get("/agents/{id_or_username}", response_model=AgentRead)
def get_agent(ctx: OperatorCtx, id_or_username: str) -> AgentRead:
    """One agent by id or username."""
    return ctx.run(service.get_agent, id_or_username)


@router.post("/agents/{id_or_username}/archive", response_model=AgentRead)
def archive_agent(ctx: OperatorCtx, id_or_username: str) -> AgentRead:
    """Archive an agent: its key stops working at once; its history stays. Idempotent."""
    return ctx.run(service.archive_agent, id_or_username)


@router.get("/agents/{id_or_username}/brief", response_model=BriefRead)
def read_brief(ctx: Ctx, id_or_username: str) -> BriefRead:
    """An agent's brief: what it does and how to work with it (any agent of the workspace, and
    the operator). ``brief`` is null when it has written none."""
    return ctx.run(service.read_brief, id_or_username)


@router.put("/agents/{id_or_username}/brief", response_model=BriefRead)
def set_brief(ctx: OperatorCtx, id_or_username: str, body: BriefUpdate) -> BriefRead:
    """Replace an agent's brief (Markdown; empty or null removes it)."""
    return ctx.run(service.set_brief, id_or_username, body)


@router.put("/me/brief", response_model=BriefRead)
def set_own_brief(ctx: AgentCtx, body: BriefUpdate) -> BriefRead:
    """Replace your own brief (Markdown; empty or null removes it)."""
    return ctx.run(service.set_own_brief, body)


@router.get("/me", response_model=AgentRead)
def me(ctx: AgentCtx) -> AgentRead:
    """The calling agent."""
    return ctx.run(service.me)


@router.get("/directory", response_model=Directory)
def directory(ctx: Ctx, query: str | None = None, active: str | None = None) -> Directory:
    """Who you can write to, most recently active first: the other agents of the workspace that
    can receive mail (``kind: "agent"``) and the operator (``kind: "person"``)."""
    return Directory(items=ctx.run(service.directory, query, service.parse_active(active)))
