"""The twelve agent tools, defined once for both transports.

A tool is a name, a description written for a model that has never seen Inbots, an argument model
(checked here, with the HTTP API's sentences), a result model (published as the output schema: the
HTTP response's fields), a call on a :class:`~inbots.mcp.backends.Backend`, and a short text
rendering. :func:`build_server` serves them with the MCP SDK's low-level server, so the tool
surface is the same whether the backend runs services in-process or calls the HTTP API.

Every failure is a tool result with ``isError: true`` whose text is the sentence the HTTP API
would give (its ``code``/``field`` ride along as structured content); nothing a caller sends
can end the session.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, get_origin

from mcp.server import Server, ServerRequestContext
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inbots import __version__
from inbots.agents.schemas import AgentRead, Directory
from inbots.deliveries.schemas import AckResult, Inbox
from inbots.errors import InbotsError, Invalid
from inbots.kit.schema import Request
from inbots.mcp.backends import Backend, Json, ToolLimits
from inbots.messages.models import KINDS
from inbots.messages.schemas import History, MessageWithDelivery, SendResult
from inbots.threads.schemas import ThreadList, ThreadRead

log = logging.getLogger(__name__)

OUTCOMES = ("done", "declined")

INSTRUCTIONS = """\
Inbots is the mailbox you share with other agents and the human operator who owns them. Work is
organised in threads, one per task; a message posted to a thread reaches every other participant.
At the start of each turn call check_inbox. Before acting on a message, read_message (the inbox
shows summaries only). When you have acted on it - or decided not to - acknowledge it, with
outcome done or declined: every message you receive needs an acknowledgement. Before opening a
thread, check list_threads and reuse the thread for that task if there is one. With nothing else
to do, wait_for_mail instead of polling."""


class InternalError(InbotsError):
    code = "internal_error"
    status = 500


# Argument models. Types are checked here (as the HTTP request models do); limits and the rules
# that are settings are checked by the services, so their sentences are the HTTP API's.


class Arguments(Request):
    model_config = ConfigDict(extra="forbid")


class NoArguments(Arguments):
    pass


def _choice(*values: str) -> dict[str, Any]:
    return {"enum": [*values, None]}


class ListAgentsArguments(Arguments):
    query: str | None = Field(
        default=None, description="Only agents whose username or description contains this text."
    )
    active_only: bool = Field(
        default=False, description="Only agents that made a call in the last few minutes."
    )


class OpenThreadArguments(Arguments):
    title: str = Field(description="What the task is, in a few words (up to 200 characters).")
    goal: str | None = Field(
        default=None, description="What done looks like (optional, up to 2,000 characters)."
    )
    participants: list[str] = Field(
        description="Usernames of the agents to work with (from list_agents); not yourself."
    )


class AddParticipantArguments(Arguments):
    thread_id: str = Field(description="The thread's id (th_…), from list_threads.")
    username: str = Field(description="The agent to add, by username (from list_agents).")


class SendMessageArguments(Arguments):
    thread_id: str = Field(description="The thread to post to (th_…).")
    body: str = Field(description="The message. Point at files or URLs rather than pasting them.")
    summary: str | None = Field(
        default=None,
        description="One line saying what you are asking for; what recipients see in their "
        "inbox. Required when the body is long.",
    )
    kind: str | None = Field(
        default=None,
        description="How the reader should triage it: task, question, update (default), "
        "decision, handoff or ack.",
        json_schema_extra=_choice(*KINDS),
    )
    reply_to: str | None = Field(
        default=None, description="The id of the message (msg_…) in this thread you answer."
    )
    idempotency_key: str | None = Field(
        default=None,
        description="Any unique string (visible ASCII, no spaces). Repeating a send with the same "
        "key and content returns the original instead of sending twice.",
    )


class CheckInboxArguments(Arguments):
    limit: int | None = Field(default=None, description="How many items to list at most.")


class ReadMessageArguments(Arguments):
    id: str = Field(description="A message id (msg_…) or a delivery id (dlv_…) from check_inbox.")


class ReadThreadArguments(Arguments):
    thread_id: str = Field(description="The thread (th_…).")
    since: str | None = Field(
        default=None,
        description="Only messages after this message id (msg_…) or RFC 3339 time.",
    )
    limit: int | None = Field(default=None, description="How many messages at most.")
    cursor: str | None = Field(
        default=None, description="The next_cursor of the previous page, to read on."
    )


class AcknowledgeArguments(Arguments):
    ids: list[str] = Field(description="Delivery ids (dlv_…) or message ids (msg_…).")
    outcome: str | None = Field(
        default=None,
        description="done (you acted on it) or declined (you will not).",
        json_schema_extra=_choice(*OUTCOMES),
    )
    note: str | None = Field(
        default=None, description="A short note for the sender, e.g. why you declined."
    )


class WaitForMailArguments(Arguments):
    timeout_seconds: float | None = Field(
        default=None, description="How long to wait at most, in seconds."
    )


class ThreadArguments(Arguments):
    thread_id: str = Field(description="The thread (th_…).")


# Results: the HTTP responses' models; the inbox answers add one sentence.


class InboxAnswer(Inbox):
    notice: str = Field(description="How much is waiting, in words, and what to do next.")


# Text renderings, for harnesses that show the model only text.


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _thread(t: Json) -> str:
    lines = [f"Thread {t['id']} “{t['title']}” is {t['status'].replace('_', ' ')}."]
    if t.get("goal"):
        lines.append(f"Goal: {t['goal']}")
    lines.append(f"Opened by {t['opened_by']}; participants: {', '.join(t['participants'])}.")
    return "\n".join(lines)


def render_whoami(a: Json) -> str:
    lines = [f"You are {a['username']} (agent id {a['id']})."]
    if a.get("description"):
        lines.append(f"Description: {a['description']}")
    if a.get("webhook_url"):
        lines.append(f"Your webhook: {a['webhook_url']} (Inbots notifies it when mail arrives).")
    else:
        lines.append("No webhook: you find mail by calling check_inbox or wait_for_mail.")
    lines.append(f"Unacknowledged mail waiting for you: {a['unread']}.")
    return "\n".join(lines)


def render_directory(d: Json) -> str:
    items = d["items"]
    if not items:
        return "No other agent matches: nobody else can receive mail here yet."
    lines = [f"{_plural(len(items), 'agent')} you can work with, most recently active first:"]
    for a in items:
        seen = "active now" if a["active"] else f"last seen {a['last_seen_at'] or 'never'}"
        about = f" — {a['description']}" if a.get("description") else ""
        lines.append(f"- {a['username']}{about} ({seen})")
    return "\n".join(lines)


def render_threads(d: Json) -> str:
    items = d["items"]
    if not items:
        return "You are in no open thread. To start a task, open_thread."
    lines = [f"You are in {_plural(len(items), 'thread')}, most recent activity first:"]
    for t in items:
        lines.append(
            f"- {t['id']} “{t['title']}” [{t['status']}] opened by {t['opened_by']}; "
            f"participants: {', '.join(t['participants'])}; last activity {t['last_activity_at']}"
        )
    lines.append("Reuse the thread of a task rather than opening another one for it.")
    return "\n".join(lines)


def render_opened(t: Json) -> str:
    return (
        _thread(t)
        + f"\nNothing is sent yet: send_message with thread_id {t['id']} to say what you need."
    )


def render_thread(t: Json) -> str:
    return _thread(t)


def render_close_requested(t: Json) -> str:
    return (
        _thread(t) + "\nThe operator has been asked to close it. Until then participants can read "
        "and acknowledge, but nobody can send."
    )


def render_sent(r: Json) -> str:
    m = r["message"]
    to = ", ".join(f"{d['recipient']} ({d['id']})" for d in r["deliveries"]) or "nobody"
    if r["duplicate"]:
        return (
            f"Nothing new was sent: this idempotency_key was already used for this same message, "
            f"{m['id']} in thread {m['thread_id']}, which went to {to}."
        )
    return f"Sent {m['kind']} {m['id']} to thread {m['thread_id']}; one delivery each for {to}."


def inbox_notice(inbox: Json) -> str:
    returned, waiting = inbox["returned"], inbox["waiting"]
    more = waiting - returned
    if waiting == 0:
        return "Your inbox is empty: no unacknowledged mail."
    if returned == 0:
        return (
            f"Nothing new. {_plural(waiting, 'unacknowledged message')} you have already been "
            f"shown {'is' if waiting == 1 else 'are'} still waiting: check_inbox lists them."
        )
    if more > 0:
        return (
            f"{more} more {'message is' if more == 1 else 'messages are'} waiting; call "
            "check_inbox again after acknowledging these."
        )
    return "That is everything waiting for you."


def render_inbox(inbox: Json) -> str:
    items = inbox["items"]
    if not items:
        return inbox["notice"]
    lines = [f"{_plural(len(items), 'unacknowledged message')}, oldest first:"]
    for n, i in enumerate(items, 1):
        lines.append(
            f"{n}. [{i['kind']}] from {i['sender']} in “{i['thread_title']}”: {i['summary']}\n"
            f"   delivery_id {i['delivery_id']}, message_id {i['message_id']}, "
            f"thread_id {i['thread_id']}, sent {i['sent_at']}"
        )
    lines.append(inbox["notice"])
    lines.append(
        "Listing marks nothing read. read_message gives the full body; acknowledge each one "
        "(done or declined) when you are finished with it."
    )
    return "\n".join(lines)


def render_message(r: Json) -> str:
    m, d = r["message"], r["delivery"]
    head = f"Message {m['id']} ({m['kind']}) from {m['sender']} in thread {m['thread_id']}, "
    head += f"sent {m['created_at']}"
    if m.get("reply_to"):
        head += f", replying to {m['reply_to']}"
    lines = [head + "."]
    if m.get("summary"):
        lines.append(f"Summary: {m['summary']}")
    lines += ["", m["body"], ""]
    if d is None:
        lines.append("No copy of it is addressed to you (you sent it, or joined later).")
    elif d["acknowledged_at"]:
        outcome = f" ({d['outcome']})" if d.get("outcome") else ""
        lines.append(f"You already acknowledged delivery {d['id']}{outcome}.")
    else:
        lines.append(
            f"When you have acted on it or decided not to, acknowledge delivery {d['id']} "
            "(outcome done or declined)."
        )
    return "\n".join(lines)


def render_history(h: Json) -> str:
    items = h["items"]
    if not items:
        return "No messages."
    lines = [f"{_plural(len(items), 'message')}, oldest first:"]
    for m in items:
        head = f"--- {m['id']} ({m['kind']}) from {m['sender']}, {m['created_at']}"
        if m.get("reply_to"):
            head += f", replying to {m['reply_to']}"
        lines.append(head)
        if m.get("summary"):
            lines.append(f"Summary: {m['summary']}")
        lines.append(m["body"])
    if h.get("next_cursor"):
        lines.append(f"--- More follow: read_thread again with cursor {h['next_cursor']!r}.")
    return "\n".join(lines)


def render_acks(r: Json) -> str:
    parts = []
    if r["acknowledged"]:
        parts.append(f"Acknowledged: {', '.join(r['acknowledged'])}.")
    if r["already"]:
        parts.append(f"Already acknowledged before: {', '.join(r['already'])}.")
    if r["not_found"]:
        parts.append(
            f"Not found among your deliveries in open threads: {', '.join(r['not_found'])}."
        )
    return " ".join(parts)


# The tools.

Invoke = Callable[[Backend, Any], Awaitable[Json]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    arguments: type[Arguments]
    result: type[BaseModel]
    invoke: Invoke
    render: Callable[[Json], str]
    read_only: bool = False
    idempotent: bool = False
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)

    NO_ANSWER: ClassVar[str] = "Something went wrong on our side; nothing was changed."

    @property
    def input_schema(self) -> dict[str, Any]:
        schema = self.arguments.model_json_schema()
        for name, (low, high) in self.bounds.items():
            schema["properties"][name].update(minimum=low, maximum=high)
        return schema

    def listing(self) -> Tool:
        return Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=self.input_schema,
            output_schema=self.result.model_json_schema(mode="serialization"),
            annotations=ToolAnnotations(
                title=self.title,
                read_only_hint=self.read_only,
                destructive_hint=False,
                idempotent_hint=self.idempotent or self.read_only,
                open_world_hint=False,
            ),
        )

    def parse(self, raw: dict[str, Any]) -> Any:
        """The arguments as the tool's model, or :class:`Invalid` with the HTTP-style sentence.
        A list sent as a JSON string (some harnesses do) is read as the list."""
        fields = self.arguments.model_fields
        values = dict(raw)
        for name, value in raw.items():
            if name in fields and isinstance(value, str) and _is_list(fields[name].annotation):
                try:
                    decoded = json.loads(value)
                except ValueError:
                    continue
                if isinstance(decoded, list):
                    values[name] = decoded
        try:
            return self.arguments.model_validate(values)
        except ValidationError as exc:
            raise self._invalid(exc.errors()[0]) from None

    def _invalid(self, err: Any) -> Invalid:
        loc = [str(p) for p in err.get("loc") or ()]
        kind = err.get("type", "")
        path = ".".join(loc)
        if kind == "extra_forbidden":
            takes = ", ".join(self.arguments.model_fields) or "no arguments"
            return Invalid(f"{self.name} has no argument {path!r}; it takes {takes}.", field=path)
        if kind == "missing":
            return Invalid(f"{path} is required.", field=path or None)
        msg = str(err.get("msg") or "is invalid")
        return Invalid(f"{path}: {msg[0].lower() + msg[1:]}.", field=loc[0] if loc else None)

    async def call(self, backend: Backend, raw: dict[str, Any]) -> CallToolResult:
        try:
            result = await self.invoke(backend, self.parse(raw))
            text = self.render(result)
        except InbotsError as exc:
            return failure(exc)
        except Exception:
            log.exception("MCP tool %s failed", self.name)
            return failure(InternalError(self.NO_ANSWER))
        return CallToolResult(content=[TextContent(text=text)], structured_content=result)


def failure(exc: InbotsError) -> CallToolResult:
    """A tool error: the HTTP error's sentence as text, its envelope as structured content."""
    return CallToolResult(
        content=[TextContent(text=exc.message)],
        structured_content={"error": exc.to_dict()},
        is_error=True,
    )


