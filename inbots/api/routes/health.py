from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text
from starlette.concurrency import run_in_threadpool

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    """The database (and the broker, when one is configured) answers: 200, else 503 naming it."""
    db = request.app.state.db

    def ping() -> None:
        with db.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    down: dict[str, str] = {}
    try:
        await run_in_threadpool(ping)
    except Exception as exc:
        down["database"] = type(exc).__name__
    broker = request.app.state.settings.broker_url
    if broker:

        def ping_broker() -> None:
            import redis

            client = redis.Redis.from_url(broker, socket_timeout=2, socket_connect_timeout=2)
            try:
                client.ping()
            finally:
                client.close()

        try:
            await run_in_threadpool(ping_broker)
        except Exception as exc:
            down["broker"] = type(exc).__name__
    if down:
        return JSONResponse(
            {
                "status": "unavailable",
                "down": down,
                "error": {
                    "code": "unavailable",
                    "message": f"Not ready: {', '.join(down)} unreachable.",
                },
            },
            status_code=503,
        )
    return JSONResponse({"status": "ready"})
