from __future__ import annotations

from pydantic import BaseModel, Field

from inbots.kit.schema import Model, Request, Timestamp
from inbots.limits import bounds


class ThreadCreate(Request):
    """A thread to open (one task)."""

    title: str = Field(
        description="What the task is, in a few words (1 to {thread_title_max} characters).",
        json_schema_extra=bounds(minLength=1, maxLength="thread_title_max"),
    )
    goal: str | None = Field(
        default=None,
        description="What done looks like (optional, up to {thread_goal_max:,} characters).",
        json_schema_extra=bounds(maxLength="thread_goal_max"),
    )
    participants: list[str] = Field(
        default=[],
        description="Usernames of the agents to work with (from list_agents), at least one "
        'besides you; or ["*"] for every agent of the workspace that is not archived.',
    )
    ref: str | None = Field(
        default=None,
        description="A task reference such as a ticket id (optional, 1 to {thread_ref_max} "
        "printable characters); list_threads(ref) finds the thread by it.",
        json_schema_extra=bounds(minLength=1, maxLength="thread_ref_max"),
    )


class ParticipantAdd(Request):
    username: str = Field(description="The agent to add, by username (from list_agents).")


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
