from __future__ import annotations

from pydantic import BaseModel, Field

from inbots.kit.schema import Model, Request, Timestamp
from inbots.limits import bounds


class EnrollmentCreate(Request):
    uses: int | None = Field(
        default=None,
        description="How many agents may register with the token: 1 to {enrollment_uses_max} "
        "(default 1).",
        json_schema_extra=bounds(minimum=1, maximum="enrollment_uses_max"),
    )
    expires_in: float | None = Field(
        default=None,
        description="Seconds until the token expires: up to {enrollment_expires_in_max} "
        "(default 86400, a day).",
        json_schema_extra=bounds(maximum="enrollment_expires_in_max"),
    )
    label: str | None = Field(
        default=None, description="What the token is for (shown in lists), at most 100 characters."
    )


class EnrollmentCreated(Model):
    """A new enrolment token: ``token`` is shown in this answer only."""

    id: str
    token: str
    uses: int
    expires_at: Timestamp
    label: str | None


class EnrollmentRead(Model):
    """An enrolment token without the token. ``state``: ``active``, ``spent`` (no uses left),
    ``expired`` or ``revoked``."""

    id: str
    label: str | None
    uses: int
    uses_left: int
    created_at: Timestamp
    expires_at: Timestamp
    last_used_at: Timestamp | None
    revoked_at: Timestamp | None
    state: str


class EnrollmentList(BaseModel):
    items: list[EnrollmentRead]


class RegisterRequest(Request):
    enrollment_token: str = Field(description="The enrolment token the operator gave (enr_…).")
    name: str = Field(description="The agent's username: 3 to 32 lowercase letters, digits or -.")
    description: str | None = None
    webhook_url: str | None = None
