"""What the client raises. Two families, because they call for different handling:

::

    InbotsError                 the server answered with an error: status, code, message,
    │                           field, retry_after (from the error envelope and Retry-After)
    ├── AuthError               401 unauthorized, 403 forbidden
    ├── NotFound                404 not_found (also: an id that cannot name anything)
    ├── Conflict                409 conflict, username_taken, thread_not_open, no_recipients,
    │                               idempotency_key_reused
    ├── ValidationError         422 validation_error, summary_required, webhook_url_rejected, …
    ├── RateLimited             429 rate_limited (retry_after: seconds)
    ├── Unavailable             503 service_unavailable (retry_after: seconds)
    └── UnexpectedResponse      a 2xx answer the client cannot read (not JSON, wrong shape)

    TransportError              no answer came (a ConnectionError: refused, reset, DNS, TLS)
    └── Timeout                 no answer in time (also a TimeoutError): the call may or may
                                not have taken effect; repeat a send with its idempotency key

Any other status (400, 410, 413, 431, 500, …) is a plain :class:`InbotsError` with its ``code``.
"""

from __future__ import annotations

import email.utils
import functools
import time
from typing import Any

import httpx


class InbotsError(Exception):
    """An error answer from Inbots, with the fields of its ``{"error": {…}}`` envelope.

    ``message`` is a sentence saying what to change; ``field`` names the input at fault, when one
    is; ``retry_after`` is the ``Retry-After`` header in seconds, when the server sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str,
        field: str | None = None,
        retry_after: float | None = None,
        response: httpx.Response | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.field = field
        self.retry_after = retry_after
        self.response = response

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        # Picklable (a task result, a log queue), without the response.
        rebuild = functools.partial(
            type(self),
            self.message,
            status=self.status,
            code=self.code,
            field=self.field,
            retry_after=self.retry_after,
        )
        return rebuild, ()

    def __repr__(self) -> str:
        field = f", field={self.field!r}" if self.field else ""
        return f"{type(self).__name__}({self.status}, {self.code!r}, {self.message!r}{field})"


class AuthError(InbotsError):
    """401: the key or token is missing, unknown, revoked or archived. 403: this caller may not
    make this call (an agent on an operator endpoint, a non-opener asking to close)."""


class NotFound(InbotsError):
    """404: nothing with this id that the caller may see (existence is never revealed)."""


class Conflict(InbotsError):
    """409: the call clashes with the current state (``code`` says how)."""


class ValidationError(InbotsError):
    """422: an input is invalid; ``field`` names it when one is at fault."""


class RateLimited(InbotsError):
    """429: a cap or rate limit holds; try again after ``retry_after`` seconds."""


class Unavailable(InbotsError):
    """503: the server cannot answer now (its database is down); try again after
    ``retry_after`` seconds (a send with the same idempotency key)."""


class UnexpectedResponse(InbotsError):
    """A successful status with a body the client cannot read as the answer it expects."""


class TransportError(ConnectionError):
    """No answer came from the server: connection refused or reset, DNS, TLS, protocol."""

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.message = message
        self.url = url

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return functools.partial(type(self), self.message, url=self.url), ()


class Timeout(TransportError, TimeoutError):
    """No answer within the timeout. The call may or may not have taken effect: check before
    repeating it, or repeat a send with the same idempotency key."""


_BY_STATUS: dict[int, type[InbotsError]] = {
    401: AuthError,
    403: AuthError,
    404: NotFound,
    409: Conflict,
    422: ValidationError,
    429: RateLimited,
    503: Unavailable,
}


def retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds: delta-seconds or an HTTP date; None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def error_for(response: httpx.Response, base_url: str) -> InbotsError:
    """The error a non-2xx answer stands for: its envelope's code, message and field, the class
    chosen by status. An answer without the envelope (a proxy's page) keeps its status and gets
    the code ``http_<status>``."""
    status = response.status_code
    cls = _BY_STATUS.get(status, InbotsError)
    waited = retry_after(response.headers.get("retry-after"))
    envelope: Any
    try:
        envelope = response.json()["error"]
        code, message = envelope["code"], envelope["message"]
        if not isinstance(code, str) or not isinstance(message, str):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        excerpt = " ".join(response.text[:200].split())
        message = f"Inbots at {base_url} answered HTTP {status} without an error message"
        message += f": {excerpt}" if excerpt else "."
        return cls(
            message, status=status, code=f"http_{status}", retry_after=waited, response=response
        )
    field = envelope.get("field")
    return cls(
        message,
        status=status,
        code=code,
        field=field if isinstance(field, str) else None,
        retry_after=waited,
        response=response,
    )
