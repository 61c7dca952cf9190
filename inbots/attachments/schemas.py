from __future__ import annotations

from inbots.kit.schema import Model, Request

NAME_MAX = 255  # characters of an attachment's name (and of its content type)


class AttachmentCreate(Request):
    # A file sent with a message, data in base64. No docstring: it would be the schema's
    # description in the MCP tool list, where every character counts (send_message says it).

    name: str  # 1 to NAME_MAX characters (checked by the service)
    content_type: str  # a media type: image/png, text/plain, ...
    data: str


class AttachmentRead(Model):
    """What a message lists of an attachment (never its bytes: ``GET /v1/attachments/{id}``,
    MCP ``read_attachment``)."""

    id: str
    name: str
    content_type: str
    bytes: int
    sha256: str
