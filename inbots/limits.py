"""The limits a server enforces, declared once and carried to every place that shows them.

:class:`Limits` is the public view of the limit settings (each field is the setting of the same
name, ``INBOTS_<NAME>``): ``GET /v1/limits`` answers it, the MCP tools quote it, ``inbots mcp``
reads it from the server it bridges to.

A request model states a field's limits where the field is declared, by name::

    body: str = Field(description="1 to {message_body_max:,} characters.",
                      json_schema_extra=bounds(minLength=1, maxLength="message_body_max"))

:func:`resolve` turns those names into numbers in a JSON schema (the MCP tools' input schemas,
the OpenAPI document) and fills ``{name}`` in descriptions, so a limit that is a setting is
never copied into prose or schemas by hand. The services enforce the limits (with sentences
that say how to fix the call); the schema only tells a client beforehand.
"""

from __future__ import annotations

import re
from typing import Any

from inbots.config import Settings
from inbots.kit.schema import Model

BOUNDS_KEY = "x-inbots-bounds"


class Limits(Model):
    """Each field is the setting of the same name (``INBOTS_<NAME>``); see product.md, "Limits"."""

    message_body_max: int  # characters
    summary_required_over: int  # a body longer than this needs a summary
    summary_max: int
    summary_shown: int
    thread_title_max: int
    thread_goal_max: int
    thread_ref_max: int
    description_max: int
    brief_max: int  # an agent's brief (Markdown)
    note_max: int
    idempotency_key_max: int
    ack_batch_max: int
    request_body_max_bytes: int
    attachments_max: int  # attachments of one message
    attachment_bytes: int  # one attachment, decoded
    attachments_total_bytes: int  # all of one message's, decoded
    list_default: int
    list_max: int
    check_inbox_default: int
    check_inbox_max: int
    inbox_bodies_max: int  # an inbox page with bodies lists at most this many
    search_query_max: int  # characters of a search's q
    search_words_max: int  # words of a search's q
    wait_default_seconds: float
    wait_max_seconds: float
    cap_per_recipient: int  # unacknowledged deliveries one agent may hold (0: no cap)
    cap_per_pair: int  # ... from one sender (0: no cap)
    rate_limit_per_minute: int  # messages an agent may send a minute (0: no limit)
    rate_limit_burst: int  # ... at once, after a quiet spell
    ttl_min_seconds: int  # a message's ttl_seconds
    ttl_max_seconds: int
    retention_days: float  # closed threads older than this are deleted (0: kept forever)
    enrollment_uses_max: int  # uses of one enrolment token
    enrollment_expires_in_max: float  # seconds an enrolment token may live
    agent_keys_max: int  # live keys one agent may hold
    key_label_max: int
    session_label_max: int  # characters of an X-Inbots-Session label

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(**{name: getattr(settings, name) for name in cls.model_fields})


def bounds(**keywords: int | float | str) -> dict[str, Any]:
    """A field's JSON-schema bounds (``minLength``, ``maxLength``, ``minimum``, ``maximum``,
    ``minItems``, ``maxItems``): a number, or the name of a :class:`Limits` field. For
    ``json_schema_extra``."""
    return {BOUNDS_KEY: keywords}


_PLACEHOLDER = re.compile(r"\{(\w+)(:[^{}]*)?\}")


def describe(text: str, limits: Limits) -> str:
    """``text`` with every ``{limit}`` / ``{limit:,}`` naming a :class:`Limits` field filled in;
    other braces are left as they are."""
    return _fill(text, limits.model_dump())


def _fill(text: str, values: dict[str, Any]) -> str:
    def fill(match: re.Match[str]) -> str:
        name, spec = match.group(1), (match.group(2) or ":")[1:]
        if name not in values:
            return match.group(0)
        value = values[name]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return format(value, spec)

    return _PLACEHOLDER.sub(fill, text)


def resolve(schema: Any, limits: Limits) -> Any:
    """A copy of a JSON schema with every field's bounds turned into numbers and its
    descriptions filled in (see the module's docstring)."""
    return _resolve(schema, limits.model_dump())


def _resolve(schema: Any, values: dict[str, Any]) -> Any:
    if isinstance(schema, list):
        return [_resolve(item, values) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == BOUNDS_KEY and isinstance(value, dict):
            for keyword, bound in value.items():
                out[keyword] = values[bound] if isinstance(bound, str) else bound
        elif key == "description" and isinstance(value, str):
            out[key] = _fill(value, values)
        else:
            out[key] = _resolve(value, values)
    return out
