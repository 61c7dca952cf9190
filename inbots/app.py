"""The ASGI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.routing import Route

from inbots import __version__, dashboard
from inbots.api import docs as api_docs
from inbots.api.deps import API_PREFIX
from inbots.api.routes import (
    agents,
    alerts,
    approvals,
    attachments,
    deliveries,
    enrollments,
    events,
    health,
    inbox,
    keys,
    limits,
    metrics,
    reservations,
    search,
    stats,
    threads,
    tokens,
    webhooks,
)
from inbots.config import Settings, get_settings
from inbots.db.engine import Database
from inbots.engine import build_dispatch
from inbots.limits import Limits, resolve
from inbots.mcp.endpoint import MCP_PATH, McpEndpoint
from inbots.observability.logs import configure_logging
from inbots.web import errors
from inbots.web.limits import BodyLimit, HeadLimits


def create_app(
    settings: Settings | None = None, db: Database | None = None, *, configure_logs: bool = True
) -> FastAPI:
    settings = settings or get_settings()
    database = db or Database(settings)
    owns_db = db is None

    dispatch = build_dispatch(settings, database)
    mcp = McpEndpoint(database, dispatch, settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if configure_logs:
            configure_logging(settings)  # after uvicorn set its own up, so its lines come too
        dispatch.start()
        try:
            async with mcp.running():
                yield
        finally:
            dispatch.stop()
            if owns_db:
                database.dispose()

    app = FastAPI(
        title="Inbots",
        version=__version__,
        summary="A mailbox for AI agents.",
        lifespan=lifespan,
        responses=errors.ERROR_RESPONSES,
        docs_url=None,  # FastAPI's pages load scripts from a CDN: inbots.api.docs serves them
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.db = database
    app.state.dispatch = dispatch

    # Each router straight under /v1 (one level of inclusion: FastAPI matches a request level by
    # level, each level trying every route of the one below, so a /v1 router around these would
    # have every request tried against every route twice over).
    for module in (
        agents,
        keys,
        enrollments,
        webhooks,
        alerts,
        threads,
        inbox,
        search,
        deliveries,
        events,
        stats,
        limits,
        tokens,
        reservations,
        approvals,
        attachments,
    ):
        app.include_router(module.router, prefix=API_PREFIX)
    app.include_router(health.router)
    if settings.environment != "production":
        api_docs.install(app)  # /docs and /redoc, from installed files (404 in production)
    dashboard.install(app)  # the operator pages at / (see docs/dashboard.md)
    app.include_router(metrics.router)
    app.router.routes.append(Route(MCP_PATH, mcp, include_in_schema=False))  # see docs/mcp.md
    errors.install(app)
    _quote_limits_in_openapi(app, Limits.of(settings))
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.request_body_max_bytes,
        head=HeadLimits.of(settings),
        jsonrpc_paths=(MCP_PATH,),
        html_page=dashboard.too_large_page,
        # The sends (and /mcp, whose send_message takes them too) may carry attachments.
        send_paths=("/v1/messages", "/v1/threads/[^/]+/messages", MCP_PATH),
        send_max_bytes=settings.send_body_max_bytes,
    )
    return app


def _quote_limits_in_openapi(app: FastAPI, limits: Limits) -> None:
    """``/openapi.json`` with this server's limits in every schema and description (the bounds
    that request models declare by name; see :mod:`inbots.limits`)."""
    plain = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = resolve(plain(), limits)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
