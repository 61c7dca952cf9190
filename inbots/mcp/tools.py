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
    ListThreadsArguments,
    MarkWorkingArguments,
    NoArguments,
    OpenThreadArguments,
    ReadBriefArguments,
    ReadMessageArguments,
    ReadThreadArguments,
    SearchMessagesArguments,
    SendMessageArguments,
    SetBriefArguments,
    ThreadArguments,
    WaitForMailArguments,
)
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


def tool_specs() -> list[ToolSpec]:
    """The tools, in the order a model meets them. ``{limit}`` in a description is the server's
    setting (filled in by :func:`inbots.limits.describe`)."""
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
            service=lambda t, a: t.run(agents.me),
            render=render_whoami,
            read_only=True,
        ),
        ToolSpec(
            name="list_agents",
            title="List agents",
            description=(
                "The directory: who you can write to, most recently active first. The other "
                "agents of this workspace that can receive mail (kind agent) and the human "
                "operator who owns them (username operator, kind person: write to it for a "
                "decision or help only a person can give). Each with its username, description, "
                "whether it is active (it made a call in the last few minutes) and has_brief "
                "(read it with read_brief before working with that agent). Use it to find who "
                "should work on a task before open_thread or add_participant. Changes nothing."
            ),
            arguments=ListAgentsArguments,
            result=Directory,
            service=lambda t, a: _items(Directory, t.run(agents.directory, a.query, a.active_only)),
            render=render_directory,
            read_only=True,
        ),
        ToolSpec(
            name="list_keys",
            title="List my keys",
            description=(
                "Your API keys, without the keys themselves (only their hashes are stored): "
                "each one's id, label, first characters (hint), when it was made and last used, "
                "and which one this session uses (current). A key per machine or harness lets "
                "one be revoked without stopping the others; keys are issued and revoked over "
                "HTTP (POST and DELETE /v1/me/keys) or by the operator, never through a tool, so "
                "no key lands in a conversation. Changes nothing."
            ),
            arguments=NoArguments,
            result=KeyList,
            service=lambda t, a: _items(KeyList, t.run(keys.list_keys, None)),
            render=render_keys,
            read_only=True,
        ),
        ToolSpec(
            name="list_sessions",
            title="List my sessions",
            description=(
                "Your sessions, latest first: each MCP session and each client that sends an "
                "X-Inbots-Session label, with its client (MCP clientInfo or User-Agent), when it "
                "was first and last seen, and whether it is active (seen in the last few "
                "minutes). Shows whether another session of you is working at the same time. "
                "Changes nothing."
            ),
            arguments=NoArguments,
            result=SessionList,
            service=lambda t, a: _items(SessionList, t.run(sessions.list_sessions, None)),
            render=render_sessions,
            read_only=True,
        ),
        ToolSpec(
            name="read_brief",
            title="Read an agent's brief",
            description=(
                "An agent's brief: Markdown it wrote saying what it does and how to work with it "
                "(what to send it, what it answers, what it will not do). Read it before handing "
                "an agent a task; list_agents says which agents have one (has_brief). username: "
                "from list_agents. brief is null when it wrote none. Changes nothing."
            ),
            arguments=ReadBriefArguments,
            result=BriefRead,
            service=lambda t, a: t.run(agents.read_brief, a.username),
            render=render_brief,
            read_only=True,
        ),
        ToolSpec(
            name="set_brief",
            title="Set my brief",
            description=(
                "Write your own brief, which every agent of this workspace can read with "
                "read_brief: Markdown saying what you do, what to send you and how, what you "
                "answer and what you will not do. Up to {brief_max:,} characters; it replaces "
                "the previous brief whole, and an empty text removes it."
            ),
            arguments=SetBriefArguments,
            result=BriefRead,
            service=lambda t, a: t.run(agents.set_own_brief, BriefUpdate(brief=a.text)),
            render=render_brief_set,
            idempotent=True,
        ),
        ToolSpec(
            name="list_threads",
            title="List my threads",
            description=(
                "The threads you are in that are not closed, most recent activity first: id, "
                "title, goal, ref (a task reference such as a ticket id, if one was given), "
                "status (open, or close_requested: readable but no new messages), who opened it "
                "and who is on it. A thread is one task. Call this before open_thread and reuse "
                "the thread for the task if one exists, instead of opening a duplicate. ref: "
                "only threads with that task reference. query: only threads whose title or goal "
                "contains that text (any case). Changes nothing; to see messages use "
                "read_thread."
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
            title="Open a thread",
            description=(
                "Start a thread for ONE new task, with the agents who should work on it (their "
                'usernames from list_agents, at least one besides you; ["*"] for every agent '
                "that is not archived); you become its opener and a participant. First check "
                "list_threads: if a thread for this task exists, post there with send_message "
                "instead. ref: an optional task reference (a ticket id, up to "
                "{thread_ref_max} characters) to find the thread by later. Opening sends "
                "nothing: follow with send_message (or open and send in one call with "
                "send_message and to). The answer's id (th_…) is the thread_id the other tools "
                "take."
            ),
            arguments=OpenThreadArguments,
            result=ThreadRead,
            service=lambda t, a: t.run(threads.open_thread, a.request()),
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
            service=lambda t, a: t.run(threads.add_participant, a.thread_id, a.username),
            render=render_thread,
            idempotent=True,
        ),
        ToolSpec(
            name="send_message",
            title="Send a message",
            description=(
                "Post a message; every other participant of its thread gets its own copy (a "
                "delivery) in its inbox. Either thread_id: post to that existing thread; or "
                'to: usernames (from list_agents, or ["*"] for every agent that is not '
                "archived) to open a NEW thread with them and post this as its first message, "
                "in one call (title: the thread's title, by default the summary; ref: a task "
                "reference such as a ticket id). Give one of thread_id and to, never both. "
                "body: 1 to {message_body_max:,} characters; point at files or URLs rather "
                "than pasting them. summary: one line, up to {summary_max} characters, "
                "saying what you are asking for; recipients see it in their inbox, and it is "
                "required when the body is longer than {summary_required_over} characters. "
                "kind: task, question, update (default), decision, handoff or ack. priority: "
                "normal (default) or urgent (listed first in every recipient's inbox). "
                "reply_to: a message id in the same thread. idempotency_key: if you are unsure "
                "a send went through, repeat it with the same key and content and you get the "
                "original back (duplicate: true) instead of a second message. The answer lists "
                "one delivery per recipient; message.thread_id is the thread it went to. "
                "held: true means the workspace's approval policy holds it until the operator "
                "approves it (recipients see nothing until then) or rejects it."
            ),
            arguments=SendMessageArguments,
            result=SendResult,
            service=_send_message,
            render=render_sent,
        ),
        ToolSpec(
            name="check_inbox",
            title="Check inbox",
            description=(
                "Your unacknowledged mail, urgent first, then oldest first: one item per message "
                "with sender, thread (and its ref), kind, priority and a summary, plus its "
                "delivery_id and message_id. Call it at the start of every turn and when you "
                "finish a piece of work. Listing marks nothing read or done: items stay until "
                "you acknowledge them, so the same ones come back next time. For each item: "
                "read it, act on it (or decide not to), then acknowledge it. include_bodies: "
                "true gives each full body too (recorded as read), so no read_message call is "
                "needed; then at most {inbox_bodies_max} items a page. limit: 1 to "
                "{check_inbox_max} items (default {check_inbox_default}); the answer says "
                "in words how many more are waiting. When next_cursor is set, call again with "
                "it as cursor to see the next page: you never need to acknowledge mail to see "
                "what is behind it. status: unacked (default), acked (re-read mail you "
                "acknowledged) or all. urgent_only: only urgent mail."
            ),
            arguments=CheckInboxArguments,
            result=InboxAnswer,
            service=_check_inbox,
            render=render_inbox,
        ),
        ToolSpec(
            name="read_message",
            title="Read a message",
            description=(
                "The full body of one message, by its message id (msg_…) or your delivery id "
                "(dlv_…), both shown by check_inbox. Reading records that you opened it (its "
                "sender sees that in its receipts) but is not an acknowledgement: acknowledge it "
                "when you have acted on it or decided not to. For mail that needs no work (an "
                "update, an FYI), pass acknowledge: done (or declined, with a note) to read and "
                "acknowledge it in this one call. For a message you sent, the answer's receipts "
                "say how far it got with each recipient (as check_sent does)."
            ),
            arguments=ReadMessageArguments,
            result=MessageWithDelivery,
            service=_read_message,
            render=render_message,
            idempotent=True,
        ),
        ToolSpec(
            name="read_thread",
            title="Read a thread",
            description=(
                "A thread's history with full bodies, oldest first: catch up on a task before "
                "acting, for example after being added to a thread. Records that you opened "
                "your copies of these messages; acknowledges nothing. Messages you sent carry "
                "each recipient's receipt (state, outcome, note). since: only messages "
                "after this message id or RFC 3339 time. limit: how many (default "
                "{list_default}, at most {list_max}). When next_cursor is set, call again "
                "with it as cursor for the next page."
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
            title="Acknowledge",
            description=(
                "Say you are done with messages: you acted on them (outcome done) or decided "
                "not to (outcome declined, with a short note saying why). The sender sees your "
                "outcome and note (check_sent, and it can be woken for them). Every message you "
                "receive needs an acknowledgement, including ones you decline or that need no "
                "action: unacknowledged mail looks to the operator like work that was ignored. "
                "ids: 1 to {ack_batch_max} delivery or message ids. note: up to "
                "{note_max} characters. Acknowledged mail leaves your inbox. Safe to repeat: "
                "ids already acknowledged, or not yours, are reported under already and "
                "not_found, and mail that expired unacknowledged (its sender's ttl_seconds "
                "passed) under expired, never as errors."
            ),
            arguments=AcknowledgeArguments,
            result=AckResult,
            service=lambda t, a: t.run(deliveries.acknowledge, a.request()),
            render=render_acks,
            idempotent=True,
        ),
        ToolSpec(
            name="mark_working",
            title="Mark working",
            description=(
                "Say you are working on mail that takes a while: each delivery's sender sees "
                "state working (with your note) in its receipts, and the operator does not see "
                "it as stalled. It is a heartbeat: call it again every hour or so while you "
                "work, because mail with no heartbeat for a long time counts as stalled again. "
                "Acknowledge it when you are done. ids: 1 to {ack_batch_max} delivery or "
                "message ids from check_inbox. note: up to {note_max} characters on how it is "
                "going (replaces your last note). Answers per id: working, "
                "already_acknowledged, not_found or expired."
            ),
            arguments=MarkWorkingArguments,
            result=WorkingResult,
            service=lambda t, a: t.run(deliveries.mark_working, a.ids, a.note),
            render=render_working,
            idempotent=True,
        ),
        ToolSpec(
            name="wait_for_mail",
            title="Wait for mail",
            description=(
                "Block until mail you have not been shown yet arrives, or until timeout_seconds "
                "pass (1 to {wait_max_seconds}, default {wait_default_seconds}; more "
                "is capped). Use it instead of calling check_inbox in a loop when you have "
                "nothing else to do. New mail comes back listed as in check_inbox; empty items "
                "means nothing new arrived in time. Then read and acknowledge as usual. With "
                "include_receipts true it also wakes when a recipient acknowledges a message "
                "you sent: receipts lists each (recipient, outcome done or declined, note), "
                "each shown once; use it to wait for the answers to work you handed out."
            ),
            arguments=WaitForMailArguments,
            result=WaitAnswer,
            service=_wait_for_mail,
            render=render_inbox,
        ),
        ToolSpec(
            name="check_sent",
            title="Check sent mail",
            description=(
                "The messages you sent, newest first, each with every recipient's receipt: its "
                "state (accepted: not seen yet; delivered: shown to it; fetched: it read it; "
                "working: it says it is working on it, with working_at and working_note; "
                "acknowledged: it is done; stalled or failed: it has not moved) and, once "
                "acknowledged, its outcome (done or declined) and note. Use it to see which "
                "of the tasks you handed out are done, declined or still waiting. state: only "
                "messages with at least one receipt in that state (e.g. acknowledged, or "
                "fetched for read but not yet done). thread_id: one thread's. When next_cursor "
                "is set, call again with it as cursor for older messages. Changes nothing."
            ),
            arguments=CheckSentArguments,
            result=Outbox,
            service=lambda t, a: t.run(reading.outbox, a.state, a.thread_id, None, a.cursor),
            render=render_outbox,
            read_only=True,
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
            service=lambda t, a: t.run(threads.request_close, a.thread_id),
            render=render_close_requested,
            idempotent=True,
        ),
        ToolSpec(
            name="search_messages",
            title="Search messages",
            description=(
                "Find messages by their words, best match first: a message matches when every "
                "word of q is in its thread's title, its summary or its body, as a whole word in "
                "any case (deploy does not find deployed). q is plain text, up to "
                "{search_query_max} characters and {search_words_max} words: quotes, *, %, _, "
                "parentheses and AND/OR/NEAR are not operators (punctuation only separates "
                "words). You search the threads you are in that are not closed, nothing else. "
                "Narrow with sender (a username), thread (th_…), kind, since and until (RFC 3339 "
                "times). Each result gives the message id, its thread, sender, kind, summary and "
                "a snippet with the matched words in [brackets]; read_message gives the full "
                "body. When next_cursor is set, call again with it as cursor for more. Changes "
                "nothing (nothing is marked read)."
            ),
            arguments=SearchMessagesArguments,
            result=SearchResults,
            service=lambda t, a: t.run(search.search, a.request(t.page_size(a.limit))),
            render=render_search,
            read_only=True,
        ),
    ]
