"""``/healthz`` (the process is up) and ``/readyz`` (it can serve: the database answers).

Neither queues behind other requests: ``/healthz`` answers on the event loop, and ``/readyz``'s
checks run on threads of their own (:data:`CHECKS`), not the pool that sends and listings share,
so a pool filled by slow requests cannot make a healthy process look unready.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from inbots.config import Settings
from inbots.db.engine import Database
from inbots.db.outage import outage
from inbots.dispatch.breaker import Breaker
from inbots.dispatch.broker import BrokerState, broker_state
from inbots.errors import ServiceUnavailable

router = APIRouter(tags=["health"])

# The readiness checks' own threads: anyio's default limiter is the one every sync route shares.
CHECKS = anyio.CapacityLimiter(8)


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


async def _broker(settings: Settings, breaker: Breaker | None) -> BrokerState:
    """The broker's state: ``down`` at once while this process's breaker holds it so."""
    if breaker is not None and breaker.is_open:
        return "down"
    return await anyio.to_thread.run_sync(broker_state, settings, limiter=CHECKS)


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    """Ready when this process can serve, which needs the database: ``200 {"status": "ready",
    "database": "up", "broker": …}``, else ``503`` with the error envelope and ``Retry-After``.

    ``broker`` is ``up``, ``down`` or ``embedded`` and never fails readiness: a send is stored
    whatever the broker does, and the renotify sweep publishes it once the broker is back."""
    state = request.app.state
    down, broker = await asyncio.gather(
        database_problem(state.db, state.settings),
        _broker(state.settings, state.dispatch.breaker),
    )
    body: dict[str, Any] = {
        "status": "ready" if down is None else "unavailable",
        "database": "up" if down is None else "down",
        "broker": broker,
    }
    if down is None:
        return JSONResponse(body)
    return JSONResponse(
        {**body, "error": down.to_dict()},
        status_code=down.status,
        headers={"Retry-After": str(down.retry_after)},
    )


async def database_problem(db: Database, settings: Settings) -> ServiceUnavailable | None:
    """``None`` if the database answers ``SELECT 1`` within the connect timeout, else why not.

    The deadline holds even when a pooled connection hangs (a frozen server whose kernel still
    takes the bytes, which no timeout of the connection notices): the check's thread is left to
    finish on its own, and the answer goes out on time."""

    def ping() -> None:
        # Read-only: on SQLite it must not queue for the write lock behind a long writer.
        with db.engine.execution_options(inbots_readonly=True).connect() as conn:
            conn.execute(text("SELECT 1"))

    deadline = settings.db_connect_timeout_seconds + 1  # past the connect timeout's own answer
    try:
        with anyio.fail_after(deadline):
            await anyio.to_thread.run_sync(ping, abandon_on_cancel=True, limiter=CHECKS)
    except TimeoutError:
        return ServiceUnavailable(
            f"The database did not answer within {deadline:g} s; this process is not ready. "
            "Check the database server and the network to it."
        )
    except Exception as exc:
        return outage(exc, settings) or ServiceUnavailable(
            f"The database could not be used ({type(exc).__name__}); this process is not ready."
        )
    return None


# HEAD too, left out of /openapi.json (one operation per path is documented): load balancers and
# uptime checks often probe with it, and get the same status without a body.
router.add_api_route("/healthz", healthz, methods=["HEAD"], include_in_schema=False)
router.add_api_route("/readyz", readyz, methods=["HEAD"], include_in_schema=False)
