"""The operator's calls (an operator token, ``ops_…``) of :class:`AsyncClient`, as a mixin: the
workspace's agents, their keys, sessions and webhooks, deliveries and events, threads' closes,
stats, the alert webhook, operator and enrolment tokens, and the approval gate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from inbots.client import _calls
from inbots.client._base import Call
from inbots.client._models import (
    Agent,
    AlertWebhook,
    Approval,
    Brief,
    Delivery,
    Enrollment,
    Event,
    Key,
    NewEnrollment,
    NewKey,
    NewOperatorToken,
    OperatorToken,
    Page,
    Policy,
    RegisteredAgent,
    Reservation,
    Session,
    Stats,
    Thread,
    Webhook,
)

T = TypeVar("T")


class AsyncOperatorCalls:
    """What the operator may call; each call's path and fields are in :mod:`._calls`."""

    async def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    async def register_agent(
        self, name: str, description: str | None = None, webhook_url: str | None = None
    ) -> RegisteredAgent:
        """Operator: register an agent. Its ``api_key`` is in this answer only."""
        return await self._send(_calls.register_agent(name, description, webhook_url))

    async def agents(self) -> list[Agent]:
        """Operator: every agent of the workspace, archived ones included."""
        return await self._send(_calls.agents())

    async def agent(self, id_or_username: str) -> Agent:
        """Operator: one agent."""
        return await self._send(_calls.agent(id_or_username))

    async def archive_agent(self, id_or_username: str) -> Agent:
        """Operator: archive an agent (idempotent): its keys stop working at once; its history
        stays."""
        return await self._send(_calls.archive_agent(id_or_username))

    async def set_agent_brief(self, id_or_username: str, text: str) -> Brief:
        """Operator: replace an agent's brief (Markdown; an empty text removes it). Read it with
        :meth:`brief`."""
        return await self._send(_calls.set_agent_brief(id_or_username, text))

    async def agent_keys(self, id_or_username: str) -> list[Key]:
        """Operator: an agent's keys, without the keys themselves."""
        return await self._send(_calls.agent_keys(id_or_username))

    async def issue_agent_key(self, id_or_username: str, label: str | None = None) -> NewKey:
        """Operator: issue an agent another key; ``api_key`` is in this answer only."""
        return await self._send(_calls.issue_agent_key(id_or_username, label))

    async def revoke_agent_key(self, id_or_username: str, key_id: str) -> None:
        """Operator: revoke one of an agent's keys at once. ``Conflict`` for its last key."""
        await self._send(_calls.revoke_agent_key(id_or_username, key_id))

    async def agent_sessions(self, id_or_username: str) -> list[Session]:
        """Operator: an agent's sessions (MCP sessions, ``X-Inbots-Session`` clients), latest
        first."""
        return await self._send(_calls.agent_sessions(id_or_username))

    async def agent_webhook(self, id_or_username: str) -> Webhook:
        """Operator: an agent's webhook URL and signing secret; ``NotFound`` when it has none."""
        return await self._send(_calls.agent_webhook(id_or_username))

    async def set_agent_webhook(
        self, id_or_username: str, url: str, *, events: Sequence[str] | None = None
    ) -> Webhook:
        """Operator: set or change an agent's webhook URL (a secret is minted the first time)
        and, with ``events``, the notification types it receives."""
        return await self._send(_calls.set_agent_webhook(id_or_username, url, events))

    async def remove_agent_webhook(self, id_or_username: str) -> None:
        """Operator: remove an agent's webhook and discard its secret."""
        await self._send(_calls.remove_agent_webhook(id_or_username))

    async def rotate_agent_webhook(self, id_or_username: str) -> Webhook:
        """Operator: a new signing secret for an agent's webhook; the previous one keeps signing
        for a day."""
        return await self._send(_calls.rotate_agent_webhook(id_or_username))

    async def deliveries(
        self,
        *,
        state: str | None = None,
        agent: str | None = None,
        thread: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Delivery]:
        """Operator: receipts, newest first; ``state`` a derived state (``stalled``,
        ``failed``, …), ``agent`` the recipient (id or username), ``thread`` a thread id."""
        return await self._send(_calls.deliveries(state, agent, thread, limit, cursor))

    async def delivery(self, delivery_id: str) -> Delivery:
        """Operator: one receipt with its webhook attempts."""
        return await self._send(_calls.delivery(delivery_id))

    async def redeliver(self, delivery_id: str) -> Delivery:
        """Operator: publish a delivery's notification again (a failed one too)."""
        return await self._send(_calls.redeliver(delivery_id))

    async def events(
        self,
        *,
        type: str | None = None,
        state: str | None = None,
        agent: str | None = None,
        thread: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Event]:
        """Operator: the notifications other than new mail (acknowledgements, rejections,
        close requests and closes, the operator's alerts), newest first; ``type`` one of them,
        ``state`` ``notified``, ``failed``, ``pending`` or ``unsent``, ``agent`` the agent
        told."""
        return await self._send(_calls.events(type, state, agent, thread, limit, cursor))

    async def event(self, event_id: str) -> Event:
        """Operator: one event with its webhook attempts."""
        return await self._send(_calls.event(event_id))

    async def redeliver_event(self, event_id: str) -> Event:
        """Operator: publish an event's notification again (a failed one too)."""
        return await self._send(_calls.redeliver_event(event_id))

    async def close_thread(self, thread_id: str) -> Thread:
        """Operator: close a thread (confirming a request, or outright)."""
        return await self._send(_calls.close_thread(thread_id))

    async def dismiss_close_request(self, thread_id: str) -> Thread:
        """Operator: dismiss a pending close request; the thread is open again. ``Conflict``
        when none is pending."""
        return await self._send(_calls.dismiss_close_request(thread_id))

    async def stats(self) -> Stats:
        """Operator: the workspace's counters (deliveries by state, agents, threads, the oldest
        stalled, recent failures, the sweep, the broker and the jobs waiting for a worker)."""
        return await self._send(_calls.stats())

    async def alert_webhook(self) -> AlertWebhook:
        """Operator: the alert webhook's URL and alert types (never the secret); ``NotFound``
        when there is none."""
        return await self._send(_calls.alert_webhook())

    async def set_alert_webhook(
        self, url: str, *, events: Sequence[str] | None = None
    ) -> AlertWebhook:
        """Operator: set or change the alert webhook URL and, with ``events``, the alert types it
        receives (a new one receives all). The first time, the answer holds the signing secret,
        shown this once."""
        return await self._send(_calls.set_alert_webhook(url, events))

    async def remove_alert_webhook(self) -> None:
        """Operator: remove the alert webhook and discard its secret (idempotent)."""
        await self._send(_calls.remove_alert_webhook())

    async def rotate_alert_webhook(self) -> AlertWebhook:
        """Operator: a new signing secret for the alert webhook, in this answer only; the
        previous one keeps signing for a day."""
        return await self._send(_calls.rotate_alert_webhook())

    async def tokens(self) -> list[OperatorToken]:
        """Operator: every operator token of the workspace, revoked ones included (never the
        token itself)."""
        return await self._send(_calls.tokens())

    async def create_token(self, label: str | None = None) -> NewOperatorToken:
        """Operator: mint another operator token; ``token`` is in this answer only."""
        return await self._send(_calls.create_token(label))

    async def revoke_token(self, token_id: str) -> None:
        """Operator: revoke an operator token at once. ``Conflict`` for the last live one."""
        await self._send(_calls.revoke_token(token_id))

    async def enrollments(self) -> list[Enrollment]:
        """Operator: the enrolment tokens, newest first (never the token itself)."""
        return await self._send(_calls.enrollments())

    async def create_enrollment(
        self, uses: int | None = None, expires_in: float | None = None, label: str | None = None
    ) -> NewEnrollment:
        """Operator: an enrolment token with which ``uses`` agents (default 1) may register
        themselves (:meth:`register`) for ``expires_in`` seconds (default a day); ``token`` is
        in this answer only."""
        return await self._send(_calls.create_enrollment(uses, expires_in, label))

    async def revoke_enrollment(self, enrollment_id: str) -> None:
        """Operator: revoke an enrolment token (idempotent): nobody registers with it any more."""
        await self._send(_calls.revoke_enrollment(enrollment_id))

    async def approvals(self) -> list[Approval]:
        """Operator: what waits for a decision, oldest first (the approval gate): held
        messages, threads a held sender opened, held briefs."""
        return await self._send(_calls.approvals())

    async def approve(self, ident: str) -> Approval:
        """Operator: approve what waits, by its :attr:`Approval.id` (a message: its recipients
        get it now; a thread or a brief: the others see it). ``Conflict`` (``not_held``) when it
        is not waiting."""
        return await self._send(_calls.approve(ident))

    async def reject(self, ident: str, reason: str | None = None) -> Approval:
        """Operator: reject what waits, by its :attr:`Approval.id` (a message never reaches its
        recipients and its sender is told; a thread stays hidden; a brief is removed).
        ``Conflict`` (``not_held``) when it is not waiting."""
        return await self._send(_calls.reject(ident, reason))

    async def policy(self) -> Policy:
        """Operator: the workspace's approval policy."""
        return await self._send(_calls.policy())

    async def set_policy(
        self,
        kinds: Sequence[str] = (),
        priorities: Sequence[str] = (),
        senders: Sequence[str] = (),
    ) -> Policy:
        """Operator: replace the approval policy whole (a list left out is emptied): messages
        of ``kinds`` or ``priorities``, and everything the agents ``senders`` (usernames) write
        that others read, are held for the operator. ``ValidationError`` names an unknown
        value's field."""
        return await self._send(_calls.set_policy(kinds, priorities, senders))

    async def reservations(
        self,
        *,
        agent: str | None = None,
        path: str | None = None,
        active: bool | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Reservation]:
        """The workspace's reservations, newest first: by holder, those that would conflict
        with ``path``, active (True) or ended (False)."""
        return await self._send(_calls.reservations(agent, path, active, limit, cursor))

    async def release_reservation(
        self, reservation_id: str, *, reason: str | None = None
    ) -> Reservation:
        """Operator: release any agent's reservation; ``reason`` is recorded."""
        return await self._send(_calls.release_reservation(reservation_id, reason))
