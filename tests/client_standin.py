"""A tiny stand-in for the Inbots 1.1 endpoints the server does not have yet, written from
``agents-and-governance.md`` §1–2 (paths, parameters, answer fields) and nothing else: it lets
``tests/test_client.py`` check that the client asks for what the addendum names and reads what
it answers. It records every request. Remove these tests' use of it once the server has 1.1.

It is a real ASGI app served by uvicorn on loopback, so the client under test is unchanged.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.conftest import free_port

AT = "2026-11-29T19:47:51.977083Z"


@dataclass
class Seen:
    method: str
    path: str
    params: dict[str, str]
    json: Any
    headers: dict[str, str]


def message(mid: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": mid,
        "thread_id": "th_1",
        "sender": "reviewer",
        "kind": "task",
        "summary": f"summary of {mid}",
        "body": f"body of {mid}",
        "reply_to": None,
        "created_at": AT,
        "priority": "normal",
        **extra,
    }


def receipt(recipient: str, state: str, **extra: Any) -> dict[str, Any]:
    return {
        "recipient": recipient,
        "state": state,
        "delivered_at": AT,
        "fetched_at": None,
        "working_at": None,
        "acknowledged_at": None,
        "outcome": None,
        "note": None,
        **extra,
    }


def delivery(did: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": did,
        "message_id": "msg_" + did.removeprefix("dlv_"),
        "thread_id": "th_1",
        "recipient": "implementer",
        "state": "fetched",
        "accepted_at": AT,
        "notified_at": None,
        "delivered_at": AT,
        "fetched_at": AT,
        "working_at": None,
        "acknowledged_at": None,
        "failed_at": None,
        "failure_reason": None,
        "stalled_at": None,
        "publish_count": 0,
        "next_attempt_at": None,
        "outcome": None,
        "note": None,
        **extra,
    }


@dataclass
class StandIn:
    """The stand-in's state: an inbox of ``mail`` items (delivery ids), paged by cursor."""

    mail: list[str] = field(default_factory=list)
    shown: set[str] = field(default_factory=set)
    seen: list[Seen] = field(default_factory=list)
    url: str = ""

    def requests(self, path: str) -> list[Seen]:
        return [s for s in self.seen if s.path == path]

    def item(self, did: str, body: bool) -> dict[str, Any]:
        n = did.removeprefix("dlv_")
        found: dict[str, Any] = {
            "delivery_id": did,
            "message_id": f"msg_{n}",
            "thread_id": "th_1",
            "thread_title": "Review the schema migration",
            "thread_ref": "PR-12",
            "sender": "reviewer",
            "kind": "task",
            "summary": f"summary of {n}",
            "sent_at": AT,
            "state": "fetched" if body else "delivered",
            "priority": "urgent" if n == "1" else "normal",
        }
        if body:
            found["body"] = f"body of {n}"
        return found

    def inbox(self, request: Request) -> dict[str, Any]:
        q = request.query_params
        with_body = q.get("include") == "body"
        size = min(int(q.get("limit") or 50), 20 if with_body else 200)
        start = int(q.get("cursor") or 0)
        page = self.mail[start : start + size]
        self.shown.update(page)
        end = start + len(page)
        return {
            "items": [self.item(d, with_body) for d in page],
            "returned": len(page),
            "waiting": len(self.mail),
            "more": len(self.mail) > len(page),
            "next_cursor": str(end) if end < len(self.mail) else None,
        }

    async def wait(self, request: Request) -> dict[str, Any]:
        deadline = time.monotonic() + min(float(request.query_params.get("timeout") or 1), 1.0)
        while time.monotonic() < deadline:
            new = [d for d in self.mail if d not in self.shown]
            if new:
                self.shown.update(new)
                return {
                    "items": [self.item(d, False) for d in new],
                    "returned": len(new),
                    "waiting": len(self.mail),
                    "more": len(self.mail) > len(new),
                    "next_cursor": None,
                }
            await asyncio.sleep(0.02)
        events = request.query_params.get("events") == "receipts"
        return {
            "items": [],
            "returned": 0,
            "waiting": len(self.mail),
            "more": bool(self.mail),
            "next_cursor": None,
            **(
                {"receipts": [receipt("implementer", "acknowledged", outcome="declined")]}
                if events
                else {}
            ),
        }


