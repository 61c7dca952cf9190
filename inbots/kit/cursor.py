"""Cursors: where a list's page ended, handed out as opaque text and read back, for every list.

Each list pages by one typed position: the last item's id (history, outbox, the operator's
deliveries and events: :data:`LAST_ID`), an inbox item's place in urgent-first order
(:data:`INBOX`), a thread's place in most-recent-activity order (:data:`THREADS`), or how many
search results came before (:data:`SEARCH`). :meth:`Codec.encode` writes a position,
:meth:`Codec.decode` reads it back, or refuses text this server did not write with the one 422
(``field="cursor"``).

The wire format is the one every earlier version wrote, so a cursor handed out before an upgrade
still pages on after it: the URL-safe base64 (unpadded) of ``<id>``, ``<rank>:<dlv_id>``,
``<RFC 3339 time>|<th_id>`` or ``at_<offset>``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from datetime import datetime
from typing import Generic, NamedTuple, TypeVar

from inbots.errors import Invalid
from inbots.kit.clock import in_utc, rfc3339
from inbots.kit.ids import kind_of

P = TypeVar("P")

NOT_OURS = "cursor is not one this server gave out"


class Codec(Generic[P]):
    """One list's cursor: a position ``P`` written as text and read back.

    ``read`` turns the decoded text back into a position, or None when it is not one. ``hint``
    follows the refusal's sentence (what to pass instead), for the lists that always said one;
    ``hint_unreadable`` False keeps it off text that is no cursor at all (not base64 of ASCII
    with an id in it), which search always refused with the bare sentence."""

    def __init__(
        self,
        write: Callable[[P], str],
        read: Callable[[str], P | None],
        *,
        hint: str = "",
        hint_unreadable: bool = True,
    ) -> None:
        self._write = write
        self._read = read
        self._refusal = f"{NOT_OURS}: {hint}" if hint else f"{NOT_OURS}."
        self._unreadable = self._refusal if hint_unreadable else f"{NOT_OURS}."

    def encode(self, position: P) -> str:
        return base64.urlsafe_b64encode(self._write(position).encode()).decode().rstrip("=")

    def decode(self, cursor: str | None) -> P | None:
        """The position ``cursor`` names; None for no cursor (None or empty): the first page."""
        if not cursor:
            return None
        unreadable = Invalid(self._unreadable, field="cursor")
        try:
            padded = cursor + "=" * (-len(cursor) % 4)
            text = base64.urlsafe_b64decode(padded.encode()).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise unreadable from None
        # Every position this server writes holds an id or "at_": ASCII, with an underscore.
        if not text or "_" not in text or not text.isascii():
            raise unreadable
        position = self._read(text)
        if position is None:
            raise Invalid(self._refusal, field="cursor")
        return position


# --- the positions -------------------------------------------------------------------------------


def _same(text: str) -> str:
    return text


LAST_ID: Codec[str] = Codec(_same, _same)
"""Keyset paging by id (ids order by creation): the last item's id."""


class InboxPlace(NamedTuple):
    """An inbox item's place in the inbox's order: urgent first (rank 0), then by delivery id."""

    rank: int
    delivery_id: str


def _read_inbox(text: str) -> InboxPlace | None:
    rank, _, last_id = text.partition(":")
    if rank not in ("0", "1") or kind_of(last_id) != "delivery":
        return None
    return InboxPlace(int(rank), last_id)


INBOX: Codec[InboxPlace] = Codec(
    lambda place: f"{place.rank}:{place.delivery_id}",
    _read_inbox,
    hint="pass the next_cursor of the previous inbox answer (with the same filters), or leave "
    "it out to start at the first page.",
)


class ThreadPlace(NamedTuple):
    """A thread's place in a thread list's order: most recent activity first, then by id."""

    activity: datetime
    thread_id: str


def _read_thread(text: str) -> ThreadPlace | None:
    stamp, _, last_id = text.partition("|")
    try:
        at = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    utc = in_utc(at) if at.tzinfo is not None else None
    if not last_id.startswith("th_") or utc is None:
        return None
    return ThreadPlace(utc, last_id)


THREADS: Codec[ThreadPlace] = Codec(
    lambda place: f"{rfc3339(place.activity)}|{place.thread_id}", _read_thread
)


def _read_offset(text: str) -> int | None:
    head, _, number = text.partition("_")
    if head != "at" or not number.isdigit() or len(number) > 9:
        return None
    return int(number)


SEARCH: Codec[int] = Codec(
    lambda offset: f"at_{offset}",
    _read_offset,
    hint="pass the next_cursor of the previous answer.",
    hint_unreadable=False,
)
"""Search ranks, so it pages by offset: how many results came before the next page."""
