"""Reading one attachment: who may (the message's sender, its recipients once the message is
released, the operator), and its bytes. Reading stamps nothing. Storing them is the send's
(:mod:`inbots.attachments.service`, called from :mod:`.service`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from inbots.attachments import service as attachments
from inbots.attachments.schemas import AttachmentRead
from inbots.caller import Caller
from inbots.db.uow import UnitOfWork, reads
from inbots.deliveries import service as deliveries
from inbots.errors import not_found
from inbots.models.deliveries import Delivery
from inbots.models.messages import APPROVED, Message


@dataclass(frozen=True)
class AttachmentContent:
    """One attachment: what a message lists of it, and its bytes."""

    meta: AttachmentRead
    data: bytes


@reads
def read_attachment(uow: UnitOfWork, caller: Caller, attachment_id: str) -> AttachmentContent:
    """One attachment's bytes, for its message's sender, a recipient of it (not while it is
    held or rejected: 404, as for the message; expired unacknowledged: 410) and the operator.
    Anyone else: 404. Only this attachment's bytes are read; nothing is stamped."""
    found = attachments.find(uow.session, caller.workspace_id, attachment_id)
    if found is None:
        raise not_found("attachment", attachment_id)
    if not caller.is_operator:
        message = uow.session.execute(
            select(Message.sender_id, Message.approval, Message.ttl_seconds).where(
                Message.id == found.message_id
            )
        ).one()
        if message.sender_id != caller.agent_id:
            expired = uow.session.execute(
                select(Delivery.expired_at).where(
                    Delivery.message_id == found.message_id,
                    Delivery.recipient_id == caller.agent_id,
                )
            ).first()
            # A held or rejected message's attachments are held with it: unknown to recipients.
            if expired is None or message.approval not in (None, APPROVED):
                raise not_found("attachment", attachment_id)
            if expired.expired_at is not None:
                raise deliveries.expired_error(
                    f"Attachment {attachment_id}", expired.expired_at, message.ttl_seconds
                )
    meta = AttachmentRead(
        id=found.id,
        name=found.name,
        content_type=found.content_type,
        bytes=found.bytes,
        sha256=found.sha256,
    )
    return AttachmentContent(meta, attachments.data_of(uow.session, found.id))
