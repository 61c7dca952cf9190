"""What a send may carry, checked once its request model has the types right: the content
within the settings' lengths, the priority, the TTL, a reply's ``acknowledge`` and the
idempotency key. Each refusal names its field (422)."""

from __future__ import annotations

from inbots.caller import Caller
from inbots.db.uow import UnitOfWork
from inbots.deliveries.schemas import OUTCOMES
from inbots.errors import Invalid, SummaryRequired
from inbots.messages.schemas import idempotency_key
from inbots.models.messages import DEFAULT_KIND, KINDS, NORMAL, PRIORITIES


def idempotency_key_of(key: str | None, uow: UnitOfWork) -> str | None:
    return idempotency_key(key, uow.settings.idempotency_key_max)


def content(
    uow: UnitOfWork, caller: Caller, body: str, summary: str | None, kind: str | None
) -> tuple[str, str | None, str]:
    """A message's content as stored (a blank summary is none; no kind is ``update``), within
    the settings' lengths; a long body needs a summary (the operator's does not)."""
    s = uow.settings
    if not body.strip():
        raise Invalid("body must be a non-empty string.", field="body")
    if len(body) > s.message_body_max:
        raise Invalid(
            f"body is {len(body)} characters; the limit is {s.message_body_max}. Point at a file "
            "or URL instead of pasting it.",
            field="body",
        )
    if summary is not None:
        summary = summary.strip() or None
    if summary is not None:
        if "\n" in summary or "\r" in summary:
            raise Invalid("summary must be one line.", field="summary")
        if len(summary) > s.summary_max:
            raise Invalid(f"summary must be at most {s.summary_max} characters.", field="summary")
    if summary is None and not caller.is_operator and len(body) > s.summary_required_over:
        raise SummaryRequired(
            f"This body is {len(body)} characters: add a summary (one line, up to "
            f"{s.summary_max} characters, saying what you are asking for) to any body over "
            f"{s.summary_required_over}.",
            field="summary",
        )
    if kind is None:
        kind = DEFAULT_KIND
    if kind not in KINDS:
        raise Invalid(f"kind must be one of {', '.join(KINDS)}.", field="kind")
    return body, summary, kind


def priority(priority: str | None) -> str:
    if priority is None:
        return NORMAL
    if priority not in PRIORITIES:
        raise Invalid(
            "priority must be normal (the default) or urgent (listed first in every inbox).",
            field="priority",
        )
    return priority


def acknowledge(acknowledge: str | None, reply_to: str | None) -> str | None:
    """A reply's ``acknowledge`` (done or declined): it acknowledges the caller's copy of the
    message it answers, so it needs ``reply_to``."""
    if acknowledge is None:
        return None
    if acknowledge not in OUTCOMES:
        raise Invalid("acknowledge must be done or declined.", field="acknowledge")
    if reply_to is None:
        raise Invalid(
            "acknowledge goes with reply_to: it acknowledges your copy of the message you "
            "answer, in a reply posted to that message's thread. Give reply_to, or leave "
            "acknowledge out.",
            field="acknowledge",
        )
    return acknowledge


def ttl(uow: UnitOfWork, ttl: int | None) -> int | None:
    s = uow.settings
    if ttl is None:
        return None
    if not s.ttl_min_seconds <= ttl <= s.ttl_max_seconds:
        raise Invalid(
            f"ttl_seconds must be from {s.ttl_min_seconds} to {s.ttl_max_seconds} seconds "
            f"(got {ttl}); leave it out for mail that never expires.",
            field="ttl_seconds",
        )
    return ttl
