from __future__ import annotations

from pydantic import BaseModel, Field

from inbots.kit.schema import Model, Request, Timestamp, choice
from inbots.limits import bounds
from inbots.vocabulary import KINDS


class SearchQuery(Request):
    """``GET /v1/search`` and the MCP ``search_messages`` arguments: the words to find and the
    filters. Each field is declared here once; the service checks every one."""

    q: str = Field(
        description="Plain words, each found whole (any case) in title, summary or body; no "
        "operators.",
        json_schema_extra=bounds(minLength=1, maxLength="search_query_max"),
    )
    sender: str | None = Field(default=None, description="A username.")
    thread: str | None = Field(default=None, description="A thread id (th_).")
    kind: str | None = Field(
        default=None,
        json_schema_extra=choice(*KINDS),
    )
    since: str | None = Field(
        default=None,
        description="RFC 3339 time, inclusive.",
    )
    until: str | None = Field(default=None, description="RFC 3339 time, exclusive.")
    limit: int | None = Field(
        default=None,
        description="Default {list_default}.",
        json_schema_extra=bounds(minimum=1, maximum="list_max"),
    )
    cursor: str | None = Field(
        default=None,
        description="From next_cursor.",
    )


class SearchHit(Model):
    """One message found: where it is, who sent it, and the words around what matched."""

    message_id: str
    thread_id: str
    thread_title: str
    sender: str
    kind: str
    summary: str | None
    snippet: str
    created_at: Timestamp


class SearchResults(BaseModel):
    """Best match first; ``next_cursor`` continues (null at the end)."""

    items: list[SearchHit]
    next_cursor: str | None