def _is_list(annotation: Any) -> bool:
    return get_origin(annotation) is list


async def _inbox_answer(found: Awaitable[Json]) -> Json:
    inbox = await found
    return {**inbox, "notice": inbox_notice(inbox)}


def tool_specs(limits: ToolLimits) -> list[ToolSpec]:
    """The tools, in the order a model meets them. Descriptions quote the server's limits."""
    L = limits
    wait_min, wait_max = 1, int(L.wait_max_seconds)
    return [
        ToolSpec(
            name="whoami",
            title="Who am I",
            description=(
                "Who you are in Inbots, the mailbox you share with other agents and the human "
                "operator who owns them: your username (what others put on threads), your "
                "description, your webhook URL if you have one (most agents have none and find "
                "mail with check_inbox), and how much unacknowledged mail is waiting. Changes "
                "nothing."
            ),
            arguments=NoArguments,
            result=AgentRead,
            invoke=lambda b, a: b.whoami(),
            render=render_whoami,
            read_only=True,
        ),
        ToolSpec(
            name="list_agents",
            title="List agents",
            description=(
                "The directory: the other agents of this workspace that can receive mail, most "
                "recently active first, with each one's username, description and whether it is "
                "active (it made a call in the last few minutes). Use it to find who should "
                "work on a task before open_thread or add_participant. Changes nothing."
            ),
            arguments=ListAgentsArguments,
            result=Directory,
            invoke=lambda b, a: b.list_agents(a.query, a.active_only),
            render=render_directory,
            read_only=True,
        ),
        ToolSpec(
            name="list_threads",
            title="List my threads",
            description=(
                "The threads you are in that are not closed, most recent activity first: id, "
                "title, goal, status (open, or close_requested: readable but no new messages), "
                "who opened it and who is on it. A thread is one task. Call this before "
                "open_thread and reuse the thread for the task if one exists, instead of "
                "opening a duplicate. Changes nothing; to see messages use read_thread."
            ),
            arguments=NoArguments,
            result=ThreadList,
            invoke=lambda b, a: b.list_threads(),
            render=render_threads,
            read_only=True,
        ),
        ToolSpec(
            name="open_thread",
            title="Open a thread",
            description=(
                "Start a thread for ONE new task, with the agents who should work on it (their "
                "usernames from list_agents); you become its opener and a participant. First "
                "check list_threads: if a thread for this task exists, post there with "
                "send_message instead. Opening sends nothing: follow with send_message. The "
                "answer's id (th_…) is the thread_id the other tools take."
            ),
            arguments=OpenThreadArguments,
            result=ThreadRead,
            invoke=lambda b, a: b.open_thread(a.title, a.goal, a.participants),
            render=render_opened,
        ),
        ToolSpec(
            name="add_participant",
            title="Add a participant",
            description=(
                "Put another agent (by username) on a thread you are in: it receives every "
                "later message and may read the whole history with read_thread. Only while the "
                "thread is open. Adding someone who is already there changes nothing."
            ),
            arguments=AddParticipantArguments,
            result=ThreadRead,
            invoke=lambda b, a: b.add_participant(a.thread_id, a.username),
            render=render_thread,
            idempotent=True,
        ),
        ToolSpec(
            name="send_message",
            title="Send a message",
            description=(
                "Post a message to a thread; every other participant gets its own copy (a "
                "delivery) in its inbox. Messages go to threads, never to agents directly: to "
                "reach someone new, add_participant or open_thread with them. body: 1 to "
                f"{L.message_body_max:,} characters; point at files or URLs rather than pasting "
                f"them. summary: one line, up to {L.summary_max} characters, saying what you "
                "are asking for; recipients see it in their inbox, and it is required when the "
                f"body is longer than {L.summary_required_over} characters. kind: task, "
                "question, update (default), decision, handoff or ack. reply_to: a message id "
                "in the same thread. idempotency_key: if you are unsure a send went through, "
                "repeat it with the same key and content and you get the original back "
                "(duplicate: true) instead of a second message. The answer lists one delivery "
                "per recipient."
            ),
            arguments=SendMessageArguments,
            result=SendResult,
            invoke=lambda b, a: b.send_message(
                a.thread_id, a.body, a.summary, a.kind, a.reply_to, a.idempotency_key
            ),
            render=render_sent,
        ),
        ToolSpec(
            name="check_inbox",
            title="Check inbox",
            description=(
                "Your unacknowledged mail, oldest first: one item per message with sender, "
                "thread, kind and a summary (not the body), plus its delivery_id and "
                "message_id. Call it at the start of every turn and when you finish a piece of "
                "work. Listing marks nothing read or done: items stay until you acknowledge "
                "them, so the same ones come back next time. For each item: read_message for "
                "the full body, act on it (or decide not to), then acknowledge it. limit: 1 to "
                f"{L.check_inbox_max} items (default {L.check_inbox_default}); the answer says "
                "in words how many more are waiting."
            ),
            arguments=CheckInboxArguments,
            result=InboxAnswer,
            invoke=lambda b, a: _inbox_answer(b.check_inbox(a.limit)),
            render=render_inbox,
            bounds={"limit": (1, L.check_inbox_max)},
        ),
        ToolSpec(
            name="read_message",
            title="Read a message",
            description=(
                "The full body of one message, by its message id (msg_…) or your delivery id "
                "(dlv_…), both shown by check_inbox. Reading records that you opened it (the "
                "sender can see that) but is not an acknowledgement: acknowledge it when you "
                "have acted on it or decided not to."
            ),
            arguments=ReadMessageArguments,
            result=MessageWithDelivery,
            invoke=lambda b, a: b.read_message(a.id),
            render=render_message,
            idempotent=True,
        ),
        ToolSpec(
            name="read_thread",
            title="Read a thread",
            description=(
                "A thread's history with full bodies, oldest first: catch up on a task before "
                "acting, for example after being added to a thread. Records that you opened "
                "your copies of these messages; acknowledges nothing. since: only messages "
                "after this message id or RFC 3339 time. limit: how many (default "
                f"{L.list_default}, at most {L.list_max}). When next_cursor is set, call again "
                "with it as cursor for the next page."
            ),
            arguments=ReadThreadArguments,
            result=History,
            invoke=lambda b, a: b.read_thread(a.thread_id, a.since, a.limit, a.cursor),
            render=render_history,
            idempotent=True,
            bounds={"limit": (1, L.list_max)},
        ),
        ToolSpec(
            name="acknowledge",
            title="Acknowledge",
            description=(
                "Say you are done with messages: you acted on them (outcome done) or decided "
                "not to (outcome declined, with a short note saying why). Every message you "
                "receive needs an acknowledgement, including ones you decline or that need no "
                "action: unacknowledged mail looks to the operator like work that was ignored. "
                f"ids: 1 to {L.ack_batch_max} delivery or message ids. note: up to "
                f"{L.note_max} characters. Acknowledged mail leaves your inbox. Safe to repeat: "
                "ids already acknowledged, or not yours, are reported under already and "
                "not_found, never as errors."
            ),
            arguments=AcknowledgeArguments,
            result=AckResult,
            invoke=lambda b, a: b.acknowledge(a.ids, a.outcome, a.note),
            render=render_acks,
            idempotent=True,
        ),
        ToolSpec(
            name="wait_for_mail",
            title="Wait for mail",
            description=(
                "Block until mail you have not been shown yet arrives, or until timeout_seconds "
                f"pass ({wait_min} to {wait_max}, default {int(L.wait_default_seconds)}; more "
                "is capped). Use it instead of calling check_inbox in a loop when you have "
                "nothing else to do. New mail comes back listed as in check_inbox; empty items "
                "means nothing new arrived in time. Then read and acknowledge as usual."
            ),
            arguments=WaitForMailArguments,
            result=InboxAnswer,
            invoke=lambda b, a: _inbox_answer(b.wait_for_mail(a.timeout_seconds)),
            render=render_inbox,
            bounds={"timeout_seconds": (wait_min, wait_max)},
        ),
        ToolSpec(
            name="request_close",
            title="Request close",
            description=(
                "Ask the operator to close a thread you opened, once its task is finished (only "
                "the opener may). The thread becomes close_requested: participants can still "
                "read and acknowledge, but nobody can send; the operator then closes it, or "
                "reopens it. Acknowledge your own open mail in the thread first."
            ),
            arguments=ThreadArguments,
            result=ThreadRead,
            invoke=lambda b, a: b.request_close(a.thread_id),
            render=render_close_requested,
            idempotent=True,
        ),
    ]


BackendFor = Callable[[ServerRequestContext[Any, Any]], Backend]


def build_server(backend_for: BackendFor, limits: ToolLimits | None = None) -> Server[Any]:
    """The MCP server for these tools. ``backend_for`` gives the backend of the request's caller
    (raising :class:`InbotsError` if there is none)."""
    specs = tool_specs(limits or ToolLimits())
    by_name = {spec.name: spec for spec in specs}
    listed = ListToolsResult(tools=[spec.listing() for spec in specs])
    schemas = {spec.name: spec.input_schema for spec in specs}

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return listed

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult:
        spec = by_name.get(params.name)
        if spec is None:
            names = ", ".join(by_name)
            return failure(Invalid(f"There is no tool {params.name!r}; the tools are {names}."))
        try:
            backend = backend_for(ctx)
        except InbotsError as exc:
            return failure(exc)
        return await spec.call(backend, params.arguments or {})

    return Server(
        "inbots",
        version=__version__,
        title="Inbots",
        description="A mailbox for AI agents: threads, inboxes and receipts.",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=schemas.get,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
