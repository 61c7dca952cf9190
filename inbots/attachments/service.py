"""Attachments: the send's checks (count, sizes, name, media type, base64), storing them with
their message, and listing what each message carries. Who may read one is decided above, in
:mod:`inbots.messages.attachments`."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from inbots.attachments.schemas import NAME_MAX, AttachmentCreate, AttachmentRead
from inbots.config import Settings
from inbots.errors import Invalid, PayloadTooLarge
from inbots.kit.ids import new_id
from inbots.models.attachments import Attachment

# RFC 6838 type/subtype (restricted names), with RFC 9110 parameters (token or quoted value).
_NAME = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
MEDIA_TYPE = re.compile(
    rf"{_NAME}/{_NAME}(?:[ \t]*;[ \t]*{_TOKEN}=(?:{_TOKEN}|\"[^\"\\\x00-\x1f\x7f]*\"))*"
)


@dataclass(frozen=True)
class Checked:
    """An attachment of a send, decoded and hashed, not stored yet."""

    name: str
    content_type: str
    data: bytes
    sha256: str


def _mib(n: int) -> str:
    return f"{n / 1024 / 1024:g} MiB" if n >= 1024 * 1024 else f"{n:,} bytes"


def check(settings: Settings, items: Sequence[AttachmentCreate] | None) -> list[Checked]:
    """A send's attachments, decoded: each named by its place (``attachments[i]``) when refused.
    Over ``attachments_max``, ``attachment_bytes`` or ``attachments_total_bytes`` (decoded):
    413 ``payload_too_large``; a bad name, media type or base64: 422."""
    if not items:
        return []
    s = settings
    if len(items) > s.attachments_max:
        raise PayloadTooLarge(
            f"A message carries at most {s.attachments_max} attachments; this one has "
            f"{len(items)}. Send the rest in another message.",
            field=f"attachments[{s.attachments_max}]",
        )
    checked: list[Checked] = []
    total = 0
    for i, item in enumerate(items):
        field = f"attachments[{i}]"
        name = item.name
        if not 1 <= len(name) <= NAME_MAX or "/" in name or "\\" in name or not name.isprintable():
            raise Invalid(
                f"{field}.name must be a file name of 1 to {NAME_MAX} characters, with no / or \\ "
                "and no control characters.",
                field=f"{field}.name",
            )
        content_type = item.content_type.strip()
        if len(content_type) > NAME_MAX or not MEDIA_TYPE.fullmatch(content_type):
            raise Invalid(
                f"{field}.content_type must be a media type such as image/png, text/plain or "
                "application/octet-stream.",
                field=f"{field}.content_type",
            )
        try:
            data = base64.b64decode(item.data, validate=True)
        except (binascii.Error, ValueError):
            raise Invalid(
                f"{field} ({name}): data is not valid base64 (the standard alphabet A-Z a-z "
                "0-9 + /, padded with =, no line breaks).",
                field=field,
            ) from None
        if len(data) > s.attachment_bytes:
            raise PayloadTooLarge(
                f"{field} ({name}) is {len(data):,} bytes decoded; an attachment may be at most "
                f"{_mib(s.attachment_bytes)}. Point at a file or URL instead.",
                field=field,
            )
        total += len(data)
        if total > s.attachments_total_bytes:
            raise PayloadTooLarge(
                f"The attachments come to more than {_mib(s.attachments_total_bytes)} decoded "
                f"with {field} ({name}); send it in another message.",
                field=field,
            )
        checked.append(Checked(name, content_type, data, hashlib.sha256(data).hexdigest()))
    return checked


def fingerprint_of(checked: Sequence[Checked]) -> list[str]:
    """What a send's idempotency fingerprint takes of its attachments: names, types, hashes."""
    return [f"{c.name}\n{c.content_type}\n{c.sha256}" for c in checked]


def store(
    session: Session, workspace_id: str, message_id: str, checked: Sequence[Checked]
) -> list[AttachmentRead]:
    """Store a just-flushed message's attachments (one statement) and say what it lists."""
    if not checked:
        return []
    rows = [
        {
            "id": new_id("att"),
            "message_id": message_id,
            "workspace_id": workspace_id,
            "position": i,
            "name": c.name,
            "content_type": c.content_type,
            "size": len(c.data),
            "sha256": c.sha256,
            "data": c.data,
        }
        for i, c in enumerate(checked)
    ]
    session.execute(insert(Attachment), rows)
    return [
        AttachmentRead(
            id=str(r["id"]),
            name=c.name,
            content_type=c.content_type,
            bytes=len(c.data),
            sha256=c.sha256,
        )
        for r, c in zip(rows, checked, strict=True)
    ]


def listed(session: Session, message_ids: Iterable[str]) -> dict[str, list[AttachmentRead]]:
    """Each message's attachments (metadata only, in the send's order); absent when none."""
    ids = list(dict.fromkeys(message_ids))
    if not ids:
        return {}
    rows = session.execute(
        select(
            Attachment.message_id,
            Attachment.id,
            Attachment.name,
            Attachment.content_type,
            Attachment.size,
            Attachment.sha256,
        )
        .where(Attachment.message_id.in_(ids))
        .order_by(Attachment.message_id, Attachment.position)
    ).all()
    found: dict[str, list[AttachmentRead]] = {}
    for r in rows:
        found.setdefault(r.message_id, []).append(
            AttachmentRead(
                id=r.id, name=r.name, content_type=r.content_type, bytes=r.size, sha256=r.sha256
            )
        )
    return found


@dataclass(frozen=True)
class Found:
    """One attachment's row without its bytes: enough to decide who may read it."""

    id: str
    message_id: str
    name: str
    content_type: str
    bytes: int
    sha256: str


def find(session: Session, workspace_id: str, attachment_id: str) -> Found | None:
    row = session.execute(
        select(
            Attachment.id,
            Attachment.message_id,
            Attachment.name,
            Attachment.content_type,
            Attachment.size,
            Attachment.sha256,
        ).where(Attachment.id == attachment_id, Attachment.workspace_id == workspace_id)
    ).first()
    return None if row is None else Found(*row)


def data_of(session: Session, attachment_id: str) -> bytes:
    """One attachment's bytes, and only its (the column is deferred everywhere else)."""
    return session.scalars(select(Attachment.data).where(Attachment.id == attachment_id)).one()
