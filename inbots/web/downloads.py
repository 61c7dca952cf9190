"""What an answer carrying a stored file says, so no browser runs it: a download
(``Content-Disposition: attachment``, RFC 6266), ``nosniff`` and a CSP that allows nothing.
The API's ``GET /v1/attachments/{id}`` and the dashboard's file links both use it."""

from __future__ import annotations

from urllib.parse import quote

# Images a browser may show inline as a thumbnail: raster formats only (SVG can carry script
# and links, so it is always a download).
INLINE_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def essence(content_type: str) -> str:
    """``type/subtype`` of a media type, in lower case, without its parameters."""
    return content_type.split(";", 1)[0].strip().lower()


def content_disposition(name: str, disposition: str = "attachment") -> str:
    """RFC 6266: ``filename`` in ASCII (others as ``_``), and ``filename*`` (RFC 8187, UTF-8)
    when the name is not plain ASCII."""
    plain = "".join(c if " " <= c <= "~" else "_" for c in name)
    quoted = plain.replace("\\", "\\\\").replace('"', '\\"')
    value = f'{disposition}; filename="{quoted}"'
    if plain != name:
        value += f"; filename*=UTF-8''{quote(name, safe='')}"
    return value


def download_headers(
    name: str, content_type: str, disposition: str = "attachment"
) -> dict[str, str]:
    """The headers of an answer that is a stored file's bytes."""
    return {
        "Content-Type": content_type,
        "Content-Disposition": content_disposition(name, disposition),
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'; sandbox",
        "Cache-Control": "private, no-store",
    }
