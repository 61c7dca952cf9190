"""Attachments on the dashboard (coordination.md §2): listed on the message in the thread page,
downloadable by the signed-in operator; raster images as thumbnails served inline with a CSP
that allows nothing; an SVG (which can carry script) is never shown inline, only downloaded."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.helpers import Api, dashboard
from tests.test_attachments import PNG, attachment

SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'


@pytest.fixture
def backend() -> str:
    return "sqlite"


@pytest.fixture
def page(api: Api) -> Iterator[httpx.Client]:
    with dashboard(api) as client:
        yield client


def test_the_thread_page_lists_attachments_with_thumbnails_for_raster_images_only(
    api: Api, page: httpx.Client
) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("Screens", ["bob"])["id"]
    files = [
        attachment("shot.png", "image/png", PNG),
        attachment("evil.svg", "image/svg+xml", SVG),
        attachment("notes.txt", "text/plain", b"notes"),
    ]
    png, svg, txt = alice.send(thread, "look", attachments=files)["message"]["attachments"]
    html = page.get(f"/threads/{thread}").text
    for item in (png, svg, txt):
        assert f'href="/attachments/{item["id"]}"' in html and item["name"] in html
    assert f'src="/attachments/{png["id"]}/thumbnail"' in html
    assert f"/attachments/{svg['id']}/thumbnail" not in html

    thumb = page.get(f"/attachments/{png['id']}/thumbnail")
    assert thumb.status_code == 200 and thumb.content == PNG
    assert thumb.headers["content-type"] == "image/png"
    assert thumb.headers["content-security-policy"] == "default-src 'none'; sandbox"
    assert thumb.headers["x-content-type-options"] == "nosniff"
    assert thumb.headers["content-disposition"].startswith("inline;")

    assert page.get(f"/attachments/{svg['id']}/thumbnail").status_code == 404
    download = page.get(f"/attachments/{svg['id']}")
    assert download.status_code == 200 and download.content == SVG
    assert download.headers["content-disposition"] == 'attachment; filename="evil.svg"'
    assert download.headers["content-security-policy"] == "default-src 'none'; sandbox"
    assert page.get(f"/attachments/{txt['id']}").content == b"notes"
    assert page.get("/attachments/att_nope").status_code == 404


def test_attachment_links_need_the_operators_session(api: Api) -> None:
    alice = api.agent("alice")
    api.agent("bob")
    thread = alice.open_thread("Screens", ["bob"])["id"]
    files = [attachment("shot.png", "image/png", PNG)]
    (png,) = alice.send(thread, "look", attachments=files)["message"]["attachments"]
    with httpx.Client(base_url=api.base_url, timeout=30) as anonymous:
        for path in (f"/attachments/{png['id']}", f"/attachments/{png['id']}/thumbnail"):
            answer = anonymous.get(path)
            assert answer.status_code == 303 and "/login" in answer.headers["location"]
            assert PNG not in answer.content
