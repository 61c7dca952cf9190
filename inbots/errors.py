"""The error family. Every expected failure is an ``InbotsError`` with a stable code.

::

    InbotsError                     (code, status, message, field)
    ├── Unauthorized                401 unauthorized
    │   └── EnrollmentInvalid       401 enrollment_invalid (a spent, revoked or expired token)
    ├── Forbidden                   403 forbidden
    ├── NotFound                    404 not_found
    ├── Invalid                     422 validation_error (names the field)
    │   ├── UnknownField            422 unknown_field (a request field that does not exist)
    │   ├── SummaryRequired         422 summary_required
    │   ├── SearchQueryInvalid      422 search_query_invalid (a search with nothing to search for)
    │   └── WebhookUrlRejected      422 webhook_url_rejected
    ├── Conflict                    409 conflict
    │   ├── UsernameTaken           409 username_taken
    │   ├── ThreadNotOpen           409 thread_not_open
    │   ├── NoRecipients            409 no_recipients
    │   ├── AlreadyAcknowledged     409 already_acknowledged (a working heartbeat after the ack)
    │   ├── IdempotencyKeyReused    409 idempotency_key_reused
    │   └── NotHeld                 409 not_held (approving or rejecting a message not held)
    ├── PayloadTooLarge             413 payload_too_large
    ├── Expired                     410 expired (a delivery whose message's ttl passed)
    ├── RateLimited                 429 rate_limited (with retry_after)
    └── ServiceUnavailable          503 service_unavailable (the database cannot answer now)

The HTTP layer renders them as ``{"error": {"code", "message", "field"?}}`` (with a
``Retry-After`` header when the error has ``retry_after``); the MCP layer renders the same
sentence as a tool error. Domain code raises these and nothing else on purpose.

A sentence that tells the caller which call to make next names it as the caller's surface does:
it is written once, as a :class:`Pointing` (a template and each :class:`Call` it names), and the
error carries it worded both ways: ``message`` for the HTTP API (paths, header names) and
``tool_message`` for the MCP tools (tool and argument names), which the MCP adapter shows.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple


class Call(NamedTuple):
    """Something an error sentence points the caller to, as each surface names it."""

    http: str
    tool: str


LIST_THREADS = Call("GET /v1/threads", "list_threads")
CHECK_INBOX = Call("GET /v1/inbox", "check_inbox")
DIRECTORY = Call("GET /v1/directory", "list_agents")
SEND_DIRECT = Call("POST /v1/messages", "send_message with to")
IDEMPOTENCY_KEY = Call("Idempotency-Key", "idempotency_key")
YOUR_DELIVERIES = Call(
    "GET /v1/inbox (an agent's own), or GET /v1/deliveries (the operator)", "check_inbox"
)
AGENTS = Call("GET /v1/directory (the operator: GET /v1/agents)", "list_agents")
CALLS = (
    LIST_THREADS,
    CHECK_INBOX,
    DIRECTORY,
    SEND_DIRECT,
    IDEMPOTENCY_KEY,
    YOUR_DELIVERIES,
    AGENTS,
)
"""Every call a sentence points to that the surfaces name differently."""


class Pointing:
    """A sentence naming calls: ``template`` with a ``{}`` for each of ``calls``, in order, and
    ``{name}`` for each of ``values`` (put in as they are, never read as a template)."""

    def __init__(self, template: str, *calls: Call, **values: object) -> None:
        self.template, self.calls, self.values = template, calls, values

    def worded(self, tools: bool) -> str:
        """The sentence for the MCP tools (``tools``) or for the HTTP API."""
        names = [call.tool if tools else call.http for call in self.calls]
        return self.template.format(*names, **self.values)


class InbotsError(Exception):
    code: ClassVar[str] = "error"
    status: ClassVar[int] = 400
    retry_after: ClassVar[int | None] = None  # seconds, for a Retry-After header

    def __init__(self, message: str | Pointing, *, field: str | None = None) -> None:
        if isinstance(message, Pointing):
            text, for_tools = message.worded(tools=False), message.worded(tools=True)
        else:
            text = for_tools = message
        super().__init__(text)
        self.message = text  # as the HTTP API says it
        self.tool_message = for_tools  # as the MCP tools say it
        self.field = field

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        return body


class Unauthorized(InbotsError):
    code = "unauthorized"
    status = 401


class EnrollmentInvalid(Unauthorized):
    code = "enrollment_invalid"


class Forbidden(InbotsError):
    code = "forbidden"
    status = 403


class NotFound(InbotsError):
    code = "not_found"
    status = 404


class Invalid(InbotsError):
    code = "validation_error"
    status = 422


class UnknownField(Invalid):
    code = "unknown_field"


class SummaryRequired(Invalid):
    code = "summary_required"


class SearchQueryInvalid(Invalid):
    code = "search_query_invalid"


class WebhookUrlRejected(Invalid):
    code = "webhook_url_rejected"


class Conflict(InbotsError):
    code = "conflict"
    status = 409


class UsernameTaken(Conflict):
    code = "username_taken"


class ThreadNotOpen(Conflict):
    code = "thread_not_open"


class NoRecipients(Conflict):
    code = "no_recipients"


class AlreadyAcknowledged(Conflict):
    code = "already_acknowledged"


class IdempotencyKeyReused(Conflict):
    code = "idempotency_key_reused"


class NotHeld(Conflict):
    code = "not_held"


class PayloadTooLarge(InbotsError):
    code = "payload_too_large"
    status = 413


class Expired(InbotsError):
    code = "expired"
    status = 410


class RateLimited(InbotsError):
    """A cap or the send rate limit refused the call; ``retry_after`` says when to try again."""

    code = "rate_limited"
    status = 429

    def __init__(
        self, message: str | Pointing, *, retry_after: int | None = None, field: str | None = None
    ) -> None:
        super().__init__(message, field=field)
        if retry_after is not None:
            self.retry_after = retry_after  # type: ignore[misc]


class ServiceUnavailable(InbotsError):
    """The database is down, unreachable or did not answer in time: nothing the caller did
    wrong, and worth repeating shortly (a send with the same ``Idempotency-Key``)."""

    code = "service_unavailable"
    status = 503
    retry_after = 5


def _same(name: str) -> Call:
    """A call only the HTTP API has (the operator's), named alike on both surfaces."""
    return Call(name, name)


# What each kind of id looks like, and the call that lists them.
_WHERE = {
    "thread": ("th_…", LIST_THREADS),
    "message": ("msg_… (or your delivery id, dlv_…)", CHECK_INBOX),
    "delivery": ("dlv_…", YOUR_DELIVERIES),
    "held message": ("msg_…", _same("GET /v1/approvals (or inbots pending)")),
    "event": ("evt_…", _same("GET /v1/events")),
    "agent": ("ag_… or a username", AGENTS),
}


def not_found(what: str, ident: str) -> NotFound:
    """The one 'not found' sentence: it never says whether the thing exists elsewhere, and it
    says what such an id looks like and which call lists the ones the caller can see (as the
    caller's surface names it)."""
    where = _WHERE.get(what)
    if where is None:
        return NotFound(f"No {what} {ident!r} is visible to you.")
    shape, listing = where
    return NotFound(
        Pointing(
            "No {what} {ident} is visible to you. {kind} ids look like {shape}; {} lists yours.",
            listing,
            what=what,
            ident=repr(ident),
            kind=what.capitalize(),
            shape=shape,
        )
    )
