"""The dashboard's Reservations page and Overview card, as served (SQLite only: the page runs the
services the API tests cover on both databases)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import httpx
import pytest

from tests.helpers import Api, dashboard


@pytest.fixture
def backend() -> str:
    return "sqlite"


@pytest.fixture
def page(api: Api) -> Iterator[httpx.Client]:
    with dashboard(api) as client:
        yield client


def test_the_page_shows_holder_paths_reason_and_expiry_and_the_card_counts(
    api: Api, page: httpx.Client
) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    held = alice.ok(
        "POST",
        "/reservations",
        201,
        json={"paths": ["src/api/**", "docs/api.md"], "reason": "split <the> router"},
    )["reservation"]
    ended = bob.ok("POST", "/reservations", 201, json={"paths": ["tests/**"]})["reservation"]
    bob.ok("DELETE", f"/reservations/{ended['id']}")

    text = page.get("/reservations").text
    row = text[text.index(f'data-reservation="{held["id"]}"') :]
    row = html.unescape(row[: row.index("</tr>")])
    assert "alice" in row and "src/api/**" in row and "docs/api.md" in row
    assert "split <the> router" in row
    assert "in 59 min" in row or "in 1 h" in row, row
    assert ended["id"] not in text  # released: not active
    assert "<the>" not in text  # escaped

    overview = page.get("/").text
    card = overview[overview.index('id="stat-reservations"') :]
    assert re.search(r'class="value">1<', card[:400]), card[:400]

    alice.ok("DELETE", f"/reservations/{held['id']}")
    assert 'id="reservations-empty"' in page.get("/reservations").text
