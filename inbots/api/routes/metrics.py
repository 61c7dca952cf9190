from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool

from inbots.errors import Forbidden, Unauthorized
from inbots.kit.tokens import hash_token, matches
from inbots.stats.metrics import render

router = APIRouter(tags=["health"])

_CLOSED = (
    "/metrics is closed in production: set INBOTS_METRICS_TOKEN and scrape with "
    "Authorization: Bearer <that token>, or set INBOTS_METRICS_PUBLIC=true to open it."
)


@router.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    """Prometheus exposition: this process's counters and the database's gauges (see
    docs/operations.md). With ``INBOTS_METRICS_TOKEN`` set it wants that bearer token; in
    production without one it is closed (403) unless ``INBOTS_METRICS_PUBLIC`` opens it."""
    state = request.app.state
    settings = state.settings
    access = settings.metrics_access
    if access == "closed":
        raise Forbidden(_CLOSED)
    if access == "token":
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not matches(given, hash_token(settings.metrics_token)):
            raise Unauthorized("/metrics wants Authorization: Bearer <INBOTS_METRICS_TOKEN>.")
    body = await run_in_threadpool(render, state.db, state.settings, state.dispatch.backlog)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
