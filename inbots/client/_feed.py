"""The inbox iterator's plan, shared by the sync and the async ``messages()``: which call to
make next, and which items of its answer are new. No I/O here.

The plan:

1. **Catch up**: list the inbox (``GET /v1/inbox``), following ``next_cursor`` page by page
   (the inbox pages without acknowledging).
2. **Long-poll** (``GET /v1/inbox/wait``): the server answers as soon as there is mail it has
   not shown before, listing only that mail, so a wait never repeats an item.
3. Go back to 1 before the next wait only when the set of ids already yielded has grown large:
   a complete listing trims it.

Every item's ``delivery_id`` is remembered, so no item is yielded twice by one iterator. A
complete listing (every unacknowledged delivery seen) trims that memory to what it listed:
mail acknowledged since can never be listed again.
"""

from __future__ import annotations

from inbots.client import _calls
from inbots.client._base import Call
from inbots.client._models import Inbox, InboxItem

TRIM_AT = 4096  # remembered ids before a complete listing is sought to trim them


class Feed:
    def __init__(self, *, limit: int | None, include: str | None, wait: float | None) -> None:
        self.limit = limit
        self.include = include
        self.wait = wait
        self.seen: set[str] = set()
        self.listing = True  # the next call lists the inbox; else it waits
        self.cursor: str | None = None
        self.listed: set[str] = set()  # ids of the listing under way
        self.trim_at = TRIM_AT
        self.idle = False  # the last call was a wait that timed out with nothing new

    def next_call(self) -> Call[Inbox]:
        if self.listing:
            return _calls.inbox(self.limit, cursor=self.cursor, include=self.include)
        return _calls.wait(self.wait, None)

    def take(self, page: Inbox) -> list[InboxItem]:
        """The items of ``page`` not yielded before; advances the plan."""
        fresh = [item for item in page.items if item.delivery_id not in self.seen]
        self.seen.update(item.delivery_id for item in fresh)
        if self.listing:
            self._listed(page)
            self.idle = False
        else:
            self.idle = not page.items
            self.listing = len(self.seen) >= self.trim_at
        return fresh

    def _listed(self, page: Inbox) -> None:
        self.listed.update(item.delivery_id for item in page.items)
        if page.next_cursor:
            self.cursor = page.next_cursor
            return
        # The last page: the listing was complete, so what it did not list was acknowledged.
        self.seen = self.listed
        self.trim_at = max(TRIM_AT, 2 * len(self.seen))
        self.listing = False
        self.cursor = None
        self.listed = set()
