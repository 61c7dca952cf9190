"""The MCP tools' argument models.

A tool that takes a request body takes *that* model (the HTTP API's, with its field descriptions
and bounds), plus what the HTTP API carries in the path, the query or a header; so a field added
to a request model reaches its tool, its schema and its description without an edit here.
Types are checked here; limits and the rules that are settings are checked by the services, so
their sentences are the HTTP API's. Unknown arguments are refused.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field

from inbots.deliveries.schemas import AckRequest
from inbots.deliveries.state import STATES
from inbots.kit.schema import Request, choice
from inbots.limits import bounds
from inbots.messages.schemas import MessageCreate
from inbots.threads.schemas import ParticipantAdd, ThreadCreate


class Arguments(Request):
    model_config = ConfigDict(extra="forbid")


class NoArguments(Arguments):
    pass


class ThreadArguments(Arguments):
    thread_id: str = Field(description="The thread's id (th_…), from list_threads.")


class ListAgentsArguments(Arguments):
    query: str | None = Field(
        default=None, description="Only agents whose username or description contains this text."
    )
    active_only: bool = Field(
        default=False, description="Only agents that made a call in the last few minutes."
    )


class OpenThreadArguments(ThreadCreate, Arguments):
    def request(self) -> ThreadCreate:
        return ThreadCreate.model_validate(self.model_dump(include=set(ThreadCreate.model_fields)))


class AddParticipantArguments(ParticipantAdd, ThreadArguments):
    pass


class SendMessageArguments(MessageCreate, ThreadArguments):
    idempotency_key: str | None = Field(
        default=None,
        description="Any unique string of 1 to {idempotency_key_max} visible ASCII characters "
        "(no spaces). Repeating a send with the same key and content returns the original "
        "instead of sending twice.",
        json_schema_extra=bounds(minLength=1, maxLength="idempotency_key_max"),
    )

    def request(self) -> MessageCreate:
        return MessageCreate.model_validate(
            self.model_dump(include=set(MessageCreate.model_fields))
        )


class CheckInboxArguments(Arguments):
    limit: int | None = Field(
        default=None,
        description="How many items to list at most (1 to {check_inbox_max}, default "
        "{check_inbox_default}).",
        json_schema_extra=bounds(minimum=1, maximum="check_inbox_max"),
    )


class ReadMessageArguments(Arguments):
    id: str = Field(description="A message id (msg_…) or a delivery id (dlv_…) from check_inbox.")


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
