"""The answers, typed. Field names are the HTTP API's own (see ``docs/api.md``); times are
timezone-aware ``datetime`` in UTC and go back to JSON as RFC 3339 with a ``Z``.

Fields are declared in the order the API sends them, so ``model_dump(mode="json",
exclude_unset=True)`` gives an answer back as it came (the ``inbots`` CLI prints its
``--output json`` that way). A field with a default may be absent from an answer; a field a
model does not declare is kept (``model_extra``, and in ``model_dump()``).

Models are built on first use (``defer_build``), not at import: a program pays for the answers
it reads, and ``inbots --help`` for none.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, PlainSerializer

from inbots.client._types import _rfc3339

Timestamp = Annotated[datetime, PlainSerializer(_rfc3339, return_type=str, when_used="json")]

T = TypeVar("T")


class Model(BaseModel):
    """Every answer: unknown fields kept, declared ones type-checked."""

    model_config = ConfigDict(extra="allow", defer_build=True)


class Page(Model, Generic[T]):
    """One page of a list. ``next_cursor`` is None at the end; pass it back as ``cursor``."""

    items: list[T]
    next_cursor: str | None = None


# Agents


class Agent(Model):
    """An agent (``GET /v1/me``, the operator's ``GET /v1/agents``)."""

    id: str
    name: str
    username: str
    description: str | None
    status: str  # active | archived
    created_at: Timestamp
    last_seen_at: Timestamp | None
    active: bool
    never_connected: bool
    webhook_url: str | None
    unread: int
    has_brief: bool = False


class Webhook(Model):
    """An agent's webhook: its URL and the current signing secret (``whsec_…``)."""

    url: str
    signing_secret: str
    previous_secret_expires_at: Timestamp | None = None
    webhook_events: list[str] | None = None


class RegisteredAgent(Agent):
    """``POST /v1/agents``: the agent, its key (shown this once) and its webhook, if any."""

    api_key: str
    webhook: Webhook | None = None


class DirectoryEntry(Model):
    """Someone an agent can write to (``GET /v1/directory``)."""

    username: str
    kind: str = "agent"  # "agent", or "person" for the operator
    description: str | None
    active: bool
    last_seen_at: Timestamp | None
    has_brief: bool = False  # read it with brief(username)


class Brief(Model):
    """An agent's brief, Markdown saying what it does and how to work with it."""

    username: str
    brief: str | None
    updated_at: Timestamp | None = None


class Key(Model):
    """A key, without the key itself (``GET /v1/me/keys``, the operator's
    ``GET /v1/agents/{id}/keys``): ``hint`` is its first characters, ``current`` marks the key
    making the call."""

    id: str
    label: str | None
    hint: str
    created_at: Timestamp
    last_used_at: Timestamp | None
    current: bool


class Session(Model):
    """One client of an agent (``GET /v1/me/sessions``, the operator's
    ``GET /v1/agents/{id}/sessions``): an MCP session or a client sending ``X-Inbots-Session``;
    ``active`` when seen within the last few minutes."""

    id: str
    label: str | None
    client: str | None
    first_seen_at: Timestamp
    last_seen_at: Timestamp
    active: bool


# Deliveries and receipts


class Attempt(Model):
    """One webhook attempt of a delivery (operator view)."""

    number: int
    publish: int
    trigger: str
    url: str
    started_at: Timestamp
    duration_ms: int | None
    status_code: int | None
    reason: str
    response_excerpt: str | None


class Delivery(Model):
    """One recipient's copy of a message and its receipt: every stamp, ``null`` until set."""

    id: str
    message_id: str
    thread_id: str
    recipient: str
    state: str
    accepted_at: Timestamp
    notified_at: Timestamp | None = None
    delivered_at: Timestamp | None = None
    fetched_at: Timestamp | None = None
    working_at: Timestamp | None = None
    working_note: str | None = None  # the note of the last working heartbeat
    acknowledged_at: Timestamp | None = None
    failed_at: Timestamp | None = None
    failure_reason: str | None = None
    stalled_at: Timestamp | None = None
    expired_at: Timestamp | None = None  # its message's ttl_seconds passed
    publish_count: int = 0
    last_published_at: Timestamp | None = None
    next_attempt_at: Timestamp | None = None
    outcome: str | None = None
    note: str | None = None
    held_at: Timestamp | None = None  # only when the approval gate held its message
    approved_at: Timestamp | None = None
    rejected_at: Timestamp | None = None
    rejection_reason: str | None = None
    attempts: list[Attempt] | None = None  # the operator's GET /v1/deliveries/{id}


class Receipt(Model):
    """What became of a message for one recipient, as its sender sees it
    (``delivery_id`` is that recipient's copy). In a long-poll's ``receipts``
    (``events="receipts"``) it also names the message, its thread and the event (``event_id``,
    the ``webhook-id`` of the matching ``message.acknowledged`` notification)."""

    delivery_id: str | None = None
    recipient: str
    state: str
    delivered_at: Timestamp | None = None
    fetched_at: Timestamp | None = None
    working_at: Timestamp | None = None
    working_note: str | None = None  # the note of the recipient's last working heartbeat
    acknowledged_at: Timestamp | None = None
    outcome: str | None = None
    note: str | None = None
    rejected_at: Timestamp | None = None  # the operator rejected the message (state rejected)
    rejection_reason: str | None = None
    event_id: str | None = None
    message_id: str | None = None
    thread_id: str | None = None


# Messages and threads


class Attachment(Model):
    """A file a message carries (its bytes: ``Client.attachment(id)``)."""

    id: str
    name: str
    content_type: str
    bytes: int
    sha256: str


class Message(Model):
    """A message with its full body."""

    id: str
    thread_id: str
    sender: str
    kind: str
    priority: str = "normal"  # normal | urgent
    summary: str | None
    body: str
    reply_to: str | None
    created_at: Timestamp
    ttl_seconds: int | None = None  # expiry, when the sender set one
    expires_at: Timestamp | None = None
    attachments: list[Attachment] = []  # absent when it carries none
    receipts: list[Receipt] | None = None  # the sender's own messages


class ThreadMessage(Message):
    """A message in the operator's view of a thread, with each recipient's receipt."""

    deliveries: list[Delivery]


class Thread(Model):
    """A thread: one task, its participants and status (open, close_requested, closed)."""

    id: str
    title: str
    goal: str | None
    ref: str | None = None  # a task reference set at opening
    status: str
    opened_by: str
    participants: list[str]
    created_at: Timestamp
    last_activity_at: Timestamp | None = None
    close_requested_at: Timestamp | None = None
    closed_at: Timestamp | None = None
    messages: list[ThreadMessage] | None = None  # GET /v1/threads/{id} as the operator


class SentDelivery(Model):
    """A delivery as a send answers it: who it is for and its state."""

    id: str
    recipient: str
    state: str


class ReplyAcknowledged(Model):
    """A reply sent with ``acknowledge``: the caller's delivery of the message it answers, and
    the outcome it now has."""

    delivery_id: str
    outcome: str | None = None


class Skipped(Model):
    """A recipient a send to several left out: ``inbox_full`` or ``pair_full`` (a cap)."""

    recipient: str
    reason: str


class SendResult(Model):
    """A send's answer. ``duplicate`` is true for a repeat of an idempotency key: the message
    and deliveries are then the original ones."""

    message: Message
    deliveries: list[SentDelivery]
    duplicate: bool
    held: bool = False  # the workspace's approval policy holds it for the operator
    # a send with to and ref went on in the open thread of the same people and ref
    reused_thread: bool = False
    acknowledged: ReplyAcknowledged | None = None  # sent with acknowledge= and reply_to
    skipped: list[Skipped] = []  # recipients at a cap, left out


class ReadResult(Model):
    """``GET /v1/messages/{id}``: the message, the caller's delivery of it (None for a message
    the caller sent or reads as the operator), and for its sender the receipts."""

    message: Message
    delivery: Delivery | None = None
    receipts: list[Receipt] | None = None


# The inbox


class InboxItem(Model):
    """One unacknowledged delivery as the inbox lists it: the summary, not the body (``body``
    is set when asked for: ``include="body"``, or ``messages(include_body=True)``)."""

    delivery_id: str
    message_id: str
    thread_id: str
    thread_title: str
    thread_ref: str | None = None
    sender: str
    kind: str
    priority: str = "normal"
    summary: str
    sent_at: Timestamp
    state: str
    body: str | None = None  # include=body, or filled in by messages()
    attachments: list[Attachment] = []  # with the body, when the message carries any


class Inbox(Model):
    """An inbox page. ``waiting`` counts all unacknowledged mail; ``more`` is true when that is
    more than ``returned``. ``next_cursor`` pages on without acknowledging."""

    items: list[InboxItem]
    returned: int
    waiting: int
    more: bool
    next_cursor: str | None = None
    receipts: list[Receipt] = []  # a long-poll with events="receipts"


class AckResult(Model):
    """Which ids were acknowledged now, which already were, and which name nothing of yours."""

    acknowledged: list[str]
    already: list[str]
    not_found: list[str]
    expired: list[str] = []  # expired unacknowledged before the call: not acknowledged


# The outbox and search


class OutboxItem(Model):
    """A message the caller sent, with every recipient's receipt."""

    message: Message
    receipts: list[Receipt]


class SearchHit(Model):
    """One search result, with a snippet of where the words matched."""

    message_id: str
    thread_id: str
    thread_title: str
    sender: str
    kind: str
    summary: str | None
    snippet: str | None
    created_at: Timestamp


# The server


class Limits(Model):
    """The limits the server enforces (``GET /v1/limits``), each the ``INBOTS_`` setting of the
    same name. A limit this model does not name is kept as an extra field."""

    message_body_max: int
    summary_required_over: int
    summary_max: int
    summary_shown: int = 120  # how much of a summary an inbox item shows
    thread_title_max: int
    thread_goal_max: int
    thread_ref_max: int = 128
    description_max: int
    brief_max: int | None = None  # an agent's brief, in characters
    note_max: int
    idempotency_key_max: int
    ack_batch_max: int
    request_body_max_bytes: int
    attachments_max: int = 5
    attachment_bytes: int = 1024 * 1024
    attachments_total_bytes: int = 4 * 1024 * 1024
    list_default: int
    list_max: int
    check_inbox_default: int
    check_inbox_max: int
    inbox_bodies_max: int = 20  # an inbox page with bodies holds at most this many
    search_query_max: int | None = None  # search (characters, then words)
    search_words_max: int | None = None
    wait_default_seconds: float
    wait_max_seconds: float
    # Governance: caps and the send rate limit (0: off), expiry, retention (days; 0:
    # keep forever), enrolment tokens, agent keys and session labels.
    cap_per_recipient: int | None = None
    cap_per_pair: int | None = None
    rate_limit_per_minute: int | None = None
    rate_limit_burst: int | None = None
    ttl_min_seconds: int | None = None
    ttl_max_seconds: int | None = None
    retention_days: float | None = None
    enrollment_uses_max: int | None = None
    enrollment_expires_in_max: float | None = None
    agent_keys_max: int | None = None
    key_label_max: int | None = None
    session_label_max: int | None = None


# The approval gate (operator)


class Approval(Model):
    """Something waiting for the operator (``GET /v1/approvals``), by ``subject``: a held
    ``message`` (with its thread's title, goal and ref, its recipients and body), a held
    ``thread`` none of whose messages waits (a held sender opened it), or an agent's held
    ``brief``. ``id`` is what :meth:`~inbots.client.Client.approve` and ``reject`` take. After
    a decision also ``state`` (``approved`` or ``rejected``), ``approved_at``, ``rejected_at``
    and ``reason``."""

    subject: str = "message"
    id: str = ""
    message_id: str | None = None
    thread_id: str | None = None
    sender: str
    kind: str | None = None
    priority: str | None = None
    summary: str | None = None
    body: str | None = None
    thread_title: str | None = None
    thread_goal: str | None = None
    thread_ref: str | None = None
    recipients: list[str] = []
    brief: str | None = None
    held_at: Timestamp
    state: str | None = None
    approved_at: Timestamp | None = None
    rejected_at: Timestamp | None = None
    reason: str | None = None


class ApprovalRules(Model):
    """What the approval gate holds: messages of these kinds, of these priorities, and
    everything these agents (usernames) write that others read."""

    kinds: list[str] = []
    priorities: list[str] = []
    senders: list[str] = []


class Policy(Model):
    """The workspace's policy (``GET``/``PUT /v1/policy``); ``updated_at`` is None while it was
    never set."""

    approval: ApprovalRules
    updated_at: Timestamp | None = None


# The operator's views and tools


class Event(Model):
    """A notification other than new mail, as the operator sees it (``GET /v1/events``): the
    agent told (``recipient``) of what (``type``) someone did (``actor``), and how its push went
    (``state``: ``notified``, ``failed``, ``pending`` or ``unsent``). An operator's alert has
    ``alert``, its fields as its notification carries them (``None`` for an agent's event)."""

    id: str
    type: str
    recipient: str
    actor: str
    thread_id: str | None
    message_id: str | None
    delivery_id: str | None
    outcome: str | None
    note: str | None
    created_at: Timestamp
    shown_at: Timestamp | None
    state: str
    notified_at: Timestamp | None
    failed_at: Timestamp | None
    failure_reason: str | None
    publish_count: int
    last_published_at: Timestamp | None
    next_attempt_at: Timestamp | None
    alert: dict[str, Any] | None = None
    attempts: list[Attempt] | None = None  # GET /v1/events/{id}


class QueueCounts(Model):
    """The notify jobs waiting for a worker: in all (``depth``), the oldest one's wait, and by
    queue (``notify``, ``notify-retry``, ``alerts``, ``sweep``)."""

    depth: int
    oldest_age_seconds: float | None
    queues: dict[str, int]


class Stats(Model):
    """The workspace's counters (``GET /v1/stats``): ``deliveries`` by derived state (every
    state, zero included, and ``total``), ``agents`` (``total``, ``active``,
    ``never_connected``, ``archived``), ``threads`` by status, the oldest stalled delivery and
    the oldest notification still owed (seconds), the failures of the last hour, when the
    renotify sweep last ran, whether the ``broker`` answers (``up``, ``down`` or ``embedded``),
    and the ``queue`` waiting for a worker (``None`` when the broker does not answer)."""

    deliveries: dict[str, int]
    agents: dict[str, int]
    threads: dict[str, int]
    oldest_stalled_seconds: float | None
    oldest_unnotified_seconds: float | None
    failed_last_hour: int
    attempts_failed_last_hour: int
    last_sweep_at: Timestamp | None
    last_sweep_age_seconds: float | None
    broker: str
    queue: QueueCounts | None
    generated_at: Timestamp


class AlertWebhook(Model):
    """The operator's alert webhook (``/v1/operator/webhook``): its URL and the alert types it
    receives (``events``). ``signing_secret`` is only in the answer that minted it (the first
    set, and each rotate); ``None`` otherwise."""

    url: str
    events: list[str]
    signing_secret: str | None = None
    previous_secret_expires_at: Timestamp | None = None


class NewKey(Model):
    """An agent key just issued: ``api_key`` is in this answer only."""

    id: str
    label: str | None
    api_key: str
    hint: str
    created_at: Timestamp


class OperatorToken(Model):
    """An operator token, without the token (``GET /v1/tokens``); ``current`` marks the one
    making the call."""

    id: str
    label: str | None
    created_at: Timestamp
    last_used_at: Timestamp | None
    revoked_at: Timestamp | None
    current: bool


class NewOperatorToken(Model):
    """An operator token just minted: ``token`` is in this answer only."""

    id: str
    label: str | None
    token: str
    created_at: Timestamp


class Enrollment(Model):
    """An enrolment token, without the token (``GET /v1/enrollments``). ``state``: ``active``,
    ``spent`` (no uses left), ``expired`` or ``revoked``."""

    id: str
    label: str | None
    uses: int
    uses_left: int
    created_at: Timestamp
    expires_at: Timestamp
    last_used_at: Timestamp | None
    revoked_at: Timestamp | None
    state: str


class NewEnrollment(Model):
    """An enrolment token just created: ``token`` (``enr_…``) is in this answer only."""

    id: str
    token: str
    uses: int
    expires_at: Timestamp
    label: str | None


class Reservation(Model):
    """An advisory lease on repository paths (``/v1/reservations``): ``agent`` intends to change
    ``paths`` until ``expires_at``; active while ``released_at`` is None and it has not expired."""

    id: str
    agent: str
    paths: list[str]
    exclusive: bool
    reason: str | None
    created_at: Timestamp
    expires_at: Timestamp
    released_at: Timestamp | None
