"""Test clients: the operator and agents of one workspace, over real HTTP."""

from __future__ import annotations

import re
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import httpx

# One TLS context for every test client: httpx builds one per client otherwise (~80 ms each, the
# CA bundle read again), and the tests talk plain HTTP on loopback.
TLS = ssl.create_default_context()

ANY: Any = object()
"""``field=ANY``: :func:`assert_error` does not look at the error's field."""


def assert_error(
    response: httpx.Response, status: int, code: str, field: str | None = ANY, label: object = ""
) -> dict[str, Any]:
    """The answer is the error envelope ``{"error": {"code", "message", "field"?}}`` with this
    status and code, a message that says something, and ``field`` when given (``None``: no field).
    Returns the error object; ``label`` goes into the failure message."""
    assert response.status_code == status, (label, response.status_code, response.text[:500])
    try:
        body = response.json()
    except ValueError:
        raise AssertionError((label, response.status_code, response.text[:300])) from None
    assert isinstance(body, dict) and set(body) == {"error"}, (label, body)
    error = body["error"]
    assert isinstance(error, dict), (label, body)
    assert set(error) <= {"code", "message", "field"}, (label, body)
    assert error.get("code") == code, (label, error)
    assert isinstance(error.get("message"), str) and error["message"].strip(), (label, error)
    if field is not ANY:
        assert error.get("field") == field, (label, error)
    return error


def error_message(
    response: httpx.Response, status: int, code: str, field: str | None = ANY, label: object = ""
) -> str:
    """:func:`assert_error`, returning the error's message."""
    return str(assert_error(response, status, code, field, label)["message"])


class Caller:
    """One bearer token's view of the API. ``call`` returns the response, unchecked."""

    def __init__(self, client: httpx.Client, token: str, name: str) -> None:
        self.client = client
        self.token = token
        self.name = name
        self.headers = {"Authorization": f"Bearer {token}"}

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        return self.client.request(method, "/v1" + path, headers=headers, **kwargs)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.call("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return self.call("POST", path, **kw)

    def ok(self, method: str, path: str, status: int = 200, **kw: Any) -> Any:
        """Call and insist on ``status``; returns the JSON body."""
        response = self.call(method, path, **kw)
        assert response.status_code == status, (response.status_code, response.text)
        return response.json() if response.content else None

    # Conveniences for the common steps of a scenario.
    def open_thread(
        self, title: str = "A task", participants: list[str] | None = None, **kw: Any
    ) -> dict[str, Any]:
        body = {"title": title, "participants": participants or [], **kw}
        return self.ok("POST", "/threads", 201, json=body)  # type: ignore[no-any-return]

    def send(self, thread_id: str, body: str = "hello", **kw: Any) -> dict[str, Any]:
        headers = kw.pop("headers", {})
        return self.ok(  # type: ignore[no-any-return]
            "POST",
            f"/threads/{thread_id}/messages",
            201,
            json={"body": body, **kw},
            headers=headers,
        )

    def inbox(self, **params: Any) -> dict[str, Any]:
        return self.ok("GET", "/inbox", params=params)  # type: ignore[no-any-return]


class Api(Caller):
    """The operator of one workspace, able to register agents."""

    def __init__(self, base_url: str, operator_token: str) -> None:
        super().__init__(
            httpx.Client(base_url=base_url, timeout=30, verify=TLS), operator_token, "operator"
        )
        self.base_url = base_url

    def agent(self, name: str, description: str | None = None) -> Caller:
        body: dict[str, Any] = {"name": name}
        if description is not None:
            body["description"] = description
        created = self.ok("POST", "/agents", 201, json=body)
        return Caller(self.client, created["api_key"], name)

    def delivery(self, delivery_id: str) -> dict[str, Any]:
        return self.ok("GET", f"/deliveries/{delivery_id}")  # type: ignore[no-any-return]

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()


# Prometheus samples by (name, sorted labels), parsed with prometheus_client's own parser.
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def metric_samples(text: str) -> Samples:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value; 0 when the series is absent."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def attempt_waits(detail: dict[str, Any]) -> list[float]:
    """The worker's own record of each pause: from one attempt's end to the next one's start.

    Measured from the attempt list, not from when a receiver saw each request: a request that
    reaches a loaded receiver late shortens the next gap the receiver sees, although the worker
    waited the whole delay (a timed-out attempt's clock starts when the worker sends).
    """
    attempts = detail["attempts"]
    ends = [
        datetime.fromisoformat(a["started_at"]).timestamp() + (a["duration_ms"] or 0) / 1000
        for a in attempts
    ]
    starts = [datetime.fromisoformat(a["started_at"]).timestamp() for a in attempts]
    return [start - end for end, start in zip(ends, starts[1:], strict=False)]


CSRF = re.compile(r'name="csrf" value="([^"]+)"')  # a dashboard form's CSRF token


@contextmanager
def dashboard(api: Api) -> Iterator[httpx.Client]:
    """A browser-like client signed in to the dashboard as ``api``'s operator."""
    with httpx.Client(base_url=api.base_url, timeout=30) as client:
        found = CSRF.search(client.get("/login").text)
        assert found
        signed = client.post("/login", data={"token": api.token, "csrf": found.group(1)})
        assert signed.status_code == 303, signed.text
        yield client
