"""Attachments through the official MCP client on ``/mcp`` (coordination.md §2): send_message
takes them, read_message lists them, read_attachment gives an image as image content, text and
JSON as text, anything else as an embedded resource; the same 404 and 413/422 as HTTP."""

from __future__ import annotations

import base64
import hashlib
import json
import os

from mcp_types import BlobResourceContents, EmbeddedResource, ImageContent, TextContent

from tests.conftest import ServerThread
from tests.helpers import Api
from tests.mcp_client import over_http, over_stdio, run, text_of
from tests.test_attachments import PNG, attachment

MIB = 1024 * 1024


def test_read_attachment_returns_each_kind_as_its_content(api: Api, server: ServerThread) -> None:
    alice, bob, carol = api.agent("alice"), api.agent("bob"), api.agent("carol")
    blob = bytes(range(256))
    doc = {"ok": True, "n": 3}

    async def scenario() -> None:
        async with over_http(server.url, alice.token) as a, over_http(server.url, bob.token) as b:
            sent = await a.ok(
                "send_message",
                to=["bob"],
                body="three files",
                attachments=[
                    attachment("shot.png", "image/png", PNG),
                    attachment("notes.md", "text/markdown; charset=utf-8", "héllo".encode()),
                    attachment("d.json", "application/json", json.dumps(doc).encode()),
                    attachment("raw.bin", "application/octet-stream", blob),
                ],
            )
            listed = sent["message"]["attachments"]
            assert [x["name"] for x in listed] == ["shot.png", "notes.md", "d.json", "raw.bin"]
            read = await b.ok("read_message", id=sent["message"]["id"])
            assert read["message"]["attachments"] == listed
            # The text answers name each file with the id read_attachment takes.
            shown = text_of(await b.call("read_message", id=sent["message"]["id"]))
            assert "read_attachment" in shown and all(x["id"] in shown for x in listed)
            inbox = text_of(await b.call("check_inbox", include_bodies=True))
            assert all(x["id"] in inbox for x in listed)
            history = text_of(await b.call("read_thread", thread_id=sent["message"]["thread_id"]))
            assert all(x["id"] in history for x in listed)

            image = await b.call("read_attachment", attachment_id=listed[0]["id"])
            assert not image.is_error
            first = image.content[0]
            assert isinstance(first, ImageContent)
            assert first.mime_type == "image/png" and base64.b64decode(first.data) == PNG
            assert image.structured_content == listed[0]

            text = await b.call("read_attachment", attachment_id=listed[1]["id"])
            assert [type(c) for c in text.content] == [TextContent]
            assert isinstance(text.content[0], TextContent) and text.content[0].text == "héllo"

            data = await b.call("read_attachment", attachment_id=listed[2]["id"])
            assert isinstance(data.content[0], TextContent)
            assert json.loads(data.content[0].text) == doc

            other = await b.call("read_attachment", attachment_id=listed[3]["id"])
            embedded = other.content[0]
            assert isinstance(embedded, EmbeddedResource)
            resource = embedded.resource
            assert isinstance(resource, BlobResourceContents)
            assert resource.mime_type == "application/octet-stream"
            assert base64.b64decode(resource.blob) == blob
            assert resource.uri.endswith("/raw.bin")
            assert (
                hashlib.sha256(base64.b64decode(resource.blob)).hexdigest() == listed[3]["sha256"]
            )

        async with over_http(server.url, carol.token) as d:  # not a recipient
            code, words = await d.error("read_attachment", attachment_id=listed[0]["id"])
            assert code == "not_found" and "att_" in words

    run(scenario)


def test_send_message_refuses_bad_attachments_as_http_does(api: Api, server: ServerThread) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")

    async def scenario() -> None:
        async with over_http(server.url, alice.token) as a:
            bad = [{"name": "x.txt", "content_type": "text/plain", "data": "%%%"}]
            code, words = await a.error("send_message", to=["bob"], body="x", attachments=bad)
            assert code == "validation_error" and "base64" in words
            big = [attachment("big.bin", "application/octet-stream", b"\0" * (MIB + 1))]
            code, _ = await a.error("send_message", to=["bob"], body="x", attachments=big)
            assert code == "payload_too_large"
            result = await a.call("send_message", to=["bob"], body="x", attachments=big)
            assert result.structured_content is not None
            assert result.structured_content["error"]["field"] == "attachments[0]"
            assert bob.inbox()["waiting"] == 0  # nothing stored
            # /mcp takes a request as large as a send's attachments make it (not 64 KiB).
            blob = os.urandom(700 * 1024)
            large = [attachment("large.bin", "application/octet-stream", blob)]
            sent = await a.ok("send_message", to=["bob"], body="large", attachments=large)
            (listed,) = sent["message"]["attachments"]
            assert bob.get(f"/attachments/{listed['id']}").content == blob

    run(scenario)


def test_read_attachment_is_listed_in_tools_list(api: Api, server: ServerThread) -> None:
    alice = api.agent("alice")

    async def scenario() -> None:
        async with over_http(server.url, alice.token) as a:
            tools = {t.name: t for t in (await a.client.list_tools()).tools}
            assert tools["read_attachment"].input_schema["required"] == ["attachment_id"]
            assert "attachments" in tools["send_message"].input_schema["properties"]

    run(scenario)


def test_inbots_mcp_relays_an_image_attachment_as_image_content(
    api: Api, server: ServerThread
) -> None:
    """The stdio relay (a real ``inbots mcp`` process) knows no tool: the image arrives as the
    endpoint answered it."""
    alice, bob = api.agent("alice"), api.agent("bob")
    thread = alice.open_thread("Screens", ["bob"])["id"]
    files = [attachment("shot.png", "image/png", PNG)]
    (listed,) = alice.send(thread, "look", attachments=files)["message"]["attachments"]

    async def scenario() -> None:
        async with over_stdio(server.url, bob.token) as b:
            names = [t.name for t in (await b.client.list_tools()).tools]
            assert "read_attachment" in names
            result = await b.call("read_attachment", attachment_id=listed["id"])
            image = result.content[0]
            assert isinstance(image, ImageContent) and image.mime_type == "image/png"
            assert base64.b64decode(image.data) == PNG

    run(scenario)
