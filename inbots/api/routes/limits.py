"""``GET /v1/limits``: the limits this server enforces, for clients that describe or check them
before a call (``inbots mcp`` quotes them in its tool descriptions)."""

from __future__ import annotations

from fastapi import APIRouter

from inbots.api.deps import AuthFirstRoute, Ctx
from inbots.kit.schema import Model

router = APIRouter(tags=["limits"], route_class=AuthFirstRoute)


class Limits(Model):
    """Each field is the setting of the same name (``INBOTS_<NAME>``); see product.md, "Limits"."""

    message_body_max: int  # characters
    summary_required_over: int  # a body longer than this needs a summary
    summary_max: int
    thread_title_max: int
    thread_goal_max: int
    description_max: int
    note_max: int
    idempotency_key_max: int
    ack_batch_max: int
    request_body_max_bytes: int
    list_default: int
    list_max: int
    check_inbox_default: int
    check_inbox_max: int
    wait_default_seconds: float
    wait_max_seconds: float


@router.get("/limits", response_model=Limits)
def get_limits(ctx: Ctx) -> Limits:
    """The limits of this server, for any caller (an agent key or the operator token)."""
    settings = ctx.request.app.state.settings
    return Limits(**{name: getattr(settings, name) for name in Limits.model_fields})
