"""One webhook attempt for one delivery, end to end. The Celery task ``delivery.notify`` and the
embedded dispatcher both call :func:`notify`; neither holds any logic of its own.

The attempt runs in three steps so no transaction is open during the HTTP call:

1. **claim** (short transaction): re-read the delivery and return early when the work is done or
   no longer wanted; otherwise mark it claimed for one attempt's worth of time, so a duplicate
   task cannot send alongside;
2. **send**: resolve and check the target again, sign afresh, POST with httpx (no redirects, no
   proxies, the configured timeout) to the very address that was checked;
3. **record** (short transaction): write the attempt row, release the claim, and stamp
   ``notified_at``, schedule a retry (``next_attempt_at``) or stamp ``failed_at``.

"Give up?" counts the attempt rows of the current publish, never a broker retry counter.
"""

from __future__ import annotations

import json
import logging
import random
import ssl
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.orm import aliased

from inbots import __version__
from inbots.agents.models import Agent
from inbots.config import Settings
from inbots.db.engine import Database
from inbots.db.uow import unit_of_work
from inbots.deliveries.limiter import Limiter, url_key
from inbots.deliveries.models import Delivery, DeliveryAttempt
from inbots.jobs import Job
from inbots.kit.clock import rfc3339, utcnow
from inbots.kit.ids import new_id
from inbots.kit.text import shown_summary
from inbots.messages.models import Message
from inbots.observability import metrics
from inbots.threads.models import CLOSED, Thread
from inbots.webhooks import signing, url_policy

log = logging.getLogger(__name__)

USER_AGENT = f"Inbots-Webhooks/{__version__}"
EXCERPT_BYTES = 1024
BUSY_RETRY_SECONDS = 0.5

TRIGGERS = ("publish", "retry", "renotify", "redeliver")


@dataclass(frozen=True)
class Result:
    """``outcome``: notified, retry, failed, skipped or busy. ``countdown``: run the job again
    after this many seconds (retry, or busy: another attempt or the URL's cap is in the way)."""

    outcome: str
    countdown: float | None = None
    reason: str | None = None


@dataclass
class Engine:
    """Everything an attempt needs besides the job."""

    db: Database
    settings: Settings
    client: httpx.Client
    limiter: Limiter
    resolver: url_policy.Resolver = url_policy.system_resolver


def make_client(settings: Settings) -> httpx.Client:
    """httpx as the spec wants it: no redirects, proxy variables ignored, one timeout."""
    return httpx.Client(
        timeout=httpx.Timeout(settings.webhook_timeout_seconds),
        follow_redirects=False,
        trust_env=False,
        headers={"User-Agent": USER_AGENT},
        limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
    )


@dataclass
class _Claim:
    url: str
    secrets: list[str]
    payload: bytes
    attempts_so_far: int  # of this publish
    number: int  # of this attempt, across all publishes
    accepted_at: datetime
    message_id: str
    thread_id: str


def attempts_allowed(settings: Settings) -> int:
    return 1 + len(settings.retry_schedule)


# The claim's two reads, built once: building an ORM statement (aliases above all) costs more
# CPU than running it, and every attempt runs both.
_recipient, _sender = aliased(Agent), aliased(Agent)
_CLAIM_READ = (
    select(Delivery, Thread.status, Thread.title, _recipient, Message, _sender.username)
    .join(Thread, Thread.id == Delivery.thread_id)
    .join(_recipient, _recipient.id == Delivery.recipient_id)
    .join(Message, Message.id == Delivery.message_id)
    .join(_sender, _sender.id == Message.sender_id)
    .where(Delivery.id == bindparam("delivery_id"))
    .with_for_update(of=Delivery)
)
_this_publish = DeliveryAttempt.publish == bindparam("publish")
_ATTEMPTS_SO_FAR = select(
    func.count(),
    func.count().filter(_this_publish),
    func.count().filter(_this_publish, DeliveryAttempt.reason == "ok"),
).where(DeliveryAttempt.delivery_id == bindparam("delivery_id"))


