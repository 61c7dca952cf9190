from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool

from inbots.errors import Unauthorized
from inbots.kit.tokens import hash_token, matches
from inbots.observability.metrics import render

router = APIRouter(tags=["health"])


@router.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    """Prometheus exposition: this process's counters and the database's gauges (see
    docs/operations.md). With ``INBOTS_METRICS_TOKEN`` set, it wants that bearer token."""
    state = request.app.state
    wanted = state.settings.metrics_token
    if wanted:
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not matches(given, hash_token(wanted)):
            raise Unauthorized("/metrics wants Authorization: Bearer <INBOTS_METRICS_TOKEN>.")
    body = await run_in_threadpool(render, state.db, state.settings)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
