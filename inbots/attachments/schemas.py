from __future__ import annotations

from pydantic import Field

from inbots.kit.schema import Model, Request
from inbots.limits import bounds

NAME_MAX = 255  # characters of an attachment's name (and of its content type)


class AttachmentCreate(Request):
    """A file sent with a message (data: base64)."""

    name: str = Field(json_schema_extra=bounds(maxLength=NAME_MAX))
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