def _claim(engine: Engine, job: Job, now: datetime) -> _Claim | Result:
    s = engine.settings
    with unit_of_work(engine.db) as uow:
        session = uow.session
        row = session.execute(_CLAIM_READ, {"delivery_id": job.delivery_id}).first()
        if row is None:
            return Result("skipped", reason="no such delivery")
        delivery, thread_status, thread_title, recipient, message, sender = row
        if job.publish != delivery.publish_count:
            return Result("skipped", reason="superseded by a later publish")
        if thread_status == CLOSED:
            return Result("skipped", reason="thread closed")
        if job.trigger != "redeliver" and (
            delivery.notified_at or delivery.failed_at or delivery.acknowledged_at
        ):
            return Result("skipped", reason="already notified, failed or acknowledged")
        if not recipient.webhook_url or not recipient.webhook_secret:
            return Result("skipped", reason="recipient has no webhook")
        total, attempts_so_far, succeeded = session.execute(
            _ATTEMPTS_SO_FAR, {"delivery_id": delivery.id, "publish": job.publish}
        ).one()
        if succeeded or attempts_so_far >= attempts_allowed(s):
            return Result("skipped", reason="this publish is finished")
        if delivery.claimed_until is not None and delivery.claimed_until > now:
            return Result("busy", countdown=BUSY_RETRY_SECONDS, reason="another attempt is running")
        if delivery.next_attempt_at is not None and delivery.next_attempt_at > now + timedelta(
            seconds=0.05
        ):
            # A retry of this publish is scheduled later: this job is early (a duplicate).
            wait = (delivery.next_attempt_at - now).total_seconds()
            return Result("busy", countdown=wait, reason="retry scheduled later")
        delivery.claimed_until = now + timedelta(seconds=s.webhook_timeout_seconds + 30)
        delivery.next_attempt_at = None
        secrets = [recipient.webhook_secret]
        if (
            recipient.webhook_previous_secret
            and recipient.webhook_previous_secret_expires_at
            and recipient.webhook_previous_secret_expires_at > now
        ):
            secrets.append(recipient.webhook_previous_secret)
        payload = notification_body(
            delivery,
            message,
            thread_title=thread_title,
            sender=sender or "",
            recipient=recipient.username,
            shown=s.summary_shown,
        )
        return _Claim(
            recipient.webhook_url,
            secrets,
            payload,
            int(attempts_so_far),
            int(total) + 1,
            delivery.accepted_at,
            delivery.message_id,
            delivery.thread_id,
        )


def notification_body(
    delivery: Delivery,
    message: Message,
    *,
    thread_title: str,
    sender: str,
    recipient: str,
    shown: int,
) -> bytes:
    """The thin notification: identifiers and the cut summary, never the body."""
    body = {
        "type": "message.created",
        "delivery_id": delivery.id,
        "message_id": message.id,
        "thread_id": delivery.thread_id,
        "thread_title": thread_title,
        "sender": sender,
        "recipient": recipient,
        "kind": message.kind,
        "summary": shown_summary(message.summary, message.body, shown),
        "created_at": rfc3339(message.created_at),
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@dataclass
class _Sent:
    started_at: datetime
    duration_ms: int
    status_code: int | None
    reason: str
    excerpt: str | None


def _classify_error(exc: Exception) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLError | ssl.CertificateError):
            return "tls"
        text = str(cause).lower()
        if (
            "name or service not known" in text
            or "nodename nor servname" in text
            or ("temporary failure in name resolution" in text)
        ):
            return "dns"
        cause = cause.__cause__ or cause.__context__
    return "connect"


def _send(engine: Engine, claim: _Claim, delivery_id: str) -> _Sent:
    started = utcnow()
    clock = time.monotonic()

    def done(status: int | None, reason: str, excerpt: str | None = None) -> _Sent:
        elapsed = int((time.monotonic() - clock) * 1000)
        return _Sent(started, elapsed, status, reason, excerpt)

    try:
        target = url_policy.resolve(
            claim.url, engine.settings.webhook_allow_private, engine.resolver
        )
    except url_policy.RejectedURL as exc:
        return done(
            None, "dns" if exc.reason == "dns" else "blocked_target", str(exc)[:EXCERPT_BYTES]
        )
    headers = {
        "content-type": "application/json",
        **signing.headers_for(claim.secrets, delivery_id, claim.payload),
    }
    request_url, extensions = claim.url, {}
    if not engine.settings.webhook_allow_private:
        # Connect to the address that was checked, not to whatever DNS says a moment later;
        # the Host header and TLS name stay the URL's own.
        original = httpx.URL(claim.url)
        request_url = str(original.copy_with(host=target.address))
        headers["host"] = original.netloc.decode("ascii")
        extensions = {"sni_hostname": target.host}
    # httpx's timeout bounds each network step; the attempt as a whole gets the same budget,
    # so a receiver that trickles its answer cannot hold a worker past it.
    budget = engine.settings.webhook_timeout_seconds
    try:
        with engine.client.stream(
            "POST", request_url, content=claim.payload, headers=headers, extensions=extensions
        ) as response:
            excerpt = bytearray()
            for chunk in response.iter_bytes():
                excerpt.extend(chunk)
                if len(excerpt) >= EXCERPT_BYTES or time.monotonic() - clock > budget:
                    break
            text = bytes(excerpt[:EXCERPT_BYTES]).decode("utf-8", "replace")
            code = response.status_code
    except httpx.HTTPError as exc:
        return done(None, _classify_error(exc), f"{type(exc).__name__}: {exc}"[:EXCERPT_BYTES])
    if time.monotonic() - clock > budget:
        return done(code, "timeout", f"answered only after the {budget:g} s budget")
    if 200 <= code < 300:
        return done(code, "ok", text)
    if code == 410:
        return done(code, "gone", text)
    if 300 <= code < 400:
        return done(code, "redirect", text)
    return done(code, f"http_{code}", text)


