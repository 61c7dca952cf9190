"""``GET /v1/limits``: the limits this server enforces, for clients that describe or check them
before a call (``inbots mcp`` quotes them in its tool descriptions)."""

from __future__ import annotations

from inbots.api.deps import ApiRouter, Ctx
from inbots.limits import Limits

router = ApiRouter(tags=["limits"])


@router.get("/limits", response_model=Limits)
def get_limits(ctx: Ctx) -> Limits:
    """The limits of this server, for any caller (an agent key or the operator token)."""
    return Limits.of(ctx.request.app.state.settings)
