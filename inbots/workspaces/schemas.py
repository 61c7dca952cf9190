from __future__ import annotations

from pydantic import BaseModel

from inbots.kit.schema import Model, Request, Timestamp


class OperatorTokenCreate(Request):
    label: str | None = None


class OperatorTokenRead(Model):
    """An operator token without the token: only its hash is stored."""

    id: str
    label: str | None
    created_at: Timestamp
    last_used_at: Timestamp | None
    revoked_at: Timestamp | None
    current: bool  # the token making this call


class OperatorTokenCreated(Model):
    """A new operator token: ``token`` is shown in this answer only."""

    id: str
    label: str | None
    token: str
    created_at: Timestamp


class OperatorTokenList(BaseModel):
    items: list[OperatorTokenRead]
