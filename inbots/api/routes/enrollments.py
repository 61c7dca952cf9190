"""Enrolment tokens (operator only) and self-registration with one (no other auth)."""

from __future__ import annotations

from fastapi import Request, Response

from inbots.agents.schemas import AgentCreated
from inbots.api.deps import ApiRouter, OperatorCtx
from inbots.db.uow import run_unit
from inbots.enrollments import service
from inbots.enrollments.schemas import (
    EnrollmentCreate,
    EnrollmentCreated,
    EnrollmentList,
    RegisterRequest,
)

router = ApiRouter(tags=["enrollments"])


@router.post("/enrollments", status_code=201, response_model=EnrollmentCreated)
def create_enrollment(ctx: OperatorCtx, body: EnrollmentCreate | None = None) -> EnrollmentCreated:
    """Create an enrolment token: agents register themselves with it (POST /v1/register). The
    token is shown this once."""
    return ctx.run(service.create_enrollment, body or EnrollmentCreate())


@router.get("/enrollments", response_model=EnrollmentList)
def list_enrollments(ctx: OperatorCtx) -> EnrollmentList:
    """The workspace's enrolment tokens with their uses left and state; never the token."""
    return EnrollmentList(items=ctx.run(service.list_enrollments))


@router.delete("/enrollments/{enrollment_id}", status_code=204)
def revoke_enrollment(ctx: OperatorCtx, enrollment_id: str) -> Response:
    """Revoke an enrolment token: nobody registers with it any more."""
    ctx.run(service.revoke_enrollment, enrollment_id)
    return Response(status_code=204)


@router.post("/register", status_code=201, response_model=AgentCreated)
def register(request: Request, body: RegisterRequest) -> AgentCreated:
    """Register an agent with an enrolment token (no other authentication). Answers as
    POST /v1/agents does: the API key is shown this once."""
    state = request.app.state
    return run_unit(state.db, state.dispatch, service.register, body)
