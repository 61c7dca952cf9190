"""A message's attachments: the bytes stored with the message, in its transaction."""

from __future__ import annotations

from sqlalchemy import ForeignKey, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from inbots.models.base import Base


class Attachment(Base):
    """One file sent with a message (``att_…``). ``data`` is loaded only when asked for (a
    listing selects the other columns): the bytes of one attachment, never of a whole page."""

    __tablename__ = "attachments"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    # Deleted with its message (retention deletes them explicitly, first, as well).
    message_id: Mapped[str] = mapped_column(
        ForeignKey("messages.id", ondelete="CASCADE"), index=True
    )
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id"))
    position: Mapped[int] = mapped_column(Integer)  # its place in the send's list, from 0
    name: Mapped[str] = mapped_column(String(255))
    content_type: Mapped[str] = mapped_column(String(255))
    size: Mapped[int] = mapped_column("bytes", Integer)  # decoded (the API's ``bytes``)
    sha256: Mapped[str] = mapped_column(String(64))
    data: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)
