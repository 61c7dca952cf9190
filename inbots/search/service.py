"""Searching the messages a caller may read: the words of ``q`` in thread titles, summaries and
bodies, best match first.

The index is the database's own (migration 0014): FTS5 on SQLite, a ``tsvector`` with a GIN
index on PostgreSQL, both kept by triggers. ``q`` is user text and never query syntax: it is cut
into words here (letters and digits; everything else separates them), and the engine's query is
built from those words alone, each quoted, so quotes, ``*``, ``%``, ``_``, ``NEAR``, ``AND`` or
parentheses can neither change the query nor break it. Words match whole words, in any case,
on both engines alike (no stemming, no prefixes: a prefix query costs a merge of every word it
starts, on each search, and both engines' behaviour would then differ).

Ranking first selects only the ids in rank order (joined to no more than the filters need), then
reads the page's rows; the snippet is cut here from the page's text, the same on both engines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    column,
    func,
    literal_column,
    or_,
    select,
    table,
    text,
)

from inbots.agents.service import check_username
from inbots.caller import Caller
from inbots.config import Settings
from inbots.db.uow import UnitOfWork, reads
from inbots.errors import LIST_THREADS, Invalid, Pointing, SearchQueryInvalid
from inbots.kit.clock import time_field
from inbots.kit.cursor import SEARCH
from inbots.kit.ids import kind_of
from inbots.models.agents import Agent
from inbots.models.deliveries import Delivery
from inbots.models.messages import KINDS, Message
from inbots.models.threads import CLOSED, Participant, Thread
from inbots.search.schemas import SearchHit, SearchQuery, SearchResults

WORD = re.compile(r"[^\W_]+")  # letters and digits, as both engines' tokenizers cut words
SNIPPET_MAX = 240  # characters of a snippet
SNIPPET_WORDS = 24  # words of a snippet
SNIPPET_BEFORE = 6  # words shown before the first match

# SQLite: the FTS5 table (title, summary, body) and the map giving each message its rowid.
FTS = table("message_search", column("rowid"))
# (Its workspace_id lets the operator's search check the workspace without a message row read.)
FTS_ROWS = table(
    "message_search_rows", column("rowid"), column("message_id"), column("workspace_id")
)
# bm25 column weights: a word in the title counts most, then the summary, then the body.
FTS_WEIGHTS = (10.0, 4.0, 1.0)
# PostgreSQL: the trigger-kept tsvector of messages (title weighted A, summary B, body C).
VECTOR: ColumnElement[Any] = literal_column("messages.search_vector")


def words_of(q: str, settings: Settings) -> list[str]:
    """The distinct words of ``q`` (lower case), or ``422 search_query_invalid`` saying how to
    fix it: none at all, too long, or too many words."""
    if not q.strip():
        raise SearchQueryInvalid(
            "q is empty: give the words to find, e.g. q=deploy rollback.", field="q"
        )
    if len(q) > settings.search_query_max:
        raise SearchQueryInvalid(
            f"q is {len(q)} characters; the limit is {settings.search_query_max}. Search for a "
            "few distinctive words instead of pasting text.",
            field="q",
        )
    found = list(dict.fromkeys(w.lower() for w in WORD.findall(q)))
    if not found:
        raise SearchQueryInvalid(
            "q has no words to search for: give at least one word of letters or digits "
            "(quotes, *, %, _ and other punctuation only separate words; they are not query "
            "syntax).",
            field="q",
        )
    if len(found) > settings.search_words_max:
        raise SearchQueryInvalid(
            f"q has {len(found)} different words; at most {settings.search_words_max} are "
            "searched for together. Keep the most distinctive ones.",
            field="q",
        )
    return found


def _moment(value: str | None, field: str) -> datetime | None:
    if not value:
        return None
    example = "an RFC 3339 time such as 2026-11-29T18:10:00Z"
    return time_field(value, field, f"must be {example} (got {value[:40]!r})")


@dataclass(frozen=True)
class _Filters:
    words: list[str]
    sender: str | None
    thread: str | None
    kind: str | None
    since: datetime | None
    until: datetime | None
    count: int
    offset: int


def _check(request: SearchQuery, settings: Settings) -> _Filters:
    words = words_of(request.q, settings)
    sender = check_username(request.sender, "sender") if request.sender else None
    thread = request.thread or None
    if thread is not None and kind_of(thread) != "thread":
        raise Invalid(
            Pointing("thread must be a thread id (th_…), as {} gives them.", LIST_THREADS),
            field="thread",
        )
    kind = request.kind or None
    if kind is not None and kind not in KINDS:
        raise Invalid(f"kind must be one of {', '.join(KINDS)}.", field="kind")
    since, until = _moment(request.since, "since"), _moment(request.until, "until")
    if since is not None and until is not None and since >= until:
        raise Invalid("since must be earlier than until.", field="since")
    count = request.limit or settings.list_default
    offset = SEARCH.decode(request.cursor) or 0
    return _Filters(words, sender, thread, kind, since, until, count, offset)


@dataclass(frozen=True)
class _Columns:
    """The message columns the filters compare: on SQLite unindexed (``+thread_id``), so that
    the full-text match drives the query and never runs once per message of a thread or sender
    (seconds for a common word); on PostgreSQL the columns themselves (its planner weighs them)."""

    thread_id: ColumnElement[str]
    sender_id: ColumnElement[str]


INDEXED = _Columns(Message.thread_id, Message.sender_id)  # type: ignore[arg-type]
UNINDEXED = _Columns(literal_column("+messages.thread_id"), literal_column("+messages.sender_id"))


def _visible(
    caller: Caller, f: _Filters, sender_id: str | None, cols: _Columns
) -> list[ColumnElement[bool]]:
    """What the caller may read, and the filters: an agent, the messages of threads it is in
    that are not closed; the operator, every message of its workspace; nobody another's."""
    where: list[ColumnElement[bool]] = [Message.workspace_id == caller.workspace_id]
    if not caller.is_operator:
        mine = select(Participant.thread_id).where(Participant.agent_id == caller.agent_id)
        where += [cols.thread_id.in_(mine), Thread.status != CLOSED]
        # Held or rejected by the approval gate: only its sender finds it.
        where.append(or_(Message.released(), cols.sender_id == caller.agent_id))
        # Expired unacknowledged: no longer the caller's to read.
        where.append(~Delivery.expired_for(caller.agent_id, Message.id))
    if sender_id is not None:
        where.append(cols.sender_id == sender_id)
    if f.thread is not None:
        where.append(cols.thread_id == f.thread)
    if f.kind is not None:
        where.append(Message.kind == f.kind)
    if f.since is not None:
        where.append(Message.created_at >= f.since)
    if f.until is not None:
        where.append(Message.created_at < f.until)
    return where


