"""Pydantic building blocks shared by every domain's schemas, and the one wording of a request
pydantic refused (:func:`refusal`) for every edge: the HTTP API, the MCP tools, the dashboard."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, ClassVar, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    PlainSerializer,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from inbots.errors import Invalid, UnknownField
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


UNKNOWN_FIELD = "unknown_field"  # the pydantic error type (and the API's error code)


class Request(BaseModel):
    """Request bodies: types are checked here, limits (which are settings) in the services.

    A field the model does not have is refused, not dropped (a misspelt ``priorty`` must not be
    accepted and lost): the error names it and the fields the request takes."""

    model_config = ConfigDict(extra="forbid", strict=False)
    # Whether a number may come as text ("300"): not over HTTP, where a JSON number is a number
    # (product.md: a wrong type is its own error); yes for MCP tool arguments, which some
    # harnesses send as text (inbots.mcp.arguments).
    numbers_from_text: ClassVar[bool] = False

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: object) -> object:
        if isinstance(data, dict):
            takes = [f.alias or name for name, f in cls.model_fields.items()]
            unknown = [k for k in data if k not in takes and k not in cls.model_fields]
            if unknown:
                raise PydanticCustomError(
                    UNKNOWN_FIELD,
                    "{name} is not a field of this request; it takes {takes}.",
                    {"name": str(unknown[0]), "takes": ", ".join(takes) or "no fields"},
                )
        return data

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: object, info: ValidationInfo) -> object:
        # Lax pydantic reads true as 1: "ttl_seconds": true would pass as one second; and "300"
        # as 300, a string where the contract says a number.
        if isinstance(value, bool | str) and info.field_name is not None:
            kinds = _kinds(cls.model_fields[info.field_name].annotation)
            numeric = bool(kinds & {int, float})
            if isinstance(value, bool) and bool not in kinds and numeric:
                raise ValueError("must be a number, not true or false")
            text_for_a_number = isinstance(value, str) and str not in kinds and numeric
            if text_for_a_number and not cls.numbers_from_text:
                raise ValueError(f"must be a number, not text (send {value!r} without quotes)")
        return value

    @field_validator("*")
    @classmethod
    def _storable_text(cls, value: object) -> object:
        if not storable(value):
            raise ValueError("must not contain NUL characters or unpaired surrogates")
        return value


def _kinds(annotation: object) -> set[object]:
    """The types a field's annotation admits (``int | None`` -> {int, NoneType})."""
    return set(get_args(annotation)) or {annotation}


def choice(*values: str) -> dict[str, Any]:
    """``json_schema_extra`` naming a text field's allowed values (checked by the services, with
    their sentences; the schema only tells a client beforehand)."""
    return {"enum": [*values, None]}


def refusal(error: Mapping[str, Any]) -> Invalid:
    """One pydantic error (an item of ``ValidationError.errors()``, its ``loc`` inside the request
    model) as the API's 422: ``<path> is required.`` or ``<path>: <what pydantic says>.``, naming
    the top field; a field the request does not have is :class:`UnknownField` naming it.

    The one wording of a refused request: the HTTP API (:mod:`inbots.web.errors`, once it has
    dropped where in the request the error is), the MCP tools' arguments and the dashboard's
    forms all say it this way."""
    loc = [str(part) for part in error.get("loc") or ()]
    path = ".".join(loc)
    field = loc[0] if loc else None
    kind = error.get("type", "")
    msg = str(error.get("msg") or "is invalid")
    if kind in (UNKNOWN_FIELD, "extra_forbidden"):
        name = str((error.get("ctx") or {}).get("name") or path)
        if kind == UNKNOWN_FIELD:
            return UnknownField(msg, field=name or None)
        return UnknownField(f"{name} is not a field of this request.", field=name or None)
    if kind == "missing":
        return Invalid(f"{path} is required.", field=field)
    said = msg[:1].lower() + msg[1:]
    return Invalid(f"{path}: {said}." if path else f"{msg}.", field=field)
