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
from inbots.reservations.schemas import ReservationCreate
from inbots.search.schemas import SearchQuery
from inbots.threads.schemas import ParticipantAdd, ThreadCreate


class Arguments(Request):
    model_config = ConfigDict(extra="forbid")
    numbers_from_text = True  # harnesses send some numbers as text ("limit": "5")


class NoArguments(Arguments):
    pass


class ThreadArguments(Arguments):
    thread_id: str


class ListAgentsArguments(Arguments):
    query: str | None = Field(
        default=None,
        description="Text in the username or description.",
        json_schema_extra=bounds(maxLength="description_max"),
    )
    active_only: bool = False  # made a call in the last few minutes (INBOTS_ACTIVE_SECONDS)


class ListThreadsArguments(Arguments):
    ref: str | None = Field(
        default=None,
        description="A task reference (exact).",
        json_schema_extra=bounds(maxLength="thread_ref_max"),
    )
    query: str | None = Field(
        default=None,
        description="Text in the title or goal.",
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
        description="The thread to post to (th_).",
    )
    to: list[str] | None = Field(
        default=None,
        description='Instead of thread_id: usernames (["*"]: all agents) to open a new thread '
        "with.",
        json_schema_extra=bounds(minItems=1),
    )
    idempotency_key: str | None = Field(
        default=None,
        description="A repeat with the same key and content returns the original.",
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
        description="Default {check_inbox_default}; with bodies at most {inbox_bodies_max}.",
        json_schema_extra=bounds(minimum=1, maximum="check_inbox_max"),
    )
    cursor: str | None = Field(
        default=None,
        description="From next_cursor.",
    )
    include_bodies: bool = Field(
        default=False,
        description="Also the bodies (recorded as read).",
    )
    status: str | None = Field(
        default=None,
        description="Default unacked.",
        json_schema_extra=choice(*INBOX_STATUSES),
    )
    urgent_only: bool = False


class ReadMessageArguments(Arguments):
    id: str
    acknowledge: Literal["done", "declined"] | None = Field(
        default=None,
        description="Also acknowledge it (mail that needs no more work).",
    )
    note: str | None = Field(
        default=None,
        description="With acknowledge: a note for the sender.",
        json_schema_extra=bounds(maxLength="note_max"),
    )


class ReadThreadArguments(ThreadArguments):
    since: str | None = Field(
        default=None,
        description="After this message id or RFC 3339 time.",
    )
    limit: int | None = Field(
        default=None,
        description="Default {list_default}.",
        json_schema_extra=bounds(minimum=1, maximum="list_max"),
    )
    cursor: str | None = Field(default=None, description="From next_cursor.")


class AcknowledgeArguments(AckRequest, Arguments):
    def request(self) -> AckRequest:
        return AckRequest.model_validate(self.model_dump(include=set(AckRequest.model_fields)))


class WaitForMailArguments(Arguments):
    timeout_seconds: float | None = Field(
        default=None,
        description="Default {wait_default_seconds}.",
        json_schema_extra=bounds(minimum=1, maximum="wait_max_seconds"),
    )
    include_receipts: bool = Field(
        default=False,
        description="Also wake when your mail is acknowledged (receipts).",
    )


class CheckSentArguments(Arguments):
    state: str | None = Field(
        default=None,
        description="Only messages with a receipt in it.",
        json_schema_extra=choice(*STATES),
    )
    thread_id: str | None = Field(default=None, description="Only this thread's (th_).")
    cursor: str | None = Field(default=None, description="From next_cursor.")


class SearchMessagesArguments(SearchQuery, Arguments):
    def request(self, limit: int) -> SearchQuery:
        """The search, with its page size resolved against the settings (``limit``)."""
        fields = self.model_dump(include=set(SearchQuery.model_fields))
        return SearchQuery.model_validate({**fields, "limit": limit})


class ReadBriefArguments(Arguments):
    username: str


class SetBriefArguments(Arguments):
    text: str = Field(
        description="Markdown; empty removes it.",
        json_schema_extra=bounds(maxLength="brief_max"),
    )


class MarkWorkingArguments(WorkingRequest, Arguments):
    ids: list[str] = Field(
        description="dlv_ or msg_ ids.",
        json_schema_extra=bounds(minItems=1, maxItems="ack_batch_max"),
    )


class ReservePathsArguments(ReservationCreate, Arguments):
    pass


class ReleasePathsArguments(Arguments):
    reservation_id: str | None = Field(default=None, description="rsv_; none: all yours.")


class ListReservationsArguments(Arguments):
    path: str | None = None
    active: bool = True
    cursor: str | None = None
