"""Searching the messages a caller may read: the words of ``q`` in thread titles, summaries and
bodies, best match first.

The index is the database's own (migration 0010): FTS5 on SQLite, a ``tsvector`` with a GIN
index on PostgreSQL, both kept by triggers. ``q`` is user text and never query syntax: it is cut
into words here (letters and digits; everything else separates them), and the engine's query is
built from those words alone, each quoted, so quotes, ``*``, ``%``, ``_``, ``NEAR``, ``AND`` or
parentheses can neither change the query nor break it. A word of three or more characters also
matches as the start of a longer one (``deploy`` finds ``deployed``), on both engines alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    column,
    func,
    literal_column,
    select,
    table,
    text,
)

from inbots.agents.models import Agent
from inbots.agents.service import check_username
from inbots.auth.service import Caller
from inbots.config import Settings
from inbots.db.uow import UnitOfWork, reads
from inbots.errors import Invalid, SearchQueryInvalid
from inbots.kit.ids import kind_of
from inbots.kit.paging import clamp_limit, decode_cursor, encode_cursor
from inbots.messages.models import KINDS, Message
from inbots.search.schemas import SearchHit, SearchQuery, SearchResults
from inbots.threads.models import CLOSED, Participant, Thread

WORD = re.compile(r"[^\W_]+")  # letters and digits, as both engines' tokenizers cut words
PREFIX_FROM = 3  # a word this long also matches as the start of a longer word
SNIPPET_MAX = 240  # characters of a snippet

# SQLite: the FTS5 table (title, summary, body) and the map giving each message its rowid.
FTS = table("message_search", column("rowid"))
FTS_ROWS = table("message_search_rows", column("rowid"), column("message_id"))
# bm25 column weights: a word in the title counts most, then the summary, then the body.
FTS_WEIGHTS = (10.0, 4.0, 1.0)
# ``+thread_id``: the same value, but no index on it. SQLite would otherwise take the
# (thread_id, id) index for an agent's threads and probe the full-text match once per message of
# them (seconds for a common word); without it, the match drives and the rest are lookups.
AS_IS_THREAD: ColumnElement[str] = literal_column("+messages.thread_id")
# PostgreSQL: the trigger-kept tsvector of messages (title weighted A, summary B, body C).
VECTOR: ColumnElement[Any] = literal_column("messages.search_vector")
HEADLINE = (
    'StartSel=[, StopSel=], MaxWords=30, MinWords=12, MaxFragments=2, FragmentDelimiter=" … "'
)


def words_of(q: object, settings: Settings) -> list[str]:
    """The distinct words of ``q`` (lower case), or ``422 search_query_invalid`` saying how to
    fix it: none at all, too long, or too many words."""
    if q is None or (isinstance(q, str) and not q.strip()):
        raise SearchQueryInvalid(
            "q is empty: give the words to find, e.g. q=deploy rollback.", field="q"
        )
    if not isinstance(q, str):
        raise SearchQueryInvalid("q must be text: the words to find.", field="q")
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


def _moment(value: object, field: str) -> datetime | None:
    if value is None or value == "":
        return None
    example = "an RFC 3339 time such as 2026-11-29T18:10:00Z"
    if not isinstance(value, str):
        raise Invalid(f"{field} must be {example}.", field=field)
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise Invalid(f"{field} must be {example} (got {value[:40]!r}).", field=field) from None
    if moment.tzinfo is None:
        raise Invalid(f"{field} must carry a time zone (end it with Z for UTC).", field=field)
    return moment


def _offset(cursor: object) -> int:
    if cursor is None or cursor == "":
        return 0
    wrong = "cursor is not one this server gave out: pass the next_cursor of the previous answer."
    if not isinstance(cursor, str):
        raise Invalid(wrong, field="cursor")
    value = decode_cursor(cursor) or ""
    head, _, number = value.partition("_")
    if head != "at" or not number.isdigit() or len(number) > 9:
        raise Invalid(wrong, field="cursor")
    return int(number)


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
    if thread is not None and (not isinstance(thread, str) or kind_of(thread) != "thread"):
        raise Invalid(
            "thread must be a thread id (th_…), as list_threads (GET /v1/threads) gives them.",
            field="thread",
        )
    kind = request.kind or None
    if kind is not None and kind not in KINDS:
        raise Invalid(f"kind must be one of {', '.join(KINDS)}.", field="kind")
    since, until = _moment(request.since, "since"), _moment(request.until, "until")
    if since is not None and until is not None and since >= until:
        raise Invalid("since must be earlier than until.", field="since")
    count = clamp_limit(request.limit, settings.list_default, settings.list_max)
    return _Filters(words, sender, thread, kind, since, until, count, _offset(request.cursor))


def _visible(
    caller: Caller, f: _Filters, thread_column: ColumnElement[str] | None = None
) -> list[ColumnElement[bool]]:
    """What the caller may read, and the filters: an agent, the messages of threads it is in
    that are not closed; the operator, every message of its workspace; nobody another's."""
    where: list[ColumnElement[bool]] = [Message.workspace_id == caller.workspace_id]
    if not caller.is_operator:
        mine = select(Participant.thread_id).where(Participant.agent_id == caller.agent_id)
        by_thread = Message.thread_id if thread_column is None else thread_column
        where += [by_thread.in_(mine), Thread.status != CLOSED]
    if f.sender is not None:
        where.append(Agent.username == f.sender)
    if f.thread is not None:
        where.append(Message.thread_id == f.thread)
    if f.kind is not None:
        where.append(Message.kind == f.kind)
    if f.since is not None:
        where.append(Message.created_at >= f.since)
    if f.until is not None:
        where.append(Message.created_at < f.until)
    return where


