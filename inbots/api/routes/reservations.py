"""Reservations (``/v1/reservations``): advisory leases on repository paths; see
:mod:`inbots.reservations.service`."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from inbots.api.deps import AgentCtx, ApiRouter, Ctx, Limit
from inbots.reservations import service
from inbots.reservations.schemas import (
    ConflictList,
    ReservationCheck,
    ReservationCreate,
    ReservationPage,
    ReservationRead,
    ReservationRenew,
    ReservationResult,
)
from inbots.web.errors import RATE_LIMITED, ErrorEnvelope

router = ApiRouter(tags=["reservations"])

CONFLICT = {
    "model": ErrorEnvelope,
    "description": "reservation_conflict: a path overlaps another agent's reservation; nothing "
    "reserved. Beside error, conflicts: [{path, held_by, pattern, reservation_id, expires_at, "
    "reason}]",
}


@router.post(
    "/reservations",
    status_code=201,
    response_model=ReservationResult,
    responses={409: CONFLICT, 429: RATE_LIMITED},
)
def reserve(ctx: AgentCtx, body: ReservationCreate) -> ReservationResult | JSONResponse:
    """Reserve paths or globs until now + ``ttl_seconds``. Overlapping another agent's active
    reservation is 409 reservation_conflict naming each holder; overlapping your own extends it."""
    result = ctx.run(service.reserve, body)
    if result.conflicts:
        body_ = {
            "error": service.ReservationConflict(result.conflicts).to_dict(),
            "conflicts": [c.model_dump(mode="json") for c in result.conflicts],
        }
        return JSONResponse(body_, status_code=409)
    return result


@router.get("/reservations", response_model=ReservationPage)
def list_reservations(
    ctx: Ctx,
    limit: Limit,
    agent: str | None = None,
    path: str | None = None,
    active: bool | None = None,
    cursor: str | None = None,
) -> ReservationPage:
    """The workspace's reservations, newest first, by holder (``agent``), those that would
    conflict with ``path``, and ``active`` (true: held now; false: released or expired)."""
    return ctx.run(
        service.list_reservations, agent=agent, path=path, active=active, limit=limit, cursor=cursor
    )


@router.post("/reservations/check", response_model=ConflictList)
def check_reservations(ctx: Ctx, body: ReservationCheck) -> ConflictList:
    """Which of ``paths`` other agents hold with an active exclusive reservation (read-only)."""
    return ctx.run(service.check, body)


@router.post(
    "/reservations/{reservation_id}/renew",
    response_model=ReservationRead,
    responses={429: RATE_LIMITED},
)
def renew_reservation(
    ctx: AgentCtx, reservation_id: str, body: ReservationRenew | None = None
) -> ReservationRead:
    """Extend your active reservation to now + ``ttl_seconds`` (409 not_active once it ended)."""
    return ctx.run(service.renew, reservation_id, body or ReservationRenew())


@router.delete("/reservations/{reservation_id}", response_model=ReservationRead)
def release_reservation(
    ctx: Ctx, reservation_id: str, reason: str | None = None
) -> ReservationRead:
    """Release a reservation: its holder, or the operator (``reason`` recorded)."""
    return ctx.run(service.release, reservation_id, reason)
