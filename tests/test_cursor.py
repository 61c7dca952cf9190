"""The one cursor codec (``inbots.kit.cursor``): each list's position round-trips, the cursors
earlier versions handed out still decode (an agent may page across an upgrade), and anything
else is the one 422 naming ``cursor``, worded as each list always worded it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from inbots.errors import Invalid
from inbots.kit.cursor import INBOX, LAST_ID, SEARCH, THREADS, Codec, InboxPlace, ThreadPlace

BARE = "cursor is not one this server gave out."
INBOX_HINT = (
    "cursor is not one this server gave out: pass the next_cursor of the previous inbox answer "
    "(with the same filters), or leave it out to start at the first page."
)
SEARCH_HINT = "cursor is not one this server gave out: pass the next_cursor of the previous answer."

# Written by the codec before it was one module (kit.paging.encode_cursor of each list's text).
EARLIER = [
    (LAST_ID, "bXNnXzAxamRxNXcyeGcwMDAwMDAwMDAwMDAwMDAw", "msg_01jdq5w2xg0000000000000000"),
    (
        INBOX,
        "MTpkbHZfMDFqZHE1dzJ4ZzAwMDAwMDAwMDAwMDAwMDA",
        InboxPlace(1, "dlv_01jdq5w2xg0000000000000000"),
    ),
    (
        THREADS,
        "MjAyNi0xMS0yOVQxODoxMDowMC4xMjM0NTZafHRoXzAxamRxNXcyeGcwMDAwMDAwMDAwMDAwMDAw",
        ThreadPlace(
            datetime(2026, 11, 29, 18, 10, 0, 123456, tzinfo=UTC), "th_01jdq5w2xg0000000000000000"
        ),
    ),
    (SEARCH, "YXRfNDA", 40),
]


@pytest.mark.parametrize(("codec", "cursor", "position"), EARLIER, ids=lambda v: str(v)[:12])
def test_a_cursor_an_earlier_version_gave_out_decodes_and_is_written_the_same(
    codec: Codec[Any], cursor: str, position: object
) -> None:
    assert codec.decode(cursor) == position
    assert codec.encode(position) == cursor


def test_no_cursor_is_the_first_page() -> None:
    for codec in (LAST_ID, INBOX, THREADS, SEARCH):
        assert codec.decode(None) is None
        assert codec.decode("") is None


def _refusal(codec: Codec[Any], cursor: str) -> str:
    with pytest.raises(Invalid) as raised:
        codec.decode(cursor)
    assert raised.value.field == "cursor" and raised.value.code == "validation_error"
    return raised.value.message


def test_text_that_is_no_cursor_is_refused_with_each_lists_sentence() -> None:
    not_base64_of_ascii = "not-a-cursor"
    no_id = LAST_ID.encode("nothing")
    assert _refusal(LAST_ID, not_base64_of_ascii) == BARE
    assert _refusal(LAST_ID, no_id) == BARE
    assert _refusal(THREADS, not_base64_of_ascii) == BARE
    assert _refusal(INBOX, not_base64_of_ascii) == INBOX_HINT
    assert _refusal(INBOX, no_id) == INBOX_HINT
    # Search said the bare sentence for text that is no cursor at all, its hint otherwise.
    assert _refusal(SEARCH, not_base64_of_ascii) == BARE


def test_another_lists_cursor_is_refused() -> None:
    thread_cursor = THREADS.encode(ThreadPlace(datetime(2026, 1, 1, tzinfo=UTC), "th_1"))
    message_cursor = LAST_ID.encode("msg_1")
    assert _refusal(INBOX, message_cursor) == INBOX_HINT
    assert _refusal(INBOX, INBOX.encode(InboxPlace(2, "dlv_1"))) == INBOX_HINT
    assert _refusal(THREADS, message_cursor) == BARE
    assert _refusal(SEARCH, thread_cursor) == SEARCH_HINT
    assert _refusal(SEARCH, SEARCH.encode(10**9)) == SEARCH_HINT  # more than nine digits


def test_a_thread_cursor_needs_a_time_with_its_zone_that_utc_can_hold() -> None:
    zoneless = LAST_ID.encode("2026-11-29T18:10:00|th_1")  # the wire text, written as it is
    year_zero = LAST_ID.encode("0001-01-01T00:00:00+14:00|th_1")
    assert _refusal(THREADS, zoneless) == BARE
    assert _refusal(THREADS, year_zero) == BARE
    place = THREADS.decode(LAST_ID.encode("2026-11-29T20:10:00+02:00|th_1"))
    assert place == ThreadPlace(datetime(2026, 11, 29, 18, 10, tzinfo=UTC), "th_1")
