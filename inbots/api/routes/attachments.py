"""``GET /v1/attachments/{id}``: one attachment's bytes, as a download that no browser renders
(``Content-Disposition: attachment``, ``nosniff``, a CSP that runs nothing)."""

from __future__ import annotations

from fastapi import Response

from inbots.api.deps import ApiRouter, Ctx
from inbots.messages.attachments import read_attachment
from inbots.web.downloads import download_headers
from inbots.web.errors import EXPIRED

router = ApiRouter(tags=["attachments"])


@router.get(
    "/attachments/{attachment_id}",
    response_class=Response,
    responses={200: {"content": {"application/octet-stream": {}}}, **EXPIRED},
)
def get_attachment(ctx: Ctx, attachment_id: str) -> Response:
    """One attachment's bytes with its ``Content-Type``, as a download, for the sender of its
    message, its recipients (not while the message is held) and the operator; anyone else
    gets 404. Stamps nothing."""
    found = ctx.run(read_attachment, attachment_id)
    # The type exactly as sent (Starlette would add a charset to text/* given as media_type).
    return Response(found.data, headers=download_headers(found.meta.name, found.meta.content_type))
