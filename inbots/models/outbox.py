"""The outbox columns: a row the delivery engine owes a notification (a delivery, or an event;
:mod:`inbots.deliveries.outbox`) carries these, with the same meaning on both tables."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from inbots.models.base import UTCDateTime


class Outbox:
    """A declarative mixin of :class:`~inbots.models.deliveries.Delivery` and
    :class:`~inbots.models.events.Event`."""

    notified_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    failed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    failure_reason: Mapped[str | None] = mapped_column(String(200))
    # While a webhook attempt runs: no second attempt may start before this.
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The thread's close, copied here when it happens (threads.service.close_thread): the sweep's
    # partial indexes leave these rows out, so closed-thread history costs a sweep nothing.
    thread_closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # Waiting for an in-flight slot of its URL (the URL's cap was full when its job ran): the
    # URL's key and since when. While parked no job for it exists anywhere; whoever frees a slot
    # of that URL publishes the job again (parking.py), and the sweep's republish index leaves
    # the row out.
    parked_key: Mapped[str | None] = mapped_column(String(32))
    parked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The trigger of the job that last claimed or parked it (publish, renotify, redeliver): what
    # a woken job is rebuilt with, and what a lost attempt is logged with.
    job_trigger: Mapped[str | None] = mapped_column(String(16))
    publish_count: Mapped[int] = mapped_column(Integer, default=0)
    last_published_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
