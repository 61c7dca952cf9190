"""Pydantic building blocks shared by every domain's schemas."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, PlainSerializer

from inbots.kit.clock import rfc3339

Timestamp = Annotated[datetime, PlainSerializer(rfc3339, return_type=str, when_used="json")]


class Model(BaseModel):
    """Response models: built from attributes, serialised with RFC 3339 ``Z`` times."""

    model_config = ConfigDict(from_attributes=True)


class Request(BaseModel):
    """Request bodies: types are checked here, limits (which are settings) in the services."""

    model_config = ConfigDict(extra="ignore", strict=False)