def retry_delay(settings: Settings, attempts_made: int) -> float:
    """Seconds before the next attempt after ``attempts_made`` attempts, with jitter."""
    base = settings.retry_schedule[attempts_made - 1]
    spread = settings.retry_jitter
    return base * random.uniform(1 - spread, 1 + spread)


def _record(engine: Engine, job: Job, claim: _Claim, sent: _Sent) -> Result:
    from inbots.deliveries.service import stamp

    s = engine.settings
    made = claim.attempts_so_far + 1
    with unit_of_work(engine.db) as uow:
        session = uow.session
        session.execute(  # an INSERT of one row, without the unit of work's flush machinery
            insert(DeliveryAttempt),
            {
                "id": new_id("att"),
                "delivery_id": job.delivery_id,
                "number": claim.number,
                "publish": job.publish,
                "trigger": job.trigger if claim.attempts_so_far == 0 else "retry",
                "url": claim.url,
                "started_at": sent.started_at,
                "duration_ms": sent.duration_ms,
                "status_code": sent.status_code,
                "reason": sent.reason,
                "response_excerpt": sent.excerpt,
            },
        )
        release = update(Delivery).where(Delivery.id == job.delivery_id)
        if sent.reason == "ok":
            session.execute(release.values(claimed_until=None, next_attempt_at=None))
            stamp(uow, "notified_at", Delivery.id == job.delivery_id)
            return Result("notified")
        if sent.reason == "gone":
            session.execute(release.values(claimed_until=None, next_attempt_at=None))
            _fail(uow, job.delivery_id, "the webhook answered 410 Gone")
            return Result("failed", reason="gone")
        if made >= attempts_allowed(s):
            session.execute(release.values(claimed_until=None, next_attempt_at=None))
            _fail(uow, job.delivery_id, f"webhook attempts exhausted ({made}; last: {sent.reason})")
            return Result("failed", reason=sent.reason)
        delay = retry_delay(s, made)
        session.execute(
            release.values(claimed_until=None, next_attempt_at=utcnow() + timedelta(seconds=delay))
        )
        return Result("retry", countdown=delay, reason=sent.reason)


def _fail(uow: Any, delivery_id: str, reason: str) -> None:
    uow.session.execute(
        update(Delivery)
        .where(Delivery.id == delivery_id, Delivery.failed_at.is_(None))
        .values(failed_at=utcnow(), failure_reason=reason)
    )


def _unclaim(engine: Engine, delivery_id: str) -> None:
    with unit_of_work(engine.db) as uow:
        uow.session.execute(
            update(Delivery)
            .where(Delivery.id == delivery_id)
            # Turned away by the URL's cap, the job is alive and will come back: say so, or the
            # renotify sweep takes a long backlog for lost publishes.
            .values(claimed_until=None, last_published_at=utcnow())
        )


def notify(engine: Engine, job: Job) -> Result:
    """Make the next attempt of ``job`` if it is still wanted; say what should happen next."""
    claim = _claim(engine, job, utcnow())
    if isinstance(claim, Result):
        return claim
    key = url_key(claim.url)
    if not engine.limiter.acquire(key):
        _unclaim(engine, job.delivery_id)
        return Result("busy", countdown=BUSY_RETRY_SECONDS, reason="URL at its in-flight cap")
    try:
        sent = _send(engine, claim, job.delivery_id)
    finally:
        try:
            engine.limiter.release(key)
        except Exception as exc:  # the counter expires by itself; the attempt must be recorded
            log.warning("could not release the URL's slot: %s", type(exc).__name__)
    result = _record(engine, job, claim, sent)
    _observe(job, claim, sent, result)
    return result


def _observe(job: Job, claim: _Claim, sent: _Sent, result: Result) -> None:
    metrics.observe_attempt(sent.reason, sent.status_code, sent.duration_ms, result.outcome)
    if result.outcome == "notified":
        metrics.observe_notified(claim.accepted_at, utcnow())
    log.log(
        logging.INFO if result.outcome == "notified" else logging.WARNING,
        "webhook attempt %s: %s",
        claim.number,
        result.outcome,
        extra={
            "delivery_id": job.delivery_id,
            "message_id": claim.message_id,
            "thread_id": claim.thread_id,
            "reason": sent.reason,
            "status_code": sent.status_code,
            "duration_ms": sent.duration_ms,
            "trigger": job.trigger,
        },
    )
