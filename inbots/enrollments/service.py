"""Enrolment tokens and self-registration.

The operator creates a token (``enr_…``, shown once, stored hashed) good for some uses until it
expires; an agent registers itself with it (``POST /v1/register``, ``inbots mcp --enroll``) and
gets what ``POST /v1/agents`` answers. A use is spent by one conditional UPDATE in the
registration's transaction: two registrations racing for the last use cannot both have it (the
second waits for the first's row lock, then finds no use left), and a registration that fails
afterwards (the name taken) rolls its use back.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlalchemy import select, update

from inbots.agents.schemas import AgentCreated
from inbots.agents.service import create_agent
from inbots.caller import Caller
from inbots.config import plain_number
from inbots.db.uow import UnitOfWork, reads
from inbots.enrollments.schemas import (
    EnrollmentCreate,
    EnrollmentCreated,
    EnrollmentRead,
    RegisterRequest,
)
from inbots.errors import EnrollmentInvalid, Invalid, NotFound
from inbots.kit import tokens
from inbots.kit.clock import utcnow
from inbots.kit.ids import new_id
from inbots.models.enrollments import Enrollment

log = logging.getLogger(__name__)

LABEL_MAX = 100
ACTIVE, SPENT, EXPIRED, REVOKED = "active", "spent", "expired", "revoked"

_INVALID = (
    "This enrolment token is unknown, spent, revoked or expired; ask the workspace's operator "
    "for a new one (POST /v1/enrollments, inbots enroll) and register with it."
)


def state_of(row: Enrollment, now: datetime) -> str:
    if row.revoked_at is not None:
        return REVOKED
    if row.uses_left <= 0:
        return SPENT
    if row.expires_at <= now:
        return EXPIRED
    return ACTIVE


def _read(row: Enrollment, now: datetime) -> EnrollmentRead:
    return EnrollmentRead(
        id=row.id,
        label=row.label,
        uses=row.uses,
        uses_left=row.uses_left,
        created_at=row.created_at,
        expires_at=row.expires_at,
        last_used_at=row.last_used_at,
        revoked_at=row.revoked_at,
        state=state_of(row, now),
    )


def create_enrollment(
    uow: UnitOfWork, caller: Caller, request: EnrollmentCreate
) -> EnrollmentCreated:
    """Create an enrolment token for the caller's workspace. The token is in this answer only;
    ``uses`` defaults to 1, ``expires_in`` to
    ``INBOTS_ENROLLMENT_EXPIRES_IN_DEFAULT`` (a day)."""
    caller.require_operator()
    settings = uow.settings
    uses = 1 if request.uses is None else request.uses
    if not 1 <= uses <= settings.enrollment_uses_max:
        raise Invalid(
            f"uses: from 1 to {settings.enrollment_uses_max} registrations (got {uses}).",
            field="uses",
        )
    expires_in = (
        settings.enrollment_expires_in_default if request.expires_in is None else request.expires_in
    )
    if not 0 < expires_in <= settings.enrollment_expires_in_max:
        raise Invalid(
            f"expires_in: seconds until the token expires, more than 0 and at most "
            f"{plain_number(settings.enrollment_expires_in_max)} (got {plain_number(expires_in)}).",
            field="expires_in",
        )
    label = (request.label or "").strip() or None
    if label is not None and (len(label) > LABEL_MAX or not label.isprintable()):
        raise Invalid(
            f"label: at most {LABEL_MAX} printable characters on one line.", field="label"
        )
    token = tokens.mint(tokens.ENROLLMENT_TOKEN_PREFIX)
    now = utcnow()
    row = Enrollment(
        id=new_id("enl"),
        workspace_id=caller.workspace_id,
        token_hash=tokens.hash_token(token),
        label=label,
        uses=uses,
        uses_left=uses,
        created_at=now,
        expires_at=now + timedelta(seconds=expires_in),
    )
    uow.session.add(row)
    uow.session.flush()
    log.info("enrolment token created", extra={"enrollment_id": row.id, "uses": uses})
    return EnrollmentCreated(
        id=row.id, token=token, uses=uses, expires_at=row.expires_at, label=label
    )


@reads
def list_enrollments(uow: UnitOfWork, caller: Caller) -> list[EnrollmentRead]:
    """The workspace's enrolment tokens, newest first, spent, expired and revoked ones
    included; never the token itself."""
    caller.require_operator()
    rows = uow.session.scalars(
        select(Enrollment)
        .where(Enrollment.workspace_id == caller.workspace_id)
        .order_by(Enrollment.id.desc())
        .limit(uow.settings.list_max)
    ).all()
    now = utcnow()
    return [_read(row, now) for row in rows]


def revoke_enrollment(uow: UnitOfWork, caller: Caller, enrollment_id: str) -> None:
    """Revoke an enrolment token: nobody registers with it any more (agents that did keep
    their keys). Revoking a revoked token changes nothing."""
    caller.require_operator()
    row = uow.session.scalars(
        select(Enrollment).where(
            Enrollment.id == enrollment_id, Enrollment.workspace_id == caller.workspace_id
        )
    ).first()
    if row is None:
        raise NotFound(
            f"No enrolment token with id {enrollment_id!r} was found; ids look like enl_…, and "
            "GET /v1/enrollments (inbots enroll list) lists them."
        )
    if row.revoked_at is None:
        row.revoked_at = utcnow()
        uow.session.flush()
        log.info("enrolment token revoked", extra={"enrollment_id": row.id})


def register(uow: UnitOfWork, request: RegisterRequest) -> AgentCreated:
    """Register an agent with an enrolment token, spending one of its uses: the answer is
    ``POST /v1/agents``'s (the key shown once). 401 ``enrollment_invalid`` for a token that is
    unknown, spent, revoked or expired; 409 ``username_taken`` (and no use spent) for a name
    that is taken."""
    token = request.enrollment_token.strip()
    if not tokens.looks_like(token, tokens.ENROLLMENT_TOKEN_PREFIX):
        raise EnrollmentInvalid(_INVALID, field="enrollment_token")
    row = uow.session.scalars(
        select(Enrollment).where(Enrollment.token_hash == tokens.hash_token(token))
    ).first()
    now = utcnow()
    if row is None or not tokens.matches(token, row.token_hash) or state_of(row, now) != ACTIVE:
        raise EnrollmentInvalid(_INVALID, field="enrollment_token")
    enrollment_id = row.id

    def spend() -> None:
        result = uow.session.execute(
            update(Enrollment)
            .where(
                Enrollment.id == enrollment_id,
                Enrollment.uses_left > 0,
                Enrollment.revoked_at.is_(None),
                Enrollment.expires_at > now,
            )
            .values(uses_left=Enrollment.uses_left - 1, last_used_at=now)
            .execution_options(synchronize_session=False)
        )
        if getattr(result, "rowcount", 0) != 1:
            raise EnrollmentInvalid(_INVALID, field="enrollment_token")

    created = create_agent(
        uow,
        row.workspace_id,
        request.name,
        request.description,
        request.webhook_url,
        before_insert=spend,
    )
    log.info(
        "agent registered itself",
        extra={"enrollment_id": enrollment_id, "agent_id": created.id},
    )
    return created