# What a hit shows, in SearchHit's order; every search joins threads (title, status) and agents
# (the sender's username) to the messages it finds.
HIT = (
    Message.id,
    Message.thread_id,
    Thread.title,
    Agent.username,
    Message.kind,
    Message.summary,
    Message.created_at,
)
THREAD = Thread.id == Message.thread_id
SENDER = Agent.id == Message.sender_id


def _fts_match(words: list[str]) -> str:
    # Each word a quoted FTS5 string (letters and digits only, so nothing to escape), all
    # required; a long enough word also as a prefix.
    return " ".join(f'"{w}"*' if len(w) >= PREFIX_FROM else f'"{w}"' for w in words)


def _sqlite(uow: UnitOfWork, caller: Caller, f: _Filters) -> tuple[list[Any], dict[str, str]]:
    match = _fts_match(f.words)
    score = func.bm25(literal_column("message_search"), *FTS_WEIGHTS)
    stmt = (
        select(*HIT, FTS_ROWS.c.rowid)
        .select_from(FTS)
        .join(FTS_ROWS, FTS_ROWS.c.rowid == FTS.c.rowid)
        .join(Message, Message.id == FTS_ROWS.c.message_id)
        .join(Thread, THREAD)
        .join(Agent, SENDER)
        .where(text("message_search MATCH :match").bindparams(match=match), *_visible(caller, f))
    )
    rows = uow.session.execute(
        stmt.order_by(score, Message.id.desc()).offset(f.offset).limit(f.count + 1)
    ).all()
    page = rows[: f.count]
    snippets: dict[str, str] = {}
    if page:
        by_rowid: dict[int, str] = {int(row[-1]): str(row[0]) for row in page}
        found = uow.session.execute(
            text(
                "SELECT rowid, snippet(message_search, -1, '[', ']', '…', 24) FROM message_search "
                "WHERE message_search MATCH :match AND rowid IN ("
                + ", ".join(str(int(r)) for r in by_rowid)
                + ")"
            ).bindparams(match=match)
        ).all()
        snippets = {by_rowid[r]: s for r, s in found}
    return [tuple(row)[:-1] for row in rows], snippets


def _postgres(uow: UnitOfWork, caller: Caller, f: _Filters) -> tuple[list[Any], dict[str, str]]:
    # Each word a quoted lexeme (letters and digits only, so nothing to escape), all required.
    terms = " & ".join(f"'{w}':*" if len(w) >= PREFIX_FROM else f"'{w}'" for w in f.words)
    query = func.to_tsquery(literal_column("'simple'::regconfig"), terms)
    score = func.ts_rank(VECTOR, query, 1)
    stmt = (
        select(*HIT)
        .select_from(Message)
        .join(Thread, THREAD)
        .join(Agent, SENDER)
        .where(VECTOR.op("@@")(query), *_visible(caller, f))
    )
    rows = uow.session.execute(
        stmt.order_by(score.desc(), Message.id.desc()).offset(f.offset).limit(f.count + 1)
    ).all()
    page = rows[: f.count]
    snippets: dict[str, str] = {}
    if page:
        document = func.concat_ws(" — ", Message.summary, Message.body)
        found = uow.session.execute(
            select(
                Message.id,
                func.ts_headline(literal_column("'simple'::regconfig"), document, query, HEADLINE),
            ).where(Message.id.in_([row[0] for row in page]))
        ).all()
        snippets = {message_id: s for message_id, s in found}
    return [tuple(row) for row in rows], snippets


def _plain(snippet: str | None) -> str:
    """One line of plain text, at most ``SNIPPET_MAX`` characters."""
    line = " ".join((snippet or "").split())
    return line if len(line) <= SNIPPET_MAX else line[: SNIPPET_MAX - 1].rstrip() + "…"


@reads
def search(uow: UnitOfWork, caller: Caller, request: SearchQuery) -> SearchResults:
    """The messages the caller may read that hold every word of ``request.q`` (in the thread's
    title, the summary or the body), best match first, newest first among equals; filtered by
    sender, thread, kind and time. An agent searches the threads it is in that are not closed;
    the operator, its whole workspace. ``next_cursor`` continues with the next results."""
    f = _check(request, uow.settings)
    postgres = uow.session.get_bind().dialect.name == "postgresql"
    rows, snippets = (_postgres if postgres else _sqlite)(uow, caller, f)
    page = rows[: f.count]
    items = [
        SearchHit(
            message_id=message_id,
            thread_id=thread_id,
            thread_title=title,
            sender=sender,
            kind=kind,
            summary=summary,
            snippet=_plain(snippets.get(message_id)),
            created_at=created_at,
        )
        for message_id, thread_id, title, sender, kind, summary, created_at in page
    ]
    more = len(rows) > f.count
    next_cursor = encode_cursor(f"at_{f.offset + f.count}") if more else None
    return SearchResults(items=items, next_cursor=next_cursor)
