"""Structured logs: one JSON object a line in production, readable lines in development.

Ids travel as ``extra={"delivery_id": …, "message_id": …, "thread_id": …}`` and come out as
fields. :class:`Redactor` sits on the handler, so whatever reaches a log line — a message, its
arguments, an extra field, a traceback — has tokens, keys and secrets replaced first, and fields
that must never be logged (bodies, headers) dropped.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_plus

from inbots.config import Settings

REDACTED = "[redacted]"

# Inbots' own credentials (agt_, ops_, enr_, whsec_), bearer headers, and key=value pairs whose
# name says secret. Tokens are at least 16 characters of the URL-safe alphabet.
_TOKEN = re.compile(r"\b(?:agt|ops|enr)_[A-Za-z0-9_\-]{16,}")
_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (_TOKEN, REDACTED),
    (re.compile(r"\bwhsec_[A-Za-z0-9+/=_\-]{16,}"), REDACTED),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}"), rf"\1 {REDACTED}"),
    (
        re.compile(
            r"(?i)\b(api_key|apikey|token|secret|signing_secret|password)"
            r"(\"?\s*[:=]\s*\"?)[^\s\"',;&]+"
        ),
        rf"\1\2{REDACTED}",
    ),
    (re.compile(r"(://[^:/@\s]+:)[^@/\s]+@"), rf"\1{REDACTED}@"),  # passwords in URLs
)
# Extra fields that are never written, whatever they hold.
_DROP = frozenset({"body", "headers", "authorization", "api_key", "secret", "token", "payload"})
# Fields of every LogRecord that are not "extra".
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


# A URL's query string in a log line (the access log writes each request's path with it).
_QUERY = re.compile(r"\?([^\s\"'<>#]+)")
# The query parameters whose values a log line may show: the API's and the dashboard's filters
# and pages. Any other parameter's value is replaced (search words in q and query, a note, an
# enrollment_token or a key someone put in a URL, a webhook receiver's own parameters): a name
# added to the API later stays private until it is listed here.
SHOWN_PARAMETERS = frozenset(
    {
        "ack",
        "active",
        "agent",
        "cursor",
        "events",
        "include",
        "kind",
        "limit",
        "page",
        "priority",
        "ref",
        "sender",
        "since",
        "state",
        "status",
        "thread",
        "timeout",
        "type",
        "until",
    }
)


def _redact_query(found: re.Match[str]) -> str:
    pairs = []
    for pair in found.group(1).split("&"):
        name, equals, value = pair.partition("=")
        shown = unquote_plus(name).strip().lower() in SHOWN_PARAMETERS
        if equals and value and (not shown or _TOKEN.search(unquote_plus(value))):
            value = REDACTED
        pairs.append(name + equals + value)
    return "?" + "&".join(pairs)


def redact(text: str) -> str:
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return _QUERY.sub(_redact_query, text)


class Redactor(logging.Filter):
    """Rewrites a record in place: message rendered and scrubbed, extras scrubbed or dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must not lose the line
            message = str(record.msg)
        record.msg, record.args = redact(message), None
        for key in list(vars(record)):
            if key in _STANDARD:
                continue
            if key.lower() in _DROP:
                delattr(record, key)
                continue
            value = getattr(record, key)
            if isinstance(value, str):
                setattr(record, key, redact(value))
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        record.exc_info = None  # the scrubbed text is what gets written
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


# uvicorn's copy of the message with terminal colours: the message is there already.
_COPIES = frozenset({"color_message"})


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {
        k: v
        for k, v in vars(record).items()
        if k not in _STANDARD and k not in _COPIES and not k.startswith("_")
    }


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in _extras(record).items():
            line[key] = value if isinstance(value, int | float | bool | None) else str(value)
        if record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = _extras(record)
        if extras:
            line += "  " + " ".join(f"{k}={v}" for k, v in extras.items())
        return line


def json_lines(settings: Settings) -> bool:
    """One JSON object a line: ``INBOTS_LOG_FORMAT=json``, or ``auto`` in production."""
    return settings.log_format == "json" or (
        settings.log_format == "auto" and settings.environment == "production"
    )


def make_handler(json_format: bool, stream: Any = None) -> logging.Handler:
    """The redacting handler every Inbots process logs through (stderr by default)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(Redactor())
    handler.setFormatter(JsonFormatter() if json_format else TextFormatter())
    handler._inbots = True  # type: ignore[attr-defined]
    # Warnings (a library's deprecation, Celery's "running as root") are log lines too, not
    # text on stderr beside them.
    logging.captureWarnings(True)
    return handler


# Loggers of the servers we run in, which would otherwise print with handlers of their own.
_SERVER_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "celery", "celery.task")
_NOISY = ("httpx", "httpcore")  # request lines would repeat every webhook URL


def configure_logging(settings: Settings, stream: Any = None) -> logging.Handler:
    """Send every logger (uvicorn's and Celery's too) through one redacting handler."""
    handler = make_handler(json_lines(settings), stream)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_inbots", False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.log_level)
    for name in _SERVER_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    for noisy in _NOISY:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    return handler


def logging_config(settings: Settings) -> dict[str, Any]:
    """:func:`configure_logging` as a ``logging.config.dictConfig`` dictionary, for a server that
    sets up logging in processes of its own before any Inbots code runs there: uvicorn's
    ``log_config``, applied in its supervisor and in each worker process, so its start-up lines
    are already Inbots' lines."""
    quiet = logging.getLevelName(max(logging.WARNING, logging.getLevelName(settings.log_level)))
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {
            "inbots": {"()": f"{__name__}.make_handler", "json_format": json_lines(settings)},
        },
        "root": {"handlers": ["inbots"], "level": settings.log_level},
        "loggers": {
            **{name: {"handlers": [], "propagate": True} for name in _SERVER_LOGGERS},
            **{name: {"level": quiet} for name in _NOISY},
        },
    }
