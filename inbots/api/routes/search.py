from __future__ import annotations

from inbots.api.deps import ApiRouter, Ctx, Limit
from inbots.search import service
from inbots.search.schemas import SearchQuery, SearchResults

router = ApiRouter(tags=["search"])


@router.get(
    "/search",
    response_model=SearchResults,
    responses={
        422: {
            "description": "search_query_invalid: q has nothing to search for, is too "
            "long or has too many words; or a filter is malformed."
        }
    },
)
def search(
    ctx: Ctx,
    limit: Limit,
    q: str | None = None,
    sender: str | None = None,
    thread: str | None = None,
    kind: str | None = None,
    since: str | None = None,
    until: str | None = None,
    cursor: str | None = None,
) -> SearchResults:
    """Full-text search of the messages you may read: every word of ``q`` in the thread's title,
    the summary or the body, best match first. ``q`` is plain text, never query syntax. Agents
    search the threads they are in that are not closed; the operator, the whole workspace.
    ``sender`` (username), ``thread`` (th_…), ``kind``, ``since``/``until`` (RFC 3339) narrow
    it; follow ``next_cursor`` for more."""
    # Every parameter is typed already (FastAPI read them as the signature says), so the model is
    # not validated again; the service checks its rules with its own sentences (a missing q is
    # its "q is empty").
    request = SearchQuery.model_construct(
        q=q or "",
        sender=sender,
        thread=thread,
        kind=kind,
        since=since,
        until=until,
        limit=limit,
        cursor=cursor,
    )
    return ctx.run(service.search, request)
