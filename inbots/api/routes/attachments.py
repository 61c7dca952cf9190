"""``GET /v1/attachments/{id}``: one attachment's bytes, as a download that no browser renders
(``Content-Disposition: attachment``, ``nosniff``, a CSP that runs nothing)."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Response

from inbots.api.deps import AuthFirstRoute, Ctx
from inbots.messages.attachments import read_attachment
from inbots.web.errors import EXPIRED

router = APIRouter(tags=["attachments"], route_class=AuthFirstRoute)


def content_disposition(name: str) -> str:
    """RFC 6266: ``filename`` in ASCII (others as ``_``), and ``filename*`` (RFC 8187, UTF-8)
    when the name is not plain ASCII."""
    plain = "".join(c if " " <= c <= "~" else "_" for c in name)
    quoted = plain.replace("\\", "\\\\").replace('"', '\\"')
    value = f'attachment; filename="{quoted}"'
    if plain != name:
        value += f"; filename*=UTF-8''{quote(name, safe='')}"
    return value


def download_headers(name: str) -> dict[str, str]:
    """What every answer carrying an attachment's bytes says (the API's and the dashboard's)."""
    return {
        "Content-Disposition": content_disposition(name),
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'; sandbox",
        "Cache-Control": "private, no-store",
    }


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
    headers = {"Content-Type": found.meta.content_type, **download_headers(found.meta.name)}
    return Response(found.data, headers=headers)
