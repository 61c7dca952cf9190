"""``read_attachment``: an attachment as MCP content a model can take in: an image as image
content, text and JSON as text, anything else as an embedded resource (a base64 blob) with its
name and type. Its metadata is the structured content. The service is the HTTP route's
(:func:`inbots.messages.attachments.read_attachment`): the same checks, nothing stamped."""

from __future__ import annotations

import base64
from urllib.parse import quote

from mcp_types import BlobResourceContents, EmbeddedResource, ImageContent, TextContent

from inbots.attachments.schemas import AttachmentRead
from inbots.mcp.arguments import Arguments
from inbots.mcp.spec import Blocks, ToolContext
from inbots.messages.attachments import AttachmentContent, read_attachment


class ReadAttachmentArguments(Arguments):
    attachment_id: str


def _essence(content_type: str) -> tuple[str, str | None]:
    """``type/subtype`` in lower case, and the ``charset`` parameter if one is given."""
    head, *params = content_type.split(";")
    charset = None
    for param in params:
        key, _, value = param.strip().partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip('"') or None
    return head.strip().lower(), charset


def _as_text(found: AttachmentContent, charset: str | None) -> str | None:
    try:
        return found.data.decode(charset or "utf-8")
    except (LookupError, UnicodeDecodeError):
        return None


def _caption(meta: AttachmentRead) -> TextContent:
    """A line after an image or a file saying what it is (a text file is its own text)."""
    return TextContent(
        text=f"{meta.name} ({meta.content_type}, {meta.bytes:,} bytes, sha256 {meta.sha256})"
    )


def blocks_of(found: AttachmentContent) -> Blocks:
    """The content block that carries ``found`` best (see the module's docstring), first."""
    meta = found.meta
    essence, charset = _essence(meta.content_type)
    if essence.startswith("image/"):
        data = base64.b64encode(found.data).decode("ascii")
        return Blocks(meta, [ImageContent(data=data, mime_type=essence), _caption(meta)])
    textual = essence.startswith("text/") or essence in ("application/json",)
    if textual or essence.endswith("+json"):
        text = _as_text(found, charset)
        if text is not None:
            return Blocks(meta, [TextContent(text=text)])
    blob = BlobResourceContents(
        uri=f"inbots://attachments/{meta.id}/{quote(meta.name, safe='')}",
        mime_type=meta.content_type,
        blob=base64.b64encode(found.data).decode("ascii"),
        _meta={"name": meta.name},
    )
    return Blocks(meta, [EmbeddedResource(resource=blob), _caption(meta)])


async def read_attachment_tool(t: ToolContext, a: ReadAttachmentArguments) -> Blocks:
    return blocks_of(await t.run(read_attachment, a.attachment_id))
