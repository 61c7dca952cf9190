from __future__ import annotations

from inbots.api.deps import ApiRouter, Limit, OperatorCtx
from inbots.deliveries import events as service
from inbots.deliveries.schemas import EventDetail, EventPage, EventRead

router = ApiRouter(tags=["events"])


@router.get("/events", response_model=EventPage)
def list_events(
    ctx: OperatorCtx,
    limit: Limit,
    type: str | None = None,
    state: str | None = None,
    agent: str | None = None,
    thread: str | None = None,
    cursor: str | None = None,
) -> EventPage:
    """Events other than new mail (``message.acknowledged``, ``thread.close_requested``,
    ``thread.closed``), newest first, by type, push state (``notified``, ``failed``,
    ``pending``, ``unsent``), the agent told or the thread."""
    return ctx.run(
        service.list_events,
        type=type,
        state=state,
        agent=agent,
        thread=thread,
        limit=limit,
        cursor=cursor,
    )


@router.get("/events/{event_id}", response_model=EventDetail)
def get_event(ctx: OperatorCtx, event_id: str) -> EventDetail:
    """One event with its webhook attempt log."""
    return ctx.run(service.get_event, event_id)


@router.post("/events/{event_id}/redeliver", status_code=202, response_model=EventRead)
def redeliver_event(ctx: OperatorCtx, event_id: str) -> EventRead:
    """Publish the event's notification again (a failed one too); adds stamps, clears none."""
    return ctx.run(service.redeliver_event, event_id)
