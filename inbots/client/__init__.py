"""A small Python client for Inbots, sync and async, over httpx::

    from inbots.client import Client

    with Client("http://127.0.0.1:8000", "agt_…") as inbots:
        thread = inbots.open_thread("Review PR 12", ["reviewer"])
        inbots.send(thread.id, "Please review PR 12 before Friday.", kind="task")
        for item in inbots.messages():  # long-polls; never yields an item twice
            print(item.sender, item.summary)
            inbots.acknowledge(item.delivery_id, "done")

:class:`AsyncClient` has the same methods, to ``await`` (and ``async for`` over
``messages()``). Answers are pydantic models named after the API's objects, with its field
names; failures raise :class:`InbotsError` (by status: :class:`AuthError`, :class:`NotFound`,
:class:`Conflict`, :class:`ValidationError`, :class:`RateLimited`, :class:`Unavailable`) or
:class:`TransportError`. :func:`verify` checks a webhook notification's signature.

This package imports httpx and pydantic, never the server's code: a webhook handler or an
agent can use it without the server's dependencies being loaded. See ``docs/client.md``.

Each name is loaded when it is first used (PEP 562): the errors need httpx only, :func:`glance`
(a harness hook's one request) builds no model, and ``Client`` brings pydantic and the models
with it.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inbots.client._async import AsyncClient
    from inbots.client._client import Client
    from inbots.client._errors import (
        AuthError,
        Conflict,
        InbotsError,
        NotFound,
        RateLimited,
        Timeout,
        TransportError,
        Unavailable,
        UnexpectedResponse,
        ValidationError,
    )
    from inbots.client._glance import glance
    from inbots.client._models import (
        AckResult,
        Agent,
        AlertWebhook,
        Approval,
        ApprovalRules,
        Attempt,
        Brief,
        Delivery,
        DirectoryEntry,
        Enrollment,
        Event,
        Inbox,
        InboxItem,
        Key,
        Limits,
        Message,
        NewEnrollment,
        NewKey,
        NewOperatorToken,
        OperatorToken,
        OutboxItem,
        Page,
        Policy,
        QueueCounts,
        ReadResult,
        Receipt,
        RegisteredAgent,
        Reservation,
        SearchHit,
        SendResult,
        SentDelivery,
        Session,
        Stats,
        Thread,
        ThreadMessage,
        Webhook,
    )
    from inbots.client._types import Events, InboxStatus, Include, Kind, Outcome, Priority, When
    from inbots.webhooks import VerificationError, verify

__all__ = [
    "AckResult",
    "Agent",
    "AlertWebhook",
    "Approval",
    "ApprovalRules",
    "AsyncClient",
    "Attempt",
    "AuthError",
    "Brief",
    "Client",
    "Conflict",
    "Delivery",
    "DirectoryEntry",
    "Enrollment",
    "Event",
    "Events",
    "InbotsError",
    "Inbox",
    "InboxItem",
    "InboxStatus",
    "Include",
    "Key",
    "Kind",
    "Limits",
    "Message",
    "NewEnrollment",
    "NewKey",
    "NewOperatorToken",
    "NotFound",
    "OperatorToken",
    "OutboxItem",
    "Outcome",
    "Page",
    "Policy",
    "Priority",
    "QueueCounts",
    "RateLimited",
    "ReadResult",
    "Receipt",
    "RegisteredAgent",
    "Reservation",
    "SearchHit",
    "SendResult",
    "SentDelivery",
    "Session",
    "Stats",
    "Thread",
    "ThreadMessage",
    "Timeout",
    "TransportError",
    "Unavailable",
    "UnexpectedResponse",
    "ValidationError",
    "VerificationError",
    "Webhook",
    "When",
    "glance",
    "verify",
]

# Where each public name is defined: loaded on first use.
_SOURCES: dict[str, tuple[str, ...]] = {
    "inbots.client._async": ("AsyncClient",),
    "inbots.client._client": ("Client",),
    "inbots.client._errors": (
        "AuthError",
        "Conflict",
        "InbotsError",
        "NotFound",
        "RateLimited",
        "Timeout",
        "TransportError",
        "Unavailable",
        "UnexpectedResponse",
        "ValidationError",
    ),
    "inbots.client._glance": ("glance",),
    "inbots.client._models": (
        "AckResult",
        "Agent",
        "AlertWebhook",
        "Approval",
        "ApprovalRules",
        "Attempt",
        "Brief",
        "Delivery",
        "DirectoryEntry",
        "Enrollment",
        "Event",
        "Inbox",
        "InboxItem",
        "Key",
        "Limits",
        "Message",
        "NewEnrollment",
        "NewKey",
        "NewOperatorToken",
        "OperatorToken",
        "OutboxItem",
        "Page",
        "Policy",
        "QueueCounts",
        "ReadResult",
        "Receipt",
        "RegisteredAgent",
        "Reservation",
        "SearchHit",
        "SendResult",
        "SentDelivery",
        "Session",
        "Stats",
        "Thread",
        "ThreadMessage",
        "Webhook",
    ),
    "inbots.client._types": (
        "Events",
        "InboxStatus",
        "Include",
        "Kind",
        "Outcome",
        "Priority",
        "When",
    ),
    "inbots.webhooks": (
        "VerificationError",
        "verify",
    ),
}
_WHERE = {name: module for module, names in _SOURCES.items() for name in names}

# Tracebacks and reprs name the public module, as httpx does (``inbots.client.NotFound``).
_RENAMED = ("AsyncClient", "Client", *_SOURCES["inbots.client._errors"])


def _name_public_classes() -> None:
    for name in _RENAMED:
        module = sys.modules.get(_WHERE[name])
        if module is not None:
            getattr(module, name).__module__ = __name__


if not TYPE_CHECKING:  # mypy reads the imports above, so a misspelt name stays an error

    def __getattr__(name: str) -> Any:
        module = _WHERE.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        _name_public_classes()  # those loaded with it too (the client loads the errors)
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