Handler = Callable[[StandIn, Request, Any], Awaitable[Any] | Any]


def _routes() -> dict[tuple[str, str], Handler]:
    brief = {"username": "reviewer", "brief": "# Reviewer\nAsk me for reviews.", "updated_at": AT}
    sent = {
        "message": message("msg_9", priority="urgent"),
        "deliveries": [{"id": "dlv_9", "recipient": "implementer", "state": "accepted"}],
        "duplicate": False,
    }
    return {
        ("GET", "/v1/inbox"): lambda s, r, _: s.inbox(r),
        ("GET", "/v1/inbox/wait"): lambda s, r, _: s.wait(r),
        ("GET", "/v1/outbox"): lambda s, r, _: {
            "items": [
                {
                    "message": message("msg_1"),
                    "receipts": [receipt("implementer", "acknowledged", outcome="done")],
                }
            ],
            "next_cursor": "c2",
        },
        ("GET", "/v1/search"): lambda s, r, _: {
            "items": [
                {
                    "message_id": "msg_1",
                    "thread_id": "th_1",
                    "thread_title": "Review the schema migration",
                    "sender": "reviewer",
                    "kind": "task",
                    "summary": "summary of 1",
                    "snippet": "…the [schema] migration…",
                    "created_at": AT,
                }
            ],
            "next_cursor": None,
        },
        ("PUT", "/v1/me/brief"): lambda s, r, b: {**brief, "brief": b["brief"]},
        ("GET", "/v1/agents/reviewer/brief"): lambda s, r, _: brief,
        ("POST", "/v1/deliveries/dlv_1/working"): lambda s, r, b: delivery(
            "dlv_1", state="working", working_at=AT, note=b.get("note")
        ),
        ("GET", "/v1/messages/dlv_1"): lambda s, r, _: {
            "message": message("msg_1"),
            "delivery": delivery(
                "dlv_1",
                state="acknowledged",
                acknowledged_at=AT,
                outcome=r.query_params.get("ack"),
            ),
        },
        ("POST", "/v1/messages"): lambda s, r, b: sent,
        ("GET", "/v1/directory"): lambda s, r, _: {
            "items": [
                {
                    "username": "operator",
                    "description": None,
                    "active": True,
                    "last_seen_at": AT,
                    "kind": "person",
                },
            ]
        },
    }


def _app(state: StandIn) -> Starlette:
    routes = _routes()

    async def endpoint(request: Request) -> Response:
        raw = await request.body()
        payload = json.loads(raw) if raw else None
        state.seen.append(
            Seen(
                request.method,
                request.url.path,
                dict(request.query_params),
                payload,
                dict(request.headers),
            )
        )
        handler = routes.get((request.method, request.url.path))
        if handler is None:
            error = {"code": "not_found", "message": "The stand-in has no such call."}
            return JSONResponse({"error": error}, status_code=404)
        answer = handler(state, request, payload)
        if asyncio.iscoroutine(answer):
            answer = await answer
        status = 201 if (request.method, request.url.path) == ("POST", "/v1/messages") else 200
        return JSONResponse(answer, status_code=status)

    methods = ["GET", "POST", "PUT", "DELETE"]
    return Starlette(routes=[Route("/{path:path}", endpoint, methods=methods)])


@contextmanager
def standin(mail: int = 0) -> Iterator[StandIn]:
    """The stand-in on a loopback port, with ``mail`` items (``dlv_1`` …) in its inbox."""
    state = StandIn(mail=[f"dlv_{n}" for n in range(1, mail + 1)])
    port = free_port()
    config = uvicorn.Config(_app(state), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the 1.1 stand-in did not start")
        time.sleep(0.01)
    state.url = f"http://127.0.0.1:{port}"
    try:
        yield state
    finally:
        server.should_exit = True
        thread.join(timeout=10)
