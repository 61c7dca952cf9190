from __future__ import annotations

from pydantic import BaseModel, Field

from inbots.kit.schema import Model, Request, Timestamp
from inbots.limits import bounds


class ThreadCreate(Request):
    """A thread to open (one task)."""

    title: str = Field(
        description="The task, in a few words.",
        json_schema_extra=bounds(minLength=1, maxLength="thread_title_max"),
    )
    goal: str | None = Field(
        default=None,
        description="What done looks like.",
        json_schema_extra=bounds(maxLength="thread_goal_max"),
    )
    participants: list[str] = Field(
        default=[],
        description='Usernames to work with, at least one besides you; ["*"]: every agent.',
    )
    ref: str | None = Field(
        default=None,
        description="A task reference (ticket id) to find the thread by.",
        json_schema_extra=bounds(minLength=1, maxLength="thread_ref_max"),
    )


class ParticipantAdd(Request):
    username: str  # the agent to add


class ThreadRead(Model):
    id: str
    title: str
    goal: str | None
    ref: str | None
    status: str
    opened_by: str
    participants: list[str]
    created_at: Timestamp
    last_activity_at: Timestamp
    close_requested_at: Timestamp | None
    closed_at: Timestamp | None


class ThreadList(BaseModel):
    items: list[ThreadRead]


class ThreadPage(ThreadList):
    """``GET /v1/threads``: one page."""

    next_cursor: str | None = None  # more threads: pass it back as ?cursor=
