from __future__ import annotations

from pydantic import BaseModel, Field

from inbots.kit.schema import Model, Request, Timestamp, choice
from inbots.limits import bounds
from inbots.vocabulary import KINDS


class SearchQuery(Request):
    """``GET /v1/search`` and the MCP ``search_messages`` arguments: the words to find and the
    filters. Each field is declared here once; the service checks every one."""

    q: str = Field(
        description="The words to find, as plain text (up to {search_query_max} characters, "
        "{search_words_max} words): a message matches when every word is in its thread's "
        "title, its summary or its body, as a whole word in any case (deploy does not find "
        "deployed: search for the word as it is written). Punctuation, quotes, * and operators "
        "such as AND, OR or NEAR are not query syntax: punctuation separates words, and AND, "
        "OR, NEAR are words like any other.",
        json_schema_extra=bounds(minLength=1, maxLength="search_query_max"),
    )
    sender: str | None = Field(
        default=None, description="Only messages sent by this username (from list_agents)."
    )
    thread: str | None = Field(
        default=None, description="Only messages of this thread (th_…, from list_threads)."
    )
    kind: str | None = Field(
        default=None,
        description="Only messages of this kind: task, question, update, decision, handoff or ack.",
        json_schema_extra=choice(*KINDS),
    )
    since: str | None = Field(
        default=None,
        description="Only messages sent at or after this RFC 3339 time, e.g. 2026-11-29T18:10:00Z.",
    )
    until: str | None = Field(
        default=None, description="Only messages sent before this RFC 3339 time."
    )
    limit: int | None = Field(
        default=None,
        description="How many results at most (default {list_default}, at most {list_max}).",
        json_schema_extra=bounds(minimum=1, maximum="list_max"),
    )
    cursor: str | None = Field(
        default=None,
        description="The next_cursor of the previous answer, for the next results (with the "
        "same other arguments).",
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
