"""The agent tools of ``/mcp``, defined once: the command table, and the instructions a client
is given with it.

A tool (:class:`~inbots.mcp.spec.ToolSpec`) is an argument model (:mod:`inbots.mcp.arguments`:
the HTTP request models, checked with the HTTP API's sentences), a service call (the function
the HTTP route runs, in a unit of work of its own through
:meth:`~inbots.mcp.spec.ToolContext.run`), and a text rendering (:mod:`inbots.mcp.render`); plus
a name, a description written for a model that has never seen Inbots, a result model (published
as the output schema: the HTTP response's fields) and its hints.
:func:`inbots.mcp.server.build_server` serves them with the MCP SDK's low-level server; ``inbots
mcp`` relays stdio to that same endpoint (:mod:`inbots.mcp.stdio`), so there is one path per
tool. Descriptions and schemas quote the server's limits (:mod:`inbots.limits`).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from inbots.agents import keys, sessions
from inbots.agents import service as agents
from inbots.agents.schemas import (
    AgentRead,
    BriefRead,
    BriefUpdate,
    Directory,
    KeyList,
    SessionList,
)
from inbots.attachments.schemas import AttachmentRead
from inbots.deliveries import service as deliveries
from inbots.deliveries import wait
from inbots.deliveries.schemas import AckResult, Inbox, Waited, WorkingResult
from inbots.kit.paging import page_size
from inbots.mcp.arguments import (
    AcknowledgeArguments,
    AddParticipantArguments,
    CheckInboxArguments,
    CheckSentArguments,
    ListAgentsArguments,
    ListReservationsArguments,
    ListThreadsArguments,
    MarkWorkingArguments,
    NoArguments,
    OpenThreadArguments,
    ReadBriefArguments,
    ReadMessageArguments,
    ReadThreadArguments,
    ReleasePathsArguments,
    ReservePathsArguments,
    SearchMessagesArguments,
    SendMessageArguments,
    SetBriefArguments,
    ThreadArguments,
    WaitForMailArguments,
)
from inbots.mcp.attachments import ReadAttachmentArguments, read_attachment_tool
from inbots.mcp.render import (
    Json,
    inbox_notice,
    render_acks,
    render_brief,
    render_brief_set,
    render_close_requested,
    render_directory,
    render_history,
    render_inbox,
    render_keys,
    render_message,
    render_opened,
    render_outbox,
    render_released,
    render_reservations,
    render_reserved,
    render_search,
    render_sent,
    render_sessions,
    render_thread,
    render_threads,
    render_whoami,
    render_working,
)
from inbots.mcp.spec import ToolContext, ToolSpec
from inbots.messages import reading
from inbots.messages import service as messages
from inbots.messages.schemas import History, MessageWithDelivery, Outbox, SendResult
from inbots.reservations import service as reservations
from inbots.reservations.schemas import ReleasedList, ReservationPage, ReservationResult
from inbots.search import service as search
from inbots.search.schemas import SearchResults
from inbots.threads import service as threads
from inbots.threads.schemas import ThreadList, ThreadRead
from inbots.vocabulary import URGENT

M = TypeVar("M", bound=BaseModel)

INSTRUCTIONS = """\
Inbots is the mailbox you share with other agents and the human operator who owns them. Work is
organised in threads, one per task; a message posted to a thread reaches every other participant.
At the start of each turn call check_inbox (include_bodies: true gives the bodies too; page on
with its cursor, never by acknowledging). Before acting on a message, read its body. When you
have acted on it - or decided not to - acknowledge it, with outcome done or declined: every
message you receive needs an acknowledgement. Before opening a thread, check list_threads and
reuse the thread for that task if there is one; list_agents says who is there and read_brief how
to work with an agent. While a task takes long, mark_working its mail now and then so its sender
sees you are on it. To see what became of messages you sent (read, done, declined and why),
check_sent; to be woken when a recipient acknowledges one, wait_for_mail with include_receipts.
To find an earlier message by its words, search_messages. With nothing else to do,
wait_for_mail instead of polling. To reach the person who owns this workspace (a decision, an
approval, a problem no agent can solve), write to the username operator: send_message with
to: ["operator"], or add operator to a thread."""


# Results: the HTTP responses' models; the inbox answers add one sentence.


class InboxAnswer(Inbox):
    notice: str = Field(description="How much is waiting, in words, and what to do next.")


class WaitAnswer(Waited):
    notice: str = Field(description="How much is waiting, in words, and what to do next.")


async def _items(model: type[M], found: Awaitable[list[Any]]) -> M:
    """A list the service gives as the HTTP answer wraps it: ``{"items": [...]}``."""
    return model.model_validate({"items": await found})


async def _inbox_answer(found: Awaitable[BaseModel], *, whole: bool = True) -> Json:
    inbox: Json = (await found).model_dump(mode="json")
    return {**inbox, "notice": inbox_notice(inbox, whole=whole)}


def _check_inbox(t: ToolContext, a: CheckInboxArguments) -> Awaitable[Json]:
    s = t.settings
    found = t.run(
        deliveries.inbox,
        page_size(a.limit, s.check_inbox_default, s.check_inbox_max),
        cursor=a.cursor,
        include="body" if a.include_bodies else None,
        status=a.status,
        priority=URGENT if a.urgent_only else None,
    )
    # A first page of all unacknowledged mail: "N more" after it is exact.
    whole = not a.cursor and a.status in (None, "unacked") and not a.urgent_only
    return _inbox_answer(found, whole=whole)


def _wait_for_mail(t: ToolContext, a: WaitForMailArguments) -> Awaitable[Json]:
    """As ``GET /v1/inbox/wait``: sleeps on the wake-up hub's event between checks, so the wait
    holds neither a database connection nor a thread."""
    seconds = wait.wait_seconds(a.timeout_seconds, t.settings)
    hub = t.dispatch.wakeups
    found = wait.wait_for_mail(t.run, hub, t.caller, seconds, receipts=a.include_receipts)
    return _inbox_answer(found)


def _send_message(t: ToolContext, a: SendMessageArguments) -> Awaitable[BaseModel]:
    thread_id = a.target()
    if thread_id is None:
        return t.run(messages.send_direct, a.direct(), a.idempotency_key)
    return t.run(messages.send_message, thread_id, a.request(), a.idempotency_key)


def _read_message(t: ToolContext, a: ReadMessageArguments) -> Awaitable[BaseModel]:
    if a.acknowledge is None and a.note is None:
        return t.run(reading.read_message, a.id)
    return t.run(reading.read_and_acknowledge, a.id, a.acknowledge, a.note)


async def _reserve_paths(t: ToolContext, a: ReservePathsArguments) -> BaseModel:
    result = await t.run(reservations.reserve, a)
    if result.conflicts:  # refused after its unit committed the conflict's event
        raise reservations.ReservationConflict(result.conflicts)
    return result


async def _release_paths(t: ToolContext, a: ReleasePathsArguments) -> BaseModel:
    if a.reservation_id is None:
        return await t.run(reservations.release_mine)
    return ReleasedList(released=[await t.run(reservations.release, a.reservation_id)])


def tool_specs() -> list[ToolSpec]:
    """The tools, in the order a model meets them. ``{limit}`` in a description is the server's
    setting (filled in by :func:`inbots.limits.describe`)."""
    return [
        ToolSpec(
            name="whoami",
            description=(
                "You in Inbots, the mailbox you share with other agents and their operator (a "
                "person): username, description, webhook, unacknowledged mail waiting."
            ),
            arguments=NoArguments,
            result=AgentRead,
            service=lambda t, a: t.run(agents.me),
            render=render_whoami,
            read_only=True,
        ),
        ToolSpec(
            name="list_agents",
            description=(
                "Who you can write to: agents, and operator (a person: for what only a person can"
                " decide). read_brief those with has_brief before handing them work."
            ),
            arguments=ListAgentsArguments,
            result=Directory,
            service=lambda t, a: _items(Directory, t.run(agents.directory, a.query, a.active_only)),
            render=render_directory,
            read_only=True,
        ),
        ToolSpec(
            name="list_keys",
            description=(
                "Your API keys, never the keys themselves; current marks this session's. Keys are"
                " issued and revoked over HTTP, never by a tool."
            ),
            arguments=NoArguments,
            result=KeyList,
            service=lambda t, a: _items(KeyList, t.run(keys.list_keys, None)),
            render=render_keys,
            read_only=True,
            rarely_used=True,
        ),
        ToolSpec(
            name="list_sessions",
            description=(
                "Your sessions, latest first, each with its client and whether it is active: is "
                "another session of you at work?"
            ),
            arguments=NoArguments,
            result=SessionList,
            service=lambda t, a: _items(SessionList, t.run(sessions.list_sessions, None)),
            render=render_sessions,
            read_only=True,
            rarely_used=True,
        ),
        ToolSpec(
            name="read_brief",
            description=("An agent's brief (Markdown): what it does and how to work with it."),
            arguments=ReadBriefArguments,
            result=BriefRead,
            service=lambda t, a: t.run(agents.read_brief, a.username),
            render=render_brief,
            read_only=True,
        ),
        ToolSpec(
            name="set_brief",
            description=(
                "Replace your brief (up to {brief_max:,} characters): what you do, what to send "
                "you, what you will not do."
            ),
            arguments=SetBriefArguments,
            result=BriefRead,
            service=lambda t, a: t.run(agents.set_own_brief, BriefUpdate(brief=a.text)),
            render=render_brief_set,
            idempotent=True,
        ),
        ToolSpec(
            name="list_threads",
            description=(
                "Your threads not closed, latest activity first. One thread per task: reuse it "
                "rather than open another."
            ),
            arguments=ListThreadsArguments,
            result=ThreadList,
            service=lambda t, a: _items(
                ThreadList, t.run(threads.list_threads, None, None, ref=a.ref, query=a.query)
            ),
            render=render_threads,
            read_only=True,
        ),
        ToolSpec(
            name="open_thread",
            description=(
                "Open a thread for ONE new task; check list_threads first. It sends nothing: "
                "send_message next (send_message with to opens and sends in one call)."
            ),
            arguments=OpenThreadArguments,
            result=ThreadRead,
            service=lambda t, a: t.run(threads.open_thread, a.request()),
            render=render_opened,
        ),
        ToolSpec(
            name="add_participant",
            description=(
                "Put an agent on an open thread you are in: it gets the later mail and may read "
                "the history."
            ),
            arguments=AddParticipantArguments,
            result=ThreadRead,
            service=lambda t, a: t.run(threads.add_participant, a.thread_id, a.username),
            render=render_thread,
            idempotent=True,
        ),
        ToolSpec(
            name="send_message",
            description=(
                "Post to a thread (thread_id: each other participant gets a copy) or open a new "
                "one with it (to). To answer a message: reply_to it, and acknowledge acknowledges"
                " your copy in the same call. held: true: it awaits the operator's approval; do "
                "not resend."
            ),
            arguments=SendMessageArguments,
            result=SendResult,
            service=_send_message,
            render=render_sent,
        ),
        ToolSpec(
            name="check_inbox",
            description=(
                "Your unacknowledged mail, urgent first; call it every turn. Listing marks "
                "nothing read or done and says how many more are waiting: page on with "
                "next_cursor, never by acknowledging. Act on each item, then acknowledge it."
            ),
            arguments=CheckInboxArguments,
            result=InboxAnswer,
            service=_check_inbox,
            render=render_inbox,
        ),
        ToolSpec(
            name="read_message",
            description=(
                "A message's full body, by msg_ or dlv_ id. Records it read; it is not an "
                "acknowledgement. Your own comes with each recipient's receipt."
            ),
            arguments=ReadMessageArguments,
            result=MessageWithDelivery,
            service=_read_message,
            render=render_message,
            idempotent=True,
        ),
        ToolSpec(
            name="read_attachment",
            description="A file a message lists in attachments (att_ id); images too.",
            arguments=ReadAttachmentArguments,
            result=AttachmentRead,
            service=read_attachment_tool,
            render=str,  # unused: the answer is the file itself (inbots.mcp.attachments)
            read_only=True,
        ),
        ToolSpec(
            name="read_thread",
            description=(
                "A thread's history with bodies, oldest first. Records your copies read; "
                "acknowledges nothing."
            ),
            arguments=ReadThreadArguments,
            result=History,
            service=lambda t, a: t.run(
                reading.history, a.thread_id, a.since, t.page_size(a.limit), a.cursor
            ),
            render=render_history,
            idempotent=True,
        ),
        ToolSpec(
            name="acknowledge",
            description=(
                "Done with mail: outcome done (you acted on it) or declined (say why in note). "
                "Every message you receive needs an acknowledgement, even one needing no action; "
                "its sender sees it. Safe to repeat."
            ),
            arguments=AcknowledgeArguments,
            result=AckResult,
            service=lambda t, a: t.run(deliveries.acknowledge, a.request()),
            render=render_acks,
            idempotent=True,
        ),
        ToolSpec(
            name="mark_working",
            description=(
                "Tell senders you are working on their mail (a note they see). Repeat about "
                "hourly while you work, or it counts as stalled."
            ),
            arguments=MarkWorkingArguments,
            result=WorkingResult,
            service=lambda t, a: t.run(deliveries.mark_working, a.ids, a.note),
            render=render_working,
            idempotent=True,
        ),
        ToolSpec(
            name="wait_for_mail",
            description=(
                "Block until new mail arrives or the timeout, instead of polling check_inbox."
            ),
            arguments=WaitForMailArguments,
            result=WaitAnswer,
            service=_wait_for_mail,
            render=render_inbox,
        ),
        ToolSpec(
            name="check_sent",
            description=(
                "Messages you sent, newest first, with each recipient's receipt: delivered "
                "(shown), fetched (read), working (note), acknowledged (outcome, note), held "
                "(awaiting the operator), rejected (reason), expired, stalled, failed."
            ),
            arguments=CheckSentArguments,
            result=Outbox,
            service=lambda t, a: t.run(reading.outbox, a.state, a.thread_id, None, a.cursor),
            render=render_outbox,
            read_only=True,
        ),
        ToolSpec(
            name="request_close",
            description=(
                "Ask the operator to close a thread you opened, once its task is done. Until then"
                " nobody can send to it."
            ),
            arguments=ThreadArguments,
            result=ThreadRead,
            service=lambda t, a: t.run(threads.request_close, a.thread_id),
            render=render_close_requested,
            idempotent=True,
        ),
        ToolSpec(
            name="search_messages",
            description=(
                "Find messages of your threads that are not closed by their words, best match "
                "first."
            ),
            arguments=SearchMessagesArguments,
            result=SearchResults,
            service=lambda t, a: t.run(search.search, a.request(t.page_size(a.limit))),
            render=render_search,
            read_only=True,
        ),
        ToolSpec(
            name="reserve_paths",
            description="Reserve paths before editing. A conflict names holder and expiry.",
            arguments=ReservePathsArguments,
            result=ReservationResult,
            service=_reserve_paths,
            render=render_reserved,
        ),
        ToolSpec(
            name="release_paths",
            description="Release a reservation of yours by id, or all of yours, when done.",
            arguments=ReleasePathsArguments,
            result=ReleasedList,
            service=_release_paths,
            render=render_released,
            idempotent=True,
        ),
        ToolSpec(
            name="list_reservations",
            description="Who holds which paths until when; path: only those that hold it.",
            arguments=ListReservationsArguments,
            result=ReservationPage,
            service=lambda t, a: t.run(
                reservations.list_reservations,
                path=a.path,
                active=a.active or None,
                limit=t.page_size(None),
                cursor=a.cursor,
            ),
            render=render_reservations,
            read_only=True,
        ),
    ]
