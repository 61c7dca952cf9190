"""Pydantic building blocks shared by every domain's schemas."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, PlainSerializer, field_validator

from inbots.kit.clock import rfc3339

Timestamp = Annotated[datetime, PlainSerializer(rfc3339, return_type=str, when_used="json")]


class Model(BaseModel):
    """Response models: built from attributes, serialised with RFC 3339 ``Z`` times."""

    model_config = ConfigDict(from_attributes=True)


def storable(value: object) -> bool:
    """Whether every string inside ``value`` can be stored: no NUL, no unpaired surrogate."""
    if isinstance(value, str):
        if "\x00" in value:
            return False
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, list | tuple):
        return all(storable(v) for v in value)
    return True


class Request(BaseModel):
    """Request bodies: types are checked here, limits (which are settings) in the services."""

    model_config = ConfigDict(extra="ignore", strict=False)

    @field_validator("*")
    @classmethod
    def _storable_text(cls, value: object) -> object:
        if not storable(value):
            raise ValueError("must not contain NUL characters or unpaired surrogates")
        return value


def choice(*values: str) -> dict[str, Any]:
    """``json_schema_extra`` naming a text field's allowed values (checked by the services, with
    their sentences; the schema only tells a client beforehand)."""
    return {"enum": [*values, None]}