# What a hit shows, in SearchHit's order (the body only to cut the snippet from).
HIT = (
    Message.id,
    Message.thread_id,
    Thread.title,
    Agent.username,
    Message.kind,
    Message.summary,
    Message.created_at,
    Message.body,
)


def _scoped(
    stmt: Select[Any], caller: Caller, f: _Filters, sender_id: str | None, cols: _Columns
) -> Select[Any]:
    """The ranking query, joined only to what its filters need (threads for an agent's
    visibility), so a word in many messages costs little per match."""
    if not caller.is_operator:
        stmt = stmt.join(Thread, Thread.id == Message.thread_id)
    return stmt.where(*_visible(caller, f, sender_id, cols))


def _fts_match(words: list[str]) -> str:
    # Each word a quoted FTS5 string (letters and digits only, so nothing to escape); all
    # required.
    return " ".join(f'"{w}"' for w in words)


def _ranked_sqlite(
    uow: UnitOfWork, caller: Caller, f: _Filters, sender_id: str | None
) -> list[str]:
    score = func.bm25(literal_column("message_search"), *FTS_WEIGHTS)
    match = text("message_search MATCH :match").bindparams(match=_fts_match(f.words))
    if not caller.is_operator:
        # An agent reads few of the workspace's messages: list their index rows first (through
        # the messages' thread index), then let the full-text scan keep only those, so a word
        # in most messages costs one integer lookup a match, not a message row read a match.
        visible = (
            _scoped(
                select(FTS_ROWS.c.rowid.label("rid"), Message.id.label("mid"))
                .select_from(FTS_ROWS)
                .join(Message, Message.id == FTS_ROWS.c.message_id),
                caller,
                f,
                sender_id,
                INDEXED,
            )
            .cte("visible")
            .prefix_with("MATERIALIZED")
        )
        mine = (
            select(visible.c.mid)
            .select_from(FTS)
            .join(visible, visible.c.rid == FTS.c.rowid)
            .where(match)
            .order_by(score, visible.c.mid.desc())
        )
        return list(uow.session.scalars(mine.offset(f.offset).limit(f.count + 1)))
    filtered = (sender_id, f.thread, f.kind, f.since, f.until) != (None,) * 5
    if not filtered:
        # The operator with no filter: the row map alone says which matches are the workspace's.
        everything = (
            select(FTS_ROWS.c.message_id)
            .select_from(FTS)
            .join(FTS_ROWS, FTS_ROWS.c.rowid == FTS.c.rowid)
            .where(match, FTS_ROWS.c.workspace_id == caller.workspace_id)
            .order_by(score, FTS_ROWS.c.message_id.desc())
        )
        return list(uow.session.scalars(everything.offset(f.offset).limit(f.count + 1)))
    stmt = (
        select(Message.id)
        .select_from(FTS)
        .join(FTS_ROWS, FTS_ROWS.c.rowid == FTS.c.rowid)
        .join(Message, Message.id == FTS_ROWS.c.message_id)
        .where(match)
    )
    stmt = _scoped(stmt, caller, f, sender_id, UNINDEXED)
    ordered = stmt.order_by(score, Message.id.desc()).offset(f.offset).limit(f.count + 1)
    return list(uow.session.scalars(ordered))


