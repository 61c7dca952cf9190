from __future__ import annotations

from inbots.api.deps import ApiRouter, OperatorCtx
from inbots.stats import service
from inbots.stats.schemas import Stats

router = ApiRouter(tags=["stats"])


@router.get("/stats", response_model=Stats)
def get_stats(ctx: OperatorCtx) -> Stats:
    """Deliveries by derived state, agents active and never connected, threads by status, the
    oldest stalled delivery's age, the failures of the last hour and the jobs waiting for a
    worker."""
    return ctx.run(service.get_stats, ctx.request.app.state.dispatch.backlog())
