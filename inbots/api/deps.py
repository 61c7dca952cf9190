"""Dependencies: the caller is resolved (401/403) before the body is even looked at."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Annotated, Any, Concatenate, ParamSpec, TypeVar

from fastapi import Depends, Header, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from inbots.auth import service as auth
from inbots.caller import Caller, SessionSeen
from inbots.db.uow import UnitOfWork, run_unit
from inbots.deliveries.wait import wait_seconds
from inbots.errors import Invalid, UnknownField
from inbots.kit.paging import page_size, whole_number

T = TypeVar("T")
P = ParamSpec("P")


@dataclass
class Context:
    """A resolved caller and a way to run one service call in its own unit of work."""

    request: Request
    caller: Caller

    def run(
        self,
        fn: Callable[Concatenate[UnitOfWork, Caller, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(uow, caller, *args, **kwargs)`` in one unit of work, in the mode ``fn`` declares
        (see :mod:`inbots.db.uow`)."""
        state = self.request.app.state
        return run_unit(state.db, state.dispatch, fn, self.caller, *args, **kwargs)

    async def run_async(
        self,
        fn: Callable[Concatenate[UnitOfWork, Caller, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """:meth:`run` on a worker thread, for async routes (the event loop never blocks on the
        database)."""
        return await run_in_threadpool(functools.partial(self.run, fn, *args, **kwargs))


def rendered(answer: BaseModel, status_code: int = 200) -> Response:
    """``answer`` as the JSON FastAPI would write for the route's ``response_model``, written
    here on the worker thread: FastAPI then skips validating it again (a second worker-thread
    hop for a sync route) and serializing it. For a hot route whose answer is already the
    response model; the model (and the status codes) stay declared on the route for the OpenAPI
    document."""
    return Response(
        answer.model_dump_json(by_alias=True),
        status_code=status_code,
        media_type="application/json",
    )


def authorization_of(request: Request) -> str | None:
    """The request's one ``Authorization`` header (401 for two or more)."""
    return auth.one_authorization(request.headers.getlist("authorization"))


async def idempotency_key(
    request: Request,
    key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            description="Makes the send safe to repeat: a repeat answers 200 with the original.",
        ),
    ] = None,
) -> str | None:
    """The request's one ``Idempotency-Key`` (422 for two or more: which one would count?)."""
    if len(request.headers.getlist("idempotency-key")) > 1:
        raise Invalid(
            "Send one Idempotency-Key header; this request has several.", field="idempotency_key"
        )
    return key


IdempotencyKey = Annotated[str | None, Depends(idempotency_key)]


async def page_limit(request: Request, limit: str | None = None) -> int:
    """``?limit=``: how many items a page of a list holds, 1 to ``INBOTS_LIST_MAX``; anything
    else (none, out of range, text that is no whole number) is ``INBOTS_LIST_DEFAULT``, never
    an error. Every list route takes it, so the services take a number."""
    settings = request.app.state.settings
    return page_size(whole_number(limit), settings.list_default, settings.list_max)


Limit = Annotated[int, Depends(page_limit)]


async def wait_timeout(request: Request, timeout: str | None = None) -> float:
    """``?timeout=``: how long a long-poll waits, in seconds (:func:`~inbots.deliveries.wait.
    wait_seconds`: out of range is capped, not an error; left out or empty is the default).
    Text that is no number (``abc``, ``nan``) is ``422`` naming ``timeout``: waiting the default
    instead would hide the caller's mistake."""
    if timeout is None or not timeout.strip():
        return wait_seconds(None, request.app.state.settings)
    try:
        seconds = float(timeout)
    except ValueError:
        seconds = math.nan
    if math.isnan(seconds):
        raise Invalid(
            f"timeout must be a number of seconds (got {timeout[:40]!r}); leave it out to wait "
            f"the default {request.app.state.settings.wait_default_seconds:g} s.",
            field="timeout",
        )
    return wait_seconds(seconds, request.app.state.settings)


WaitSeconds = Annotated[float, Depends(wait_timeout)]


def resolve_caller(request: Request, authorization: str | None) -> Caller:
    state = request.app.state
    headers = request.headers

    def session() -> SessionSeen | None:
        return auth.session_seen(
            state.settings, headers.get(auth.SESSION_HEADER), headers.get("user-agent")
        )

    return auth.resolve(state.db, state.dispatch, authorization, session)


_bearer = HTTPBearer(
    auto_error=False,
    description="An agent key (agt_…) or the workspace's operator token (ops_…).",
)


# The dependencies below are async on purpose: FastAPI runs a sync dependency in a worker-thread
# hop of its own, and under an AuthFirstRoute the caller is already resolved (no I/O left here).
async def context(
    request: Request,
    _documented: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Context:
    caller: Caller | None = getattr(request.state, "caller", None)
    if caller is None:
        caller = await run_in_threadpool(resolve_caller, request, authorization_of(request))
    return Context(request, caller)


async def operator_context(ctx: Annotated[Context, Depends(context)]) -> Context:
    ctx.caller.require_operator()
    return ctx


async def agent_context(ctx: Annotated[Context, Depends(context)]) -> Context:
    ctx.caller.require_agent()
    return ctx


Ctx = Annotated[Context, Depends(context)]
OperatorCtx = Annotated[Context, Depends(operator_context)]
AgentCtx = Annotated[Context, Depends(agent_context)]


def _role_of(dependant: Dependant) -> str | None:
    for dep in dependant.dependencies:
        if dep.call is operator_context:
            return "operator"
        if dep.call is agent_context:
            return "agent"
        inner = _role_of(dep)
        if inner:
            return inner
    return None


def _needs_caller(dependant: Dependant) -> bool:
    return any(dep.call is context or _needs_caller(dep) for dep in dependant.dependencies)


class AuthFirstRoute(APIRoute):
    """Resolves the caller (401) and checks its role (403) before FastAPI reads the body, so an
    unauthenticated request with a malformed body gets 401, not 422."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None and (self.methods or set()) & _BODY_METHODS:
            handler = _refusing_a_body(handler)
        if not _needs_caller(self.dependant):
            return handler
        role = _role_of(self.dependant)

        async def authenticated(request: Request) -> Response:
            caller = await run_in_threadpool(resolve_caller, request, authorization_of(request))
            if role == "operator":
                caller.require_operator()
            elif role == "agent":
                caller.require_agent()
            request.state.caller = caller
            return await handler(request)

        return authenticated


_BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


def _refusing_a_body(
    handler: Callable[[Request], Coroutine[Any, Any, Response]],
) -> Callable[[Request], Coroutine[Any, Any, Response]]:
    """A call that takes no body refuses one with fields, as a call with a body refuses a field
    it does not have (422 ``unknown_field``), before it acts: ``{"force": true}`` on ``close``
    must not close the thread as if the flag had been read. Nothing, ``{}`` and ``null`` pass."""

    async def checked(request: Request) -> Response:
        raw = (await request.body()).strip()
        if raw:
            no_body = Invalid("This call takes no body: send none (or {}).")
            try:
                data = json.loads(raw)
            except (ValueError, RecursionError):  # not JSON, or nested too deep to read
                raise no_body from None
            if isinstance(data, dict) and data:
                name = str(next(iter(data)))
                raise UnknownField(
                    f"{name} is not a field of this request; it takes no body "
                    "(send none, or {}).",
                    field=name,
                )
            if data is not None and data != {}:
                raise no_body
        return await handler(request)

    return checked
