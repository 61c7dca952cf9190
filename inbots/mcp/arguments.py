"""The MCP tools' argument models.

A tool that takes a request body takes *that* model (the HTTP API's, with its field descriptions
and bounds), plus what the HTTP API carries in the path, the query or a header; so a field added
to a request model reaches its tool, its schema and its description without an edit here.
Types are checked here, once (a refusal worded by :func:`inbots.kit.schema.refusal`, as HTTP
words it); the services take the typed values and check the rules that are settings or need the
database, so their sentences are the HTTP API's. A ``limit`` is resolved against the settings
before the service (:func:`inbots.kit.paging.page_size`, as ``?limit=`` is). Unknown arguments
are refused.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from inbots.deliveries.schemas import INBOX_STATUSES, AckRequest, WorkingRequest
from inbots.deliveries.state import STATES
from inbots.errors import Invalid
from inbots.kit.schema import Request, choice
from inbots.limits import bounds
from inbots.messages.schemas import DirectMessageCreate, MessageCreate, NewThread
from inbots.search.schemas import SearchQuery
from inbots.threads.schemas import ParticipantAdd, ThreadCreate


class Arguments(Request):
    model_config = ConfigDict(extra="forbid")
    numbers_from_text = True  # harnesses send some numbers as text ("limit": "5")


class NoArguments(Arguments):
    pass


class ThreadArguments(Arguments):
    thread_id: str = Field(description="The thread's id (th_…), from list_threads.")


class ListAgentsArguments(Arguments):
    query: str | None = Field(
        default=None,
        description="Only agents whose username or description contains this text.",
        json_schema_extra=bounds(maxLength="description_max"),
    )
    active_only: bool = Field(
        default=False, description="Only agents that made a call in the last few minutes."
    )


class ListThreadsArguments(Arguments):
    ref: str | None = Field(
        default=None,
        description="Only threads with this task reference (the ref given when the thread was "
        "opened, such as a ticket id).",
        json_schema_extra=bounds(maxLength="thread_ref_max"),
    )
    query: str | None = Field(
        default=None,
        description="Only threads whose title or goal contains this text (any case; matched "
        "as written, no wildcards).",
        json_schema_extra=bounds(maxLength="thread_goal_max"),
    )


class OpenThreadArguments(ThreadCreate, Arguments):
    def request(self) -> ThreadCreate:
        return ThreadCreate.model_validate(self.model_dump(include=set(ThreadCreate.model_fields)))


class AddParticipantArguments(ParticipantAdd, ThreadArguments):
    pass


class SendMessageArguments(MessageCreate, NewThread, Arguments):
    thread_id: str | None = Field(
        default=None,
        description="The thread to post to (th_…, from list_threads or check_inbox). Give "
        "either thread_id or to, not both.",
    )
    to: list[str] | None = Field(
        default=None,
        description="Instead of thread_id: usernames (from list_agents) to open a NEW thread "
        'with, posting this as its first message; ["*"] means every agent that is not '
        "archived, other than you. title and ref then name the new thread.",
        json_schema_extra=bounds(minItems=1),
    )
    idempotency_key: str | None = Field(
        default=None,
        description="Any unique string of 1 to {idempotency_key_max} visible ASCII characters "
        "(no spaces). Repeating a send with the same key and content returns the original "
        "instead of sending twice.",
        json_schema_extra=bounds(minLength=1, maxLength="idempotency_key_max"),
    )

    def target(self) -> str | None:
        """The thread to post to, or None to open one (``to``); refuses both and neither."""
        if self.thread_id is not None and self.to is not None:
            raise Invalid(
                "Give thread_id (post to that thread) or to (open a new thread with these "
                "usernames), not both.",
                field="to",
            )
        if self.thread_id is None and self.to is None:
            raise Invalid(
                "send_message needs thread_id (the thread to post to, from list_threads) or to "
                "(usernames to open a new thread with, from list_agents).",
                field="thread_id",
            )
        if self.thread_id is not None and (self.title is not None or self.ref is not None):
            raise Invalid(
                "title and ref name a new thread: use them with to, not with thread_id.",
                field="title" if self.title is not None else "ref",
            )
        return self.thread_id

    def request(self) -> MessageCreate:
        return MessageCreate.model_validate(
            self.model_dump(include=set(MessageCreate.model_fields))
        )

    def direct(self) -> DirectMessageCreate:
        return DirectMessageCreate.model_validate(
            self.model_dump(include=set(DirectMessageCreate.model_fields))
        )


class CheckInboxArguments(Arguments):
    limit: int | None = Field(
        default=None,
        description="How many items to list at most (1 to {check_inbox_max}, default "
        "{check_inbox_default}; with include_bodies at most {inbox_bodies_max}).",
        json_schema_extra=bounds(minimum=1, maximum="check_inbox_max"),
    )
    cursor: str | None = Field(
        default=None,
        description="The next_cursor of the previous answer, to see the next page (with the "
        "same other arguments). Paging needs no acknowledgement.",
    )
    include_bodies: bool = Field(
        default=False,
        description="Also give each message's full body (recorded as read, as read_message "
        "does), so no read_message call is needed; at most {inbox_bodies_max} items a page.",
    )
    status: str | None = Field(
        default=None,
        description="unacked (default: mail still to act on), acked (mail you already "
        "acknowledged, to re-read it) or all.",
        json_schema_extra=choice(*INBOX_STATUSES),
    )
    urgent_only: bool = Field(default=False, description="Only urgent mail.")


class ReadMessageArguments(Arguments):
    id: str = Field(description="A message id (msg_…) or a delivery id (dlv_…) from check_inbox.")
    acknowledge: Literal["done", "declined"] | None = Field(
        default=None,
        description="Also acknowledge it in the same call, with this outcome: done (nothing "
        "more to do, or you did it) or declined (you will not). Only for mail that needs no "
        "further work; leave it out when you still have to act.",
    )
    note: str | None = Field(
        default=None,
        description="With acknowledge: a short note for the sender (up to {note_max} "
        "characters), e.g. why you declined.",
        json_schema_extra=bounds(maxLength="note_max"),
    )


class ReadThreadArguments(ThreadArguments):
    since: str | None = Field(
        default=None,
        description="Only messages after this message id (msg_…) or RFC 3339 time.",
    )
    limit: int | None = Field(
        default=None,
        description="How many messages at most (default {list_default}, at most {list_max}).",
        json_schema_extra=bounds(minimum=1, maximum="list_max"),
    )
    cursor: str | None = Field(
        default=None, description="The next_cursor of the previous page, to read on."
    )


class AcknowledgeArguments(AckRequest, Arguments):
    def request(self) -> AckRequest:
        return AckRequest.model_validate(self.model_dump(include=set(AckRequest.model_fields)))


class WaitForMailArguments(Arguments):
    timeout_seconds: float | None = Field(
        default=None,
        description="How long to wait at most, in seconds ({wait_default_seconds} by default, "
        "at most {wait_max_seconds}; more is capped).",
        json_schema_extra=bounds(minimum=1, maximum="wait_max_seconds"),
    )
    include_receipts: bool = Field(
        default=False,
        description="Also wake when a recipient acknowledges a message you sent (done or "
        "declined, with its note): the answer's receipts list them.",
    )


class CheckSentArguments(Arguments):
    state: str | None = Field(
        default=None,
        description="Only messages with at least one receipt in this state: "
        + ", ".join(STATES)
        + ".",
        json_schema_extra=choice(*STATES),
    )
    thread_id: str | None = Field(
        default=None, description="Only messages of this thread (th_…, from list_threads)."
    )
    cursor: str | None = Field(
        default=None, description="The next_cursor of the previous page, to read on."
    )


class SearchMessagesArguments(SearchQuery, Arguments):
    def request(self, limit: int) -> SearchQuery:
        """The search, with its page size resolved against the settings (``limit``)."""
        fields = self.model_dump(include=set(SearchQuery.model_fields))
        return SearchQuery.model_validate({**fields, "limit": limit})


class ReadBriefArguments(Arguments):
    username: str = Field(description="The agent's username, from list_agents.")


class SetBriefArguments(Arguments):
    text: str = Field(
        description="Your brief, in Markdown: what you do, what to send you and how, what you "
        "answer and what you will not do (up to {brief_max:,} characters). It replaces the "
        "previous one whole; an empty text removes it.",
        json_schema_extra=bounds(maxLength="brief_max"),
    )


class MarkWorkingArguments(WorkingRequest, Arguments):
    ids: list[str] = Field(
        description="1 to {ack_batch_max} delivery ids (dlv_…) or message ids (msg_…) from "
        "check_inbox: mail you are working on.",
        json_schema_extra=bounds(minItems=1, maxItems="ack_batch_max"),
    )
