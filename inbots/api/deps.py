"""Dependencies. A request's caller is resolved once, on the worker thread its endpoint runs on
(one thread hop a request), and before anything else is said of the request: an unknown caller
gets 401 (a wrong role 403) even when its body is also wrong (see :class:`AuthFirstRoute`)."""

from __future__ import annotations

import functools
import inspect
import json
import math
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import Annotated, Any, Concatenate, ParamSpec, TypeVar

from fastapi import APIRouter, Depends, Header, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.routing import Match
from starlette.types import Scope

from inbots.auth import service as auth
from inbots.caller import Caller, SessionSeen
from inbots.db.uow import UnitOfWork, one_session, run_unit
from inbots.deliveries.wait import wait_seconds
from inbots.errors import Invalid, UnknownField
from inbots.kit.paging import page_size, whole_number

T = TypeVar("T")
P = ParamSpec("P")


class PendingCaller:
    """One request's caller, resolved on first use (401; 403 for the wrong role), once."""

    def __init__(self, request: Request, role: str | None) -> None:
        self._request = request
        self._role = role
        self._caller: Caller | None = None
        self.tried = False

    def get(self) -> Caller:
        """The caller; touches the database the first time, so call it on a worker thread."""
        if self._caller is None:
            self.tried = True
            caller = resolve_caller(self._request, authorization_of(self._request))
            if self._role == "operator":
                caller.require_operator()
            elif self._role == "agent":
                caller.require_agent()
            self._caller = caller
        return self._caller


# The request's PendingCaller, for its endpoint's worker thread (anyio copies the context there).
_PENDING: ContextVar[PendingCaller | None] = ContextVar("inbots_pending_caller", default=None)


class Context:
    """A request, its caller and a way to run one service call in its own unit of work."""

    def __init__(self, request: Request, caller: PendingCaller) -> None:
        self.request = request
        self._caller = caller

    @property
    def caller(self) -> Caller:
        return self._caller.get()

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
# hop of its own. None of them touches the database: the caller is resolved by AuthFirstRoute.
async def context(
    request: Request,
    _documented: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Context:
    pending = _PENDING.get()
    assert pending is not None, "a route with a caller is an AuthFirstRoute"
    return Context(request, pending)


async def operator_context(ctx: Annotated[Context, Depends(context)]) -> Context:
    """The operator's context (AuthFirstRoute checks the role as it resolves the caller)."""
    return ctx


async def agent_context(ctx: Annotated[Context, Depends(context)]) -> Context:
    """An agent's context (AuthFirstRoute checks the role as it resolves the caller)."""
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
    """Resolves the caller (401) and checks its role (403) before anything else is said of the
    request, so an unauthenticated request with a malformed body gets 401, not 422.

    A sync endpoint resolves it on its own worker thread, just before it runs (one thread hop a
    request: a hop costs more CPU than the lookup); an async one, on a worker thread before it
    runs. A request refused before its endpoint ran (a body, a query value) resolves it first,
    so that refusal is only told to a known caller of the right role."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        if not inspect.iscoroutinefunction(endpoint):
            endpoint = _resolving_first(endpoint)
        super().__init__(path, endpoint, **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        needs_caller = _needs_caller(self.dependant)
        resolve_first = inspect.iscoroutinefunction(self.endpoint)
        handler = super().get_route_handler()
        if self.body_field is None and (self.methods or set()) & _BODY_METHODS:
            handler = _refusing_a_body(handler)
        if not needs_caller:
            return handler
        role = _role_of(self.dependant)

        async def authenticated(request: Request) -> Response:
            pending = PendingCaller(request, role)
            token = _PENDING.set(pending)
            try:
                if resolve_first:
                    await run_in_threadpool(pending.get)
                return await handler(request)
            except Exception:
                if not pending.tried:  # refused before its endpoint ran: the caller comes first
                    await run_in_threadpool(pending.get)
                raise
            finally:
                _PENDING.reset(token)

        return authenticated


def _resolving_first(endpoint: Callable[..., Any]) -> Callable[..., Any]:
    """A sync ``endpoint`` that first resolves its request's caller (if it has one), on the
    worker thread it runs on. FastAPI reads the signature through ``__wrapped__``."""

    @functools.wraps(endpoint)
    def call(*args: Any, **values: Any) -> Any:
        pending = _PENDING.get()
        with one_session():  # the lookup's session serves the endpoint's first unit
            if pending is not None:
                pending.get()
            return endpoint(*args, **values)

    return call


_BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}

API_PREFIX = "/v1"  # where every ApiRouter is mounted (inbots.app)


class ApiRouter(APIRouter):
    """The routes of one part of the API (AuthFirstRoute by default), mounted under
    :data:`API_PREFIX`. It turns a request away at once when no route of its can match the path
    (by its first segment after the prefix): FastAPI asks each router of the app in turn, and a
    router answers by trying its every route, so without this a request was tried against the
    routes of every router mounted before its own."""

    def __init__(self, **options: Any) -> None:
        options.setdefault("route_class", AuthFirstRoute)
        super().__init__(**options)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        heads = self._heads()
        if heads is not None:
            path = scope.get("path", "")
            if not path.startswith(API_PREFIX + "/"):
                return Match.NONE, {}
            if path[len(API_PREFIX) + 1 :].partition("/")[0] not in heads:
                return Match.NONE, {}
        return super().matches(scope)

    def _heads(self) -> frozenset[str] | None:
        """The first path segment of each route (None: some route's is a path parameter),
        worked out again only when routes were added (they are never taken away)."""
        if getattr(self, "_heads_of", -1) != len(self.routes):
            paths = [getattr(route, "path", "") for route in self.routes]
            firsts = {path.lstrip("/").partition("/")[0] for path in paths}
            self._heads_of = len(paths)
            self._head_set = None if any("{" in first for first in firsts) else frozenset(firsts)
        return self._head_set


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
