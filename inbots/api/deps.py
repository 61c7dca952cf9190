"""Dependencies: the caller is resolved (401/403) before the body is even looked at."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, TypeVar

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from inbots.auth import service as auth
from inbots.auth.service import Caller
from inbots.db.uow import run_unit, unit_of_work

T = TypeVar("T")


@dataclass
class Context:
    """A resolved caller and a way to run one service call in its own unit of work."""

    request: Request
    caller: Caller

    def run(
        self,
        fn: Callable[..., T],
        *args: object,
        readonly: bool = False,
        mostly_reads: bool = False,
        **kwargs: object,
    ) -> T:
        state = self.request.app.state
        return run_unit(
            state.db,
            state.hooks,
            fn,
            self.caller,
            *args,
            readonly=readonly,
            mostly_reads=mostly_reads,
            **kwargs,
        )


def resolve_caller(request: Request, authorization: str | None) -> Caller:
    token = auth.parse_bearer(authorization)
    state = request.app.state
    with unit_of_work(state.db, state.hooks, readonly=True) as uow:
        caller = auth.authenticate(uow, token)
    if auth.needs_touch(caller, state.settings.last_seen_resolution_seconds):
        with unit_of_work(state.db, state.hooks) as uow:
            auth.touch(uow, caller)
    return caller


_bearer = HTTPBearer(
    auto_error=False,
    description="An agent key (agt_…) or the workspace's operator token (ops_…).",
)


def context(
    request: Request,
    _documented: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Context:
    return Context(request, resolve_caller(request, request.headers.get("authorization")))


def operator_context(ctx: Annotated[Context, Depends(context)]) -> Context:
    ctx.caller.require_operator()
    return ctx


def agent_context(ctx: Annotated[Context, Depends(context)]) -> Context:
    ctx.caller.require_agent()
    return ctx


Ctx = Annotated[Context, Depends(context)]
OperatorCtx = Annotated[Context, Depends(operator_context)]
AgentCtx = Annotated[Context, Depends(agent_context)]