def _ranked_postgres(
    uow: UnitOfWork, caller: Caller, f: _Filters, sender_id: str | None
) -> list[str]:
    # Each word a quoted lexeme (letters and digits only, so nothing to escape); all required.
    terms = " & ".join(f"'{w}'" for w in f.words)
    query = func.to_tsquery(literal_column("'simple'::regconfig"), terms)
    score = func.ts_rank(VECTOR, query, 1)
    stmt = _scoped(select(Message.id).where(VECTOR.op("@@")(query)), caller, f, sender_id, INDEXED)
    ordered = stmt.order_by(score.desc(), Message.id.desc()).offset(f.offset).limit(f.count + 1)
    return list(uow.session.scalars(ordered))


def snippet(words: list[str], *texts: str | None) -> str:
    """The words around the best cluster of matches in the first of ``texts`` that has one (the
    body, then the summary, then the title), each match in [brackets]: one line of plain text,
    at most ``SNIPPET_MAX`` characters, with … where it was cut."""
    wanted = set(words)
    for text_ in [t for t in texts if t]:
        tokens = list(WORD.finditer(text_))
        hits = [i for i, m in enumerate(tokens) if m.group().lower() in wanted]
        if hits:
            break
    else:
        first = next((t for t in texts if t), "")
        return _cut(" ".join(first.split()), False)
    # The window of SNIPPET_WORDS words, starting a little before a match, holding most matches.
    best = max(hits, key=lambda h: sum(1 for x in hits if h <= x < h + SNIPPET_WORDS))
    start = max(0, best - SNIPPET_BEFORE)
    end = min(len(tokens), start + SNIPPET_WORDS)
    marked = set(hits)
    parts: list[str] = []
    at = tokens[start].start() if start else 0
    for i in range(start, end):
        m = tokens[i]
        parts.append(text_[at : m.start()])
        parts.append(f"[{m.group()}]" if i in marked else m.group())
        at = m.end()
    cut_after = end < len(tokens)
    if not cut_after:
        parts.append(text_[at:])
    line = " ".join("".join(parts).split())
    return ("…" if start else "") + _cut(line, cut_after)


def _cut(line: str, more: bool) -> str:
    if len(line) > SNIPPET_MAX - 1:
        return line[: SNIPPET_MAX - 1].rstrip() + "…"
    return line + "…" if more else line


@reads
def search(uow: UnitOfWork, caller: Caller, request: SearchQuery) -> SearchResults:
    """The messages the caller may read that hold every word of ``request.q`` (in the thread's
    title, the summary or the body), best match first, newest first among equals; filtered by
    sender, thread, kind and time. An agent searches the threads it is in that are not closed;
    the operator, its whole workspace. ``next_cursor`` continues with the next results."""
    f = _check(request, uow.settings)
    sender_id = None
    if f.sender is not None:
        sender_id = uow.session.scalar(
            select(Agent.id).where(
                Agent.workspace_id == caller.workspace_id, Agent.username == f.sender
            )
        )
        if sender_id is None:  # nobody of that name here: nothing they sent to find
            return SearchResults(items=[], next_cursor=None)
    postgres = uow.session.get_bind().dialect.name == "postgresql"
    ranked = (_ranked_postgres if postgres else _ranked_sqlite)(uow, caller, f, sender_id)
    page = ranked[: f.count]
    found = {
        row[0]: row
        for row in uow.session.execute(
            select(*HIT)
            .join(Thread, Thread.id == Message.thread_id)
            .join(Agent, Agent.id == Message.sender_id)
            .where(Message.id.in_(page))
        )
    }
    items = []
    for message_id in page:
        _, thread_id, title, sender, kind, summary, created_at, body = found[message_id]
        items.append(
            SearchHit(
                message_id=message_id,
                thread_id=thread_id,
                thread_title=title,
                sender=sender,
                kind=kind,
                summary=summary,
                snippet=snippet(f.words, body, summary, title),
                created_at=created_at,
            )
        )
    more = len(ranked) > f.count
    next_cursor = SEARCH.encode(f.offset + f.count) if more else None
    return SearchResults(items=items, next_cursor=next_cursor)
