"""The operator's links to attachments on the thread page: ``/attachments/{id}`` downloads one
(as ``GET /v1/attachments/{id}`` answers it), ``/attachments/{id}/thumbnail`` shows a raster
image inline for its thumbnail. Anything else (SVG included) is only ever a download, and every
answer carries ``nosniff`` and a CSP that allows nothing."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from inbots.dashboard.auth import LoginRequired, SessionEnded, as_operator, signed_in
from inbots.dashboard.render import current_path, render_page
from inbots.db.uow import UnitOfWork, reads, run_unit
from inbots.errors import InbotsError, not_found
from inbots.messages.attachments import AttachmentContent, read_attachment
from inbots.web.downloads import INLINE_IMAGES, download_headers, essence

router = APIRouter(include_in_schema=False)


@reads
def _as_operator(uow: UnitOfWork, key: str | None, attachment_id: str) -> AttachmentContent:
    return as_operator(uow, key, read_attachment, attachment_id)


def _file(request: Request, attachment_id: str, thumbnail: bool) -> Response:
    session = signed_in(request)
    state = request.app.state
    try:
        found = run_unit(state.db, state.dispatch, _as_operator, session.key, attachment_id)
        kind = essence(found.meta.content_type)
        if thumbnail and kind not in INLINE_IMAGES:
            raise not_found("attachment thumbnail", attachment_id)
    except SessionEnded:
        raise LoginRequired(current_path(request), ended=True) from None
    except InbotsError as exc:
        return render_page(
            request,
            session,
            "error.html",
            http_status=exc.status,
            section="threads",
            title="Not found" if exc.status == 404 else "Something is not right",
            error=exc,
        )
    if thumbnail:
        headers = download_headers(found.meta.name, kind, "inline")
    else:
        headers = download_headers(found.meta.name, found.meta.content_type)
    return Response(found.data, headers=headers)


@router.get("/attachments/{attachment_id}")
def download(request: Request, attachment_id: str) -> Response:
    """An attachment's bytes, as a download."""
    return _file(request, attachment_id, thumbnail=False)


@router.get("/attachments/{attachment_id}/thumbnail")
def thumbnail(request: Request, attachment_id: str) -> Response:
    """A PNG, JPEG, GIF or WebP attachment inline (the thread page shows it small); 404 for
    any other type."""
    return _file(request, attachment_id, thumbnail=True)
