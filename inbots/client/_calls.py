"""Every endpoint the client knows, as a :class:`~inbots.client._base.Call`: path, parameters,
body and the model of its answer. The clients' methods document them; this table is where
their paths and field names are, once."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from inbots.client._base import (
    WAIT_ASSUMED,
    Call,
    body,
    idempotency_headers,
    nothing,
    query,
    segment,
)
from inbots.client._models import (
    AckResult,
    Agent,
    AlertWebhook,
    Approval,
    Brief,
    Delivery,
    DirectoryEntry,
    Enrollment,
    Event,
    Inbox,
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
    ReadResult,
    RegisteredAgent,
    Reservation,
    SearchHit,
    SendResult,
    Session,
    Stats,
    Thread,
    Webhook,
)
from inbots.client._types import When


def _ids(ids: str | Sequence[str]) -> list[str]:
    return [ids] if isinstance(ids, str) else list(ids)


# The agent itself


def me() -> Call[Agent]:
    return Call("GET", "/me", Agent.model_validate)


def directory(query_text: str | None, active_only: bool) -> Call[list[DirectoryEntry]]:
    params = query(query=query_text, active="true" if active_only else None)
    return Call("GET", "/directory", lambda d: Page[DirectoryEntry].model_validate(d).items, params)


def webhook() -> Call[Webhook]:
    return Call("GET", "/me/webhook", Webhook.model_validate)


def set_webhook(url: str, events: Sequence[str] | None) -> Call[Webhook]:
    payload = body(url=url, webhook_events=list(events) if events is not None else None)
    return Call("PUT", "/me/webhook", Webhook.model_validate, json=payload)


def remove_webhook() -> Call[None]:
    return Call("DELETE", "/me/webhook", nothing)


def rotate_webhook() -> Call[Webhook]:
    return Call("POST", "/me/webhook/rotate", Webhook.model_validate)


def my_keys() -> Call[list[Key]]:
    return Call("GET", "/me/keys", lambda d: Page[Key].model_validate(d).items)


def my_sessions() -> Call[list[Session]]:
    return Call("GET", "/me/sessions", lambda d: Page[Session].model_validate(d).items)


def brief(username: str) -> Call[Brief]:
    return Call("GET", f"{_agent(username)}/brief", Brief.model_validate)


def set_brief(text: str) -> Call[Brief]:
    return Call("PUT", "/me/brief", Brief.model_validate, json={"brief": text})


def limits() -> Call[Limits]:
    return Call("GET", "/limits", Limits.model_validate)


# Threads and messages


def threads(
    status: str | None, limit: int | None, cursor: str | None, ref: str | None, text: str | None
) -> Call[Page[Thread]]:
    params = query(status=status, limit=limit, cursor=cursor, ref=ref, query=text)
    return Call("GET", "/threads", Page[Thread].model_validate, params)


def thread(thread_id: str) -> Call[Thread]:
    return Call("GET", f"/threads/{segment(thread_id, 'thread')}", Thread.model_validate)


def open_thread(
    title: str,
    participants: Sequence[str],
    goal: str | None,
    ref: str | None,
    extra: dict[str, Any],
) -> Call[Thread]:
    payload = body(title=title, goal=goal, participants=list(participants), ref=ref, **extra)
    return Call("POST", "/threads", Thread.model_validate, json=payload)


def add_participant(thread_id: str, username: str) -> Call[Thread]:
    path = f"/threads/{segment(thread_id, 'thread')}/participants"
    return Call("POST", path, Thread.model_validate, json={"username": username})


def send(
    thread_id: str | None,
    text: str,
    *,
    summary: str | None,
    kind: str | None,
    reply_to: str | None,
    idempotency_key: str | None,
    priority: str | None,
    to: Sequence[str] | None,
    title: str | None,
    ref: str | None,
    extra: dict[str, Any],
) -> Call[SendResult]:
    headers = idempotency_headers(idempotency_key)
    fields = body(body=text, summary=summary, kind=kind, reply_to=reply_to, priority=priority)
    if extra.get("attachments") is not None:
        extra = {**extra, "attachments": [_attachment(a) for a in extra["attachments"]]}
    if to is not None:
        if thread_id is not None:
            raise TypeError("send() takes a thread_id or to=[usernames], not both")
        payload = {"to": list(to), **body(title=title, ref=ref), **fields, **extra}
        return Call("POST", "/messages", SendResult.model_validate, json=payload, headers=headers)
    if thread_id is None:
        raise TypeError("send() needs a thread_id, or to=[usernames] to open a thread")
    if title is not None or ref is not None:
        raise TypeError("title and ref open a new thread: pass them with to=[usernames]")
    path = f"/threads/{segment(thread_id, 'thread')}/messages"
    return Call("POST", path, SendResult.model_validate, json={**fields, **extra}, headers=headers)


def _attachment(given: Mapping[str, Any]) -> dict[str, Any]:
    """An attachment of a send: ``data`` given as bytes goes as base64 (a str as it is)."""
    data = given.get("data")
    if isinstance(data, bytes | bytearray | memoryview):
        return {**given, "data": base64.b64encode(bytes(data)).decode("ascii")}
    return dict(given)


def attachment(attachment_id: str) -> Call[bytes]:
    path = f"/attachments/{segment(attachment_id, 'attachment')}"
    return Call("GET", path, bytes, raw=True)


def history(
    thread_id: str, since: When | None, limit: int | None, cursor: str | None
) -> Call[Page[Message]]:
    path = f"/threads/{segment(thread_id, 'thread')}/messages"
    params = query(since=since, limit=limit, cursor=cursor)
    return Call("GET", path, Page[Message].model_validate, params)


def close_request(thread_id: str) -> Call[Thread]:
    path = f"/threads/{segment(thread_id, 'thread')}/close-request"
    return Call("POST", path, Thread.model_validate)


def outbox(
    state: str | None, thread_id: str | None, cursor: str | None, limit: int | None
) -> Call[Page[OutboxItem]]:
    params = query(state=state, thread=thread_id, cursor=cursor, limit=limit)
    return Call("GET", "/outbox", Page[OutboxItem].model_validate, params)


def search(
    q: str,
    *,
    sender: str | None,
    thread_id: str | None,
    kind: str | None,
    since: When | None,
    until: When | None,
    limit: int | None,
    cursor: str | None,
) -> Call[Page[SearchHit]]:
    params = query(
        q=q,
        sender=sender,
        thread=thread_id,
        kind=kind,
        since=since,
        until=until,
        limit=limit,
        cursor=cursor,
    )
    return Call("GET", "/search", Page[SearchHit].model_validate, params)


# The inbox


def inbox(
    limit: int | None,
    *,
    cursor: str | None = None,
    include: str | None = None,
    status: str | None = None,
    priority: str | None = None,
    since: When | None = None,
) -> Call[Inbox]:
    params = query(
        limit=limit, cursor=cursor, include=include, status=status, priority=priority, since=since
    )
    return Call("GET", "/inbox", Inbox.model_validate, params)


def wait(timeout: float | None, events: str | None) -> Call[Inbox]:
    params = query(timeout=timeout, events=events)
    held = WAIT_ASSUMED if timeout is None else timeout
    return Call("GET", "/inbox/wait", Inbox.model_validate, params, wait=held)


def read(ident: str, ack: str | None, note: str | None) -> Call[ReadResult]:
    path = f"/messages/{segment(ident, 'message')}"
    if ack is None and note is None:
        return Call("GET", path, ReadResult.model_validate)
    # Acknowledging changes something: a POST, never the GET's ?ack= (kept for old clients).
    return Call("POST", f"{path}/read", ReadResult.model_validate, json=body(ack=ack, note=note))


def acknowledge(ids: str | Sequence[str], outcome: str | None, note: str | None) -> Call[AckResult]:
    payload = body(ids=_ids(ids), outcome=outcome, note=note)
    return Call("POST", "/acks", AckResult.model_validate, json=payload)


def received(delivery_id: str) -> Call[Delivery]:
    path = f"/deliveries/{segment(delivery_id, 'delivery')}/received"
    return Call("POST", path, Delivery.model_validate)


def working(delivery_id: str, note: str | None) -> Call[Delivery]:
    path = f"/deliveries/{segment(delivery_id, 'delivery')}/working"
    return Call("POST", path, Delivery.model_validate, json=body(note=note))


def register(
    enrollment_token: str, name: str, description: str | None, webhook_url: str | None
) -> Call[RegisteredAgent]:
    payload = body(
        enrollment_token=enrollment_token,
        name=name,
        description=description,
        webhook_url=webhook_url,
    )
    return Call("POST", "/register", RegisteredAgent.model_validate, json=payload)


# The operator


def register_agent(
    name: str, description: str | None, webhook_url: str | None
) -> Call[RegisteredAgent]:
    payload = body(name=name, description=description, webhook_url=webhook_url)
    return Call("POST", "/agents", RegisteredAgent.model_validate, json=payload)


def agents() -> Call[list[Agent]]:
    return Call("GET", "/agents", lambda d: Page[Agent].model_validate(d).items)


def _agent(id_or_username: str) -> str:
    return f"/agents/{segment(id_or_username, 'agent')}"


def agent(id_or_username: str) -> Call[Agent]:
    return Call("GET", _agent(id_or_username), Agent.model_validate)


def archive_agent(id_or_username: str) -> Call[Agent]:
    return Call("POST", f"{_agent(id_or_username)}/archive", Agent.model_validate)


def set_agent_brief(id_or_username: str, text: str) -> Call[Brief]:
    path = f"{_agent(id_or_username)}/brief"
    return Call("PUT", path, Brief.model_validate, json={"brief": text})


def agent_keys(id_or_username: str) -> Call[list[Key]]:
    path = f"{_agent(id_or_username)}/keys"
    return Call("GET", path, lambda d: Page[Key].model_validate(d).items)


def issue_agent_key(id_or_username: str, label: str | None) -> Call[NewKey]:
    path = f"{_agent(id_or_username)}/keys"
    return Call("POST", path, NewKey.model_validate, json=body(label=label))


def revoke_agent_key(id_or_username: str, key_id: str) -> Call[None]:
    return Call("DELETE", f"{_agent(id_or_username)}/keys/{segment(key_id, 'key')}", nothing)


def agent_sessions(id_or_username: str) -> Call[list[Session]]:
    path = f"{_agent(id_or_username)}/sessions"
    return Call("GET", path, lambda d: Page[Session].model_validate(d).items)


def agent_webhook(id_or_username: str) -> Call[Webhook]:
    return Call("GET", f"{_agent(id_or_username)}/webhook", Webhook.model_validate)


def set_agent_webhook(id_or_username: str, url: str, events: Sequence[str] | None) -> Call[Webhook]:
    payload = body(url=url, webhook_events=list(events) if events is not None else None)
    path = f"{_agent(id_or_username)}/webhook"
    return Call("PUT", path, Webhook.model_validate, json=payload)


def remove_agent_webhook(id_or_username: str) -> Call[None]:
    return Call("DELETE", f"{_agent(id_or_username)}/webhook", nothing)


def rotate_agent_webhook(id_or_username: str) -> Call[Webhook]:
    return Call("POST", f"{_agent(id_or_username)}/webhook/rotate", Webhook.model_validate)


def deliveries(
    state: str | None,
    agent_id: str | None,
    thread_id: str | None,
    limit: int | None,
    cursor: str | None,
) -> Call[Page[Delivery]]:
    params = query(state=state, agent=agent_id, thread=thread_id, limit=limit, cursor=cursor)
    return Call("GET", "/deliveries", Page[Delivery].model_validate, params)


def delivery(delivery_id: str) -> Call[Delivery]:
    path = f"/deliveries/{segment(delivery_id, 'delivery')}"
    return Call("GET", path, Delivery.model_validate)


def redeliver(delivery_id: str) -> Call[Delivery]:
    path = f"/deliveries/{segment(delivery_id, 'delivery')}/redeliver"
    return Call("POST", path, Delivery.model_validate)


def events(
    event_type: str | None,
    state: str | None,
    agent_id: str | None,
    thread_id: str | None,
    limit: int | None,
    cursor: str | None,
) -> Call[Page[Event]]:
    params = query(
        type=event_type, state=state, agent=agent_id, thread=thread_id, limit=limit, cursor=cursor
    )
    return Call("GET", "/events", Page[Event].model_validate, params)


def event(event_id: str) -> Call[Event]:
    return Call("GET", f"/events/{segment(event_id, 'event')}", Event.model_validate)


def redeliver_event(event_id: str) -> Call[Event]:
    path = f"/events/{segment(event_id, 'event')}/redeliver"
    return Call("POST", path, Event.model_validate)


def close_thread(thread_id: str) -> Call[Thread]:
    path = f"/threads/{segment(thread_id, 'thread')}/close"
    return Call("POST", path, Thread.model_validate)


def dismiss_close_request(thread_id: str) -> Call[Thread]:
    path = f"/threads/{segment(thread_id, 'thread')}/close/dismiss"
    return Call("POST", path, Thread.model_validate)


def stats() -> Call[Stats]:
    return Call("GET", "/stats", Stats.model_validate)


def alert_webhook() -> Call[AlertWebhook]:
    return Call("GET", "/operator/webhook", AlertWebhook.model_validate)


def set_alert_webhook(url: str, events: Sequence[str] | None) -> Call[AlertWebhook]:
    payload = body(url=url, events=list(events) if events is not None else None)
    return Call("PUT", "/operator/webhook", AlertWebhook.model_validate, json=payload)


def remove_alert_webhook() -> Call[None]:
    return Call("DELETE", "/operator/webhook", nothing)


def rotate_alert_webhook() -> Call[AlertWebhook]:
    return Call("POST", "/operator/webhook/rotate", AlertWebhook.model_validate)


def tokens() -> Call[list[OperatorToken]]:
    return Call("GET", "/tokens", lambda d: Page[OperatorToken].model_validate(d).items)


def create_token(label: str | None) -> Call[NewOperatorToken]:
    return Call("POST", "/tokens", NewOperatorToken.model_validate, json=body(label=label))


def revoke_token(token_id: str) -> Call[None]:
    return Call("DELETE", f"/tokens/{segment(token_id, 'operator token')}", nothing)


def enrollments() -> Call[list[Enrollment]]:
    return Call("GET", "/enrollments", lambda d: Page[Enrollment].model_validate(d).items)


def create_enrollment(
    uses: int | None, expires_in: float | None, label: str | None
) -> Call[NewEnrollment]:
    payload = body(uses=uses, expires_in=expires_in, label=label)
    return Call("POST", "/enrollments", NewEnrollment.model_validate, json=payload)


def revoke_enrollment(enrollment_id: str) -> Call[None]:
    path = f"/enrollments/{segment(enrollment_id, 'enrolment token')}"
    return Call("DELETE", path, nothing)


def approvals() -> Call[list[Approval]]:
    return Call("GET", "/approvals", lambda d: Page[Approval].model_validate(d).items)


def approve(ident: str) -> Call[Approval]:
    path = f"/approvals/{segment(ident, 'held item')}/approve"
    return Call("POST", path, Approval.model_validate)


def reject(ident: str, reason: str | None) -> Call[Approval]:
    path = f"/approvals/{segment(ident, 'held item')}/reject"
    return Call("POST", path, Approval.model_validate, json=body(reason=reason))


def policy() -> Call[Policy]:
    return Call("GET", "/policy", Policy.model_validate)


def set_policy(
    kinds: Sequence[str], priorities: Sequence[str], senders: Sequence[str]
) -> Call[Policy]:
    rules = {"kinds": list(kinds), "priorities": list(priorities), "senders": list(senders)}
    return Call("PUT", "/policy", Policy.model_validate, json={"approval": rules})


def reservations(
    agent: str | None, path: str | None, active: bool | None, limit: int | None, cursor: str | None
) -> Call[Page[Reservation]]:
    params = query(agent=agent, path=path, active=active, limit=limit, cursor=cursor)
    return Call("GET", "/reservations", Page[Reservation].model_validate, params)


def release_reservation(reservation_id: str, reason: str | None) -> Call[Reservation]:
    path = f"/reservations/{segment(reservation_id, 'reservation')}"
    return Call("DELETE", path, Reservation.model_validate, query(reason=reason))
