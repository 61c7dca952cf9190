"""One error envelope for every non-2xx answer: ``{"error": {"code", "message", "field"?}}``."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import DataError, DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from inbots.db.outage import outage
from inbots.errors import InbotsError
from inbots.kit.schema import UNKNOWN_FIELD, refusal

log = logging.getLogger(__name__)


class ErrorBody(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorEnvelope(BaseModel):
    error: ErrorBody


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorEnvelope, "description": text}
    for code, text in {
        401: "Missing, malformed or unknown token",
        403: "The token's caller may not use this endpoint",
        404: "Not found (or not visible to the caller)",
        409: "Business conflict",
        413: "Request body too large",
        422: "Validation error naming the field, or a body that is not JSON (invalid_json)",
        429: "An agent's write over its rate limit, or a request on a session it was not seen "
        "through before (rate_limited, with Retry-After); nothing of it was stored",
        503: "The database cannot answer now (service_unavailable, with Retry-After)",
    }.items()
}

# A send's own refusal (the caps and the rate limit), for the send routes' documentation.
RATE_LIMITED: dict[str, Any] = {
    "model": ErrorEnvelope,
    "description": "The sender's rate limit, or a cap of every recipient, refuses the send "
    "(rate_limited, with Retry-After); nothing of it was stored",
}

# The recipient's own reads and stamps of a delivery whose message's ttl_seconds passed.
EXPIRED: dict[int | str, dict[str, Any]] = {
    410: {
        "model": ErrorEnvelope,
        "description": "The message's ttl_seconds passed before it was acknowledged (expired)",
    }
}

_STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
}


def envelope(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        body["field"] = field
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def error_response(exc: InbotsError) -> JSONResponse:
    """An :class:`InbotsError` in the envelope, with ``Retry-After`` when it has one."""
    headers = None if exc.retry_after is None else {"Retry-After": str(exc.retry_after)}
    return envelope(exc.status, exc.code, exc.message, exc.field, headers=headers)


_SOURCES = ("body", "query", "path", "header", "cookie")


def _parts(loc: tuple[Any, ...]) -> list[str]:
    """The location inside the request: drop only the leading source ("body", "query", …)."""
    rest = loc[1:] if loc and loc[0] in _SOURCES else loc
    return [str(p) for p in rest]


def _not_json(err: dict[str, Any]) -> str:
    """A body FastAPI's JSON parser refused (``json_invalid``): where and why, and what to send."""
    loc = tuple(err.get("loc") or ())
    what = str((err.get("ctx") or {}).get("error") or "")
    at = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else None
    detail = what[:1].lower() + what[1:]
    if detail and at is not None:
        detail = f"{detail} at character {at}"
    return (
        "The request body is not valid JSON"
        + (f" ({detail})" if detail else "")
        + '; send one JSON object, like {"body": "hello"}.'
    )


def _validation_error(err: dict[str, Any], content_type: str | None) -> JSONResponse:
    """The first error FastAPI's validation found, in the envelope: a body that is not JSON (or
    not a JSON object) said here; an error inside the request worded by :func:`refusal`, as the
    MCP tools and the dashboard word it."""
    kind = err.get("type", "")
    parts = _parts(tuple(err.get("loc") or ()))
    if kind == UNKNOWN_FIELD:
        return error_response(refusal({**err, "loc": parts}))
    if kind == "json_invalid" or not parts:
        if kind != "missing" and not _says_json(content_type):
            # FastAPI reads a body of another type as bytes, which no request model takes.
            message = _not_json_type(content_type)
        elif kind == "json_invalid":
            message = _not_json(err)
        elif kind == "missing":
            message = "A JSON request body is required."
        else:
            message = "The request body must be a JSON object."
        return envelope(
            422, "invalid_json" if kind == "json_invalid" else "validation_error", message
        )
    refused = refusal({**err, "loc": parts})
    if refused.field is not None and refused.field.lower() == "idempotency-key":
        refused.field = "idempotency_key"  # the header, named as the MCP argument is
    return error_response(refused)


def _says_json(content_type: str | None) -> bool:
    """Whether a Content-Type is one FastAPI parses as JSON (``application/json``, or any
    ``application/…+json``)."""
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


def _not_json_type(content_type: str | None) -> str:
    said = f"says {content_type.split(';', 1)[0].strip()!r}" if content_type else "is missing"
    return (
        "The request body must be JSON sent with Content-Type: application/json (this "
        f"request's Content-Type {said})."
    )


def _unreadable_body(exc: StarletteHTTPException) -> JSONResponse | None:
    """FastAPI's one "error parsing the body" (400) for every body it could not decode, told
    apart by its cause: bytes that are not UTF-8, JSON nested deeper than Python's parser goes,
    or a form it could not read."""
    if exc.status_code != 400 or exc.__cause__ is None:
        return None
    cause = exc.__cause__
    if isinstance(cause, UnicodeDecodeError):
        return envelope(
            422,
            "invalid_json",
            f"The request body is not UTF-8 text (byte {cause.start} is not); send JSON "
            "encoded as UTF-8.",
        )
    if isinstance(cause, RecursionError):
        return envelope(
            422,
            "invalid_json",
            "The request body's JSON nests arrays or objects too deeply to read; send a flatter "
            "document (no request needs more than a few levels).",
        )
    if isinstance(cause, ValueError) and "integer string conversion" in str(cause):
        # Python's guard against quadratic int parsing: its message names a Python function.
        return envelope(
            422,
            "invalid_json",
            "The request body has a number of more than 4,300 digits, which no field takes; "
            "send numbers in the ranges GET /v1/limits gives.",
        )
    if isinstance(cause, ValueError):  # the JSON parser's other refusals
        return envelope(
            422, "invalid_json", f"The request body is not valid JSON ({cause}); fix it."
        )
    return envelope(
        400,
        "bad_request",
        "The request body could not be read as its Content-Type says; check that header and "
        "the body.",
    )


def install(app: FastAPI) -> None:
    @app.exception_handler(InbotsError)
    async def _inbots(_: Request, exc: InbotsError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        if not errors:
            return envelope(422, "validation_error", "The request is invalid.")
        return _validation_error(errors[0], request.headers.get("content-type"))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        unreadable = _unreadable_body(exc)
        if unreadable is not None:
            return unreadable
        code = _STATUS_CODES.get(exc.status_code, "error")
        if exc.status_code == 404:
            message = "No such endpoint. The API lives under /v1; see /openapi.json."
        elif exc.status_code == 405:
            message = "This endpoint does not accept that method; see /openapi.json."
        else:
            message = str(exc.detail)
        return envelope(exc.status_code, code, message, headers=getattr(exc, "headers", None))

    @app.exception_handler(DataError)
    async def _data(_: Request, exc: DataError) -> JSONResponse:
        # A value the database cannot hold slipped past validation: still the caller's input.
        log.info("database refused a value: %s", type(exc.orig).__name__)
        return envelope(422, "validation_error", "A value in the request cannot be stored.")

    @app.exception_handler(DBAPIError)
    @app.exception_handler(PoolTimeout)
    async def _database(request: Request, exc: Exception) -> JSONResponse:
        # Database work outside a unit of work (which already says 503): the same answer.
        unavailable = outage(exc, request.app.state.settings)
        if unavailable is None:
            return await _unexpected(request, exc)
        log.warning("database unavailable: %s", type(getattr(exc, "orig", None) or exc).__name__)
        return error_response(unavailable)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return envelope(
            500, "internal_error", "Something went wrong on our side; nothing was changed."
        )
