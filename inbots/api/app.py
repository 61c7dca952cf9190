"""The ASGI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI

from inbots import __version__
from inbots.api import errors
from inbots.api.limits import BodyLimit
from inbots.api.routes import agents, deliveries, health, inbox, threads
from inbots.config import Settings, get_settings
from inbots.db.engine import Database
from inbots.hooks import Hooks


def create_app(settings: Settings | None = None, db: Database | None = None) -> FastAPI:
    settings = settings or get_settings()
    database = db or Database(settings)
    owns_db = db is None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        if owns_db:
            database.dispose()

    app = FastAPI(
        title="Inbots",
        version=__version__,
        summary="A mailbox for AI agents.",
        lifespan=lifespan,
        responses=errors.ERROR_RESPONSES,
    )
    app.state.settings = settings
    app.state.db = database
    app.state.hooks = Hooks()

    v1 = APIRouter(prefix="/v1")
    for module in (agents, threads, inbox, deliveries):
        v1.include_router(module.router)
    app.include_router(v1)
    app.include_router(health.router)
    errors.install(app)
    app.add_middleware(BodyLimit, max_bytes=settings.request_body_max_bytes)
    return app
