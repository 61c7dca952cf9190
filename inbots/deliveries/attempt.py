"""One webhook attempt for one outbox row — a delivery (``message.created``) or an event (every
other type; :mod:`.outbox`) — end to end, and the :class:`Engine` it runs on. Below, "delivery"
stands for either kind of row: the steps are the same, only the row's loading, payload and "still
wanted?" differ (``outbox.Kind``). :mod:`.notify` runs these steps for a job alone or for a batch
(claims taken together, POSTs side by side, records written together); the steps of each row are
the ones here, whatever the batch.

The attempt runs in three steps so no transaction is open during the HTTP call:

1. **claim** (short transaction; :func:`claim_in`, then :func:`take` once the URL's slot is
   known): re-read the delivery and return early when the work is done or no longer wanted;
   otherwise take a lease on one of the URL's in-flight slots and mark the delivery claimed for
   one attempt's worth of time, so a duplicate job cannot send alongside. When the URL has no
   free slot the delivery is **parked** instead (:mod:`.parking`) and the job ends: it is
   published again when a slot frees, not every so often to ask;
2. **send** (:func:`send_and_release`): resolve and check the target again, sign afresh, POST
   with httpx (no redirects, no proxies, the configured timeout) to the very address that was
   checked; then give the slot back;
3. **record** (short transaction; :func:`settle`): write the attempt row, release the claim,
   stamp ``notified_at``, schedule a retry (``next_attempt_at``, :func:`retry_delay`) or stamp
   ``failed_at`` (:func:`_fail`); :mod:`.notify` then wakes the oldest delivery parked on the URL
   for the slot just freed.

A claim that ran out without its attempt being recorded belongs to a worker that died mid-attempt:
whoever finds it next (a job for the delivery, the renotify sweep, a redeliver) logs that attempt
as ``worker_lost``, and it counts like any other. "Give up?" counts the attempt rows of the
current publish, never a broker retry counter.

The underscored names are the engine's own: :mod:`.notify` calls them, no other package does.
"""

from __future__ import annotations

import functools
import logging
import random
import ssl
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

import httpx
from sqlalchemy import Table, insert, update

from inbots import __version__
from inbots.alerts import service as alerts
from inbots.config import Settings
from inbots.db.engine import Database
from inbots.db.uow import unit_of_work
from inbots.deliveries import outbox
from inbots.deliveries.attempts import (
    WORKER_LOST,
    attempt_values,
    attempts_allowed,
    count_attempts,
    record_lost_attempt,
)
from inbots.deliveries.inline import Lookout, Turns
from inbots.deliveries.parking import park, unpark, wake
from inbots.dispatch.jobs import Job, Result
from inbots.dispatch.limiter import Limiter, url_key
from inbots.kit.clock import utcnow
from inbots.models.deliveries import Delivery, DeliveryAttempt
from inbots.models.events import Event
from inbots.observability import metrics
from inbots.webhooks import signing, subscriptions, url_policy

# The engine's log lines (each attempt's, and its slot's warnings) keep the name they have always
# had, whichever module of the engine writes them: log filters select on it.
log = logging.getLogger("inbots.deliveries.notify")

USER_AGENT = f"Inbots-Webhooks/{__version__}"
# The attempt log's table: an attempt is inserted without the ORM's bulk-insert machinery.
ATTEMPTS = cast(Table, DeliveryAttempt.__table__)
EXCERPT_BYTES = 1024


@dataclass
class Engine:
    """Everything an attempt needs besides the job. A batch's POSTs are made in turn on the
    caller's thread until one is slow (``lookout``, :mod:`.inline`); then the rest run side by
    side on ``senders`` and are recorded on ``recorders``."""

    db: Database
    settings: Settings
    client: httpx.BaseTransport
    limiter: Limiter
    resolver: url_policy.Resolver = url_policy.system_resolver
    senders: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(32, thread_name_prefix="inbots-post")
    )
    recorders: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(32, thread_name_prefix="inbots-record")
    )
    lookout: Lookout = field(default_factory=Lookout)
    turns: Turns = field(default_factory=Turns)

    def close(self) -> None:
        self.lookout.close()
        self.recorders.shutdown(wait=False, cancel_futures=True)
        self.senders.shutdown(wait=False, cancel_futures=True)
        self.client.close()


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context (certifi's roots) for every webhook client of this process: building
    one reads and parses the whole CA bundle, tens of milliseconds of CPU each time."""
    return httpx.create_ssl_context(trust_env=False)


def make_client(settings: Settings) -> httpx.HTTPTransport:
    """httpx as the spec wants it — no redirects, proxy variables ignored, one timeout (set on
    each request: :func:`_send`) — as its transport, the connection pool, without a Client
    around it: a Client's redirect, cookie, auth and hook handling are nothing a webhook uses,
    and cost a third of each POST's CPU."""
    return httpx.HTTPTransport(
        verify=_tls(),
        trust_env=False,
        limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
    )


# --- 1. claim: the row re-read and checked, then its URL's slot or its place in the line -------


@dataclass
class Claim:
    """A row claimed for one attempt: what the POST needs, and what recording it needs."""

    url: str
    secrets: list[str]
    payload: bytes
    attempts_so_far: int  # of this publish
    number: int  # of this attempt, across all publishes
    accepted_at: datetime
    message_id: str | None
    thread_id: str | None
    key: str  # the URL's, for the in-flight cap
    lease: str  # the slot this attempt holds
    recipient_id: str = ""
    failures_before: int = 0  # the recipient's webhook failures in a row, at the claim
    alert: bool = False  # an operator's alert (inbots.alerts)


@dataclass
class Parked:
    """A row parked on its URL's line (``key``): no slot was free."""

    key: str


@dataclass
class Ready:
    """A row that passed every check of its claim: what is left is one of its URL's slots
    (taken for all the batch's rows at once, :meth:`~inbots.dispatch.limiter.Limiter.
    acquire_all`), then the claim itself or the parking (:func:`take`)."""

    row: outbox.Row
    claim: Claim  # its lease still to come


def claim_in(
    uow: Any,
    engine: Engine,
    job: Job,
    now: datetime,
    read: tuple[outbox.Loaded, tuple[int, int, bool]] | None = None,
) -> Ready | Result:
    """Check one job's row for its claim: what the job comes to without sending, or the row
    ready for a slot. ``read``: the row loaded and its attempts counted already (a batch's
    delivery), else both are read here."""
    s = engine.settings
    session = uow.session
    kind = outbox.kind_of(job)
    loaded = read[0] if read else kind.load(session, job.row_id, job.trigger)
    if loaded is None:
        return Result("skipped", reason=f"no such {kind.name}")
    row, recipient = loaded.row, loaded.recipient
    lost = row.claimed_until is not None and row.claimed_until <= now
    if lost:
        record_lost_attempt(session, s, row, recipient.webhook_url or "")
        row.claimed_until = None
    if job.publish != row.publish_count:
        return Result("skipped", reason="superseded by a later publish")
    if loaded.skip:
        woken: list[Job] = []
        if row.parked_at is not None and row.parked_key is None and recipient.webhook_url:
            # Woken from its URL's line for a slot it will not use: the next in line gets it
            # (else a line of unwanted rows would move one slot per sweep).
            alert = isinstance(row, Event) and row.type in subscriptions.ALERT_TYPES
            woken = wake(session, url_key(recipient.webhook_url, alert), 1, now)
        unpark(row)
        if row.next_attempt_at is not None:  # the retry it stood for will never be made
            row.next_attempt_at = None
        return Result("skipped", reason=loaded.skip, wake=tuple(woken))
    if read and not lost:
        total, attempts_so_far, succeeded = read[1]
    else:  # (a lost attempt was just logged: count it too)
        total, attempts_so_far, succeeded = count_attempts(session, row.id, job.publish)
    if succeeded or attempts_so_far >= attempts_allowed(s):
        unpark(row)
        if lost and not succeeded:  # the lost attempt was this publish's last
            raised = _fail(
                uow,
                kind,
                row.id,
                f"webhook attempts exhausted ({attempts_so_far}; last: {WORKER_LOST})",
            )
            if kind is outbox.DELIVERY:
                metrics.DELIVERIES_FAILED.labels("attempts_exhausted").inc()
            return Result("failed", reason=WORKER_LOST, wake=tuple(raised))
        return Result("skipped", reason="this publish is finished")
    if row.claimed_until is not None and row.claimed_until > now:
        # A duplicate job: come back when that attempt must have ended (its slot's lease ran
        # out), and if it is still claimed then, when the claim runs out (by then the attempt is
        # recorded, or its worker died and this job makes the next one) — never every so often.
        ended = row.claimed_until - timedelta(seconds=s.claim_seconds - s.inflight_lease_seconds)
        wait = ((ended if ended > now else row.claimed_until) - now).total_seconds()
        return busy(s, wait)
    if row.next_attempt_at is not None and row.next_attempt_at > now + timedelta(seconds=0.05):
        # A retry of this publish is scheduled later: this job is early (a duplicate).
        wait = (row.next_attempt_at - now).total_seconds()
        return Result("busy", countdown=wait, reason="retry scheduled later")
    assert recipient.webhook_url and recipient.webhook_secret  # or loaded.skip says why not
    secrets = [recipient.webhook_secret]
    if (
        recipient.webhook_previous_secret
        and recipient.webhook_previous_secret_expires_at
        and recipient.webhook_previous_secret_expires_at > now
    ):
        secrets.append(recipient.webhook_previous_secret)
    payload = loaded.body(s.summary_shown)
    row.job_trigger = job.trigger
    alert = isinstance(row, Event) and row.type in subscriptions.ALERT_TYPES
    claim = Claim(
        recipient.webhook_url,
        secrets,
        payload,
        attempts_so_far,
        total + 1,
        _accepted_at(row),
        loaded.message_id,
        loaded.thread_id,
        url_key(recipient.webhook_url, alert),
        "",
        recipient.id,
        recipient.webhook_failures or 0,
        alert,
    )
    return Ready(row, claim)


def busy(s: Settings, wait: float | None = None) -> Result:
    """Another attempt holds the row: come back ``wait`` seconds from now (by default when an
    attempt claimed just now must have ended: its slot's lease)."""
    wait = s.inflight_lease_seconds if wait is None else wait
    return Result("busy", countdown=wait + 0.05, reason="another attempt is running")


def take(s: Settings, ready: Ready, lease: str | None, now: datetime) -> Claim | Parked:
    """A ready row with its slot (``lease``) is claimed for one attempt; without one (its URL at
    its cap) it is parked until a slot frees."""
    row, claim = ready.row, ready.claim
    if lease is None:
        park(row, claim.key, now)
        return Parked(claim.key)
    row.claimed_until = now + timedelta(seconds=s.claim_seconds)
    row.next_attempt_at = None
    unpark(row)
    claim.lease = lease
    return claim


def _accepted_at(row: outbox.Row) -> datetime:
    """When the row's notification became owed (the ``notified`` latency starts there)."""
    return row.accepted_at if isinstance(row, Delivery) else row.created_at


# --- 2. send: the POST, then the slot given back -----------------------------------------------


@dataclass
class Sent:
    """How one POST went: when, how long, the status (None without an HTTP answer), why."""

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


def _send(engine: Engine, claim: Claim, webhook_id: str) -> Sent:
    started = utcnow()
    clock = time.monotonic()

    def done(status: int | None, reason: str, excerpt: str | None = None) -> Sent:
        elapsed = int((time.monotonic() - clock) * 1000)
        return Sent(started, elapsed, status, reason, excerpt)

    try:
        target = url_policy.resolve(
            claim.url, engine.settings.webhook_allow_private, engine.resolver
        )
    except url_policy.RejectedURL as exc:
        return done(
            None, "dns" if exc.reason == "dns" else "blocked_target", str(exc)[:EXCERPT_BYTES]
        )
    headers = {
        "user-agent": USER_AGENT,
        "content-type": "application/json",
        **signing.headers_for(claim.secrets, webhook_id, claim.payload),
    }
    budget = engine.settings.webhook_timeout_seconds
    request_url = claim.url
    extensions: dict[str, Any] = {"timeout": httpx.Timeout(budget).as_dict()}
    if not engine.settings.webhook_allow_private:
        # Connect to the address that was checked, not to whatever DNS says a moment later;
        # the Host header and TLS name stay the URL's own.
        original = httpx.URL(claim.url)
        request_url = str(original.copy_with(host=target.address))
        headers["host"] = original.netloc.decode("ascii")
        extensions["sni_hostname"] = target.host
    # httpx's timeout bounds each network step; the attempt as a whole gets the same budget,
    # so a receiver that trickles its answer cannot hold a worker past it.
    request = httpx.Request(
        "POST", request_url, content=claim.payload, headers=headers, extensions=extensions
    )
    try:
        response = engine.client.handle_request(request)
        try:
            excerpt = bytearray()
            for chunk in response.iter_bytes():
                excerpt.extend(chunk)
                if len(excerpt) >= EXCERPT_BYTES or time.monotonic() - clock > budget:
                    break
            text = bytes(excerpt[:EXCERPT_BYTES]).decode("utf-8", "replace")
            code = response.status_code
        finally:
            response.close()
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


def send_and_release(engine: Engine, claim: Claim, webhook_id: str) -> Sent:
    """The POST of a claimed row (no transaction open), then its URL's slot given back."""
    try:
        return _send(engine, claim, webhook_id)
    finally:
        release_slot(engine, claim.key, claim.lease)


def release_slot(engine: Engine, key: str, lease: str) -> None:
    """Give the URL's slot back (a Redis failure only logs: the lease runs out by itself)."""
    try:
        engine.limiter.release(key, lease)
    except Exception as exc:  # the lease expires by itself; the attempt must still be recorded
        log.warning("could not release the URL's slot: %s", type(exc).__name__)


# --- 3. record: the attempt row, the release, the retry or the failure -------------------------


def retry_delay(settings: Settings, attempts_made: int) -> float:
    """Seconds before the next attempt after ``attempts_made`` attempts, with jitter."""
    base = settings.retry_schedule[attempts_made - 1]
    spread = settings.retry_jitter
    return base * random.uniform(1 - spread, 1 + spread)


def attempt_row(job: Job, claim: Claim, sent: Sent) -> dict[str, Any]:
    """The attempt row of one finished try."""
    return attempt_values(
        job.row_id,
        number=claim.number,
        publish=job.publish,
        trigger=job.trigger if claim.attempts_so_far == 0 else "retry",
        url=claim.url,
        started_at=sent.started_at,
        duration_ms=sent.duration_ms,
        status_code=sent.status_code,
        reason=sent.reason,
        response_excerpt=sent.excerpt,
    )


def settle(uow: Any, s: Settings, job: Job, claim: Claim, sent: Sent) -> Result:
    """Record one attempt alone, in ``uow``: its row, the claim released, and the retry, the
    failure or the stamp its answer calls for (with the recipient's failure streak)."""
    made = claim.attempts_so_far + 1
    session = uow.session
    kind = outbox.kind_of(job)
    # An INSERT of one row, without the unit of work's flush machinery.
    session.execute(insert(ATTEMPTS), attempt_row(job, claim, sent))
    raised: list[Job] = []  # the operator's alerts this attempt raises
    if not claim.alert:  # the alert webhook's own failures are no agent's failing streak
        raised = alerts.webhook_attempted(
            uow,
            claim.recipient_id,
            ok=sent.reason == "ok",
            failures_before=claim.failures_before,
            url=claim.url,
            reason=sent.reason,
            status_code=sent.status_code,
            now=utcnow(),
        )
    table = kind.model.__table__
    release = update(table).where(table.c.id == job.row_id)
    if sent.reason == "ok":
        kind.release_notified(uow, job.row_id)
        return Result("notified")
    if sent.reason == "gone":
        session.execute(release.values(claimed_until=None, next_attempt_at=None))
        raised += _fail(uow, kind, job.row_id, "the webhook answered 410 Gone")
        return Result("failed", reason="gone", wake=tuple(raised))
    if made >= attempts_allowed(s):
        session.execute(release.values(claimed_until=None, next_attempt_at=None))
        raised += _fail(
            uow, kind, job.row_id, f"webhook attempts exhausted ({made}; last: {sent.reason})"
        )
        return Result("failed", reason=sent.reason, wake=tuple(raised))
    delay = retry_delay(s, made)
    session.execute(
        release.values(claimed_until=None, next_attempt_at=utcnow() + timedelta(seconds=delay))
    )
    return Result("retry", countdown=delay, reason=sent.reason, wake=tuple(raised))


def _fail(uow: Any, kind: outbox.Kind, row_id: str, reason: str) -> list[Job]:
    """Stamp the row failed; for a delivery failed just now, the operator's ``delivery.failed``
    alert's jobs."""
    model = kind.model
    now = utcnow()
    done = uow.session.execute(
        update(model)
        .where(model.id == row_id, model.failed_at.is_(None))
        .values(failed_at=now, failure_reason=reason)
    )
    if kind is outbox.DELIVERY and done.rowcount:
        return alerts.deliveries_failed(uow, [row_id], now, reason)
    return []


# --- the URL's free slots; what each attempt tells the metrics and the log ---------------------


def free_slots(engine: Engine, key: str) -> int:
    """How many of the URL's slots are free now (0 when Redis cannot say)."""
    try:
        return engine.limiter.free(key)
    except Exception as exc:  # the sweep wakes what this could not
        log.warning("could not count the URL's free slots: %s", type(exc).__name__)
        return 0


def wake_if_free(engine: Engine, key: str) -> list[Job]:
    """Just parked: if a slot came free meanwhile, its release may have looked for a parked
    delivery before this one was in the line, so wake as many as there are free slots."""
    free = free_slots(engine, key)
    if free <= 0:
        return []
    with unit_of_work(engine.db) as uow:
        return wake(uow.session, key, free, utcnow())


def observe(job: Job, claim: Claim, sent: Sent, result: Result) -> None:
    """What one attempt tells the metrics and the log."""
    delivery = job.kind == "delivery"
    metrics.observe_attempt(
        sent.reason, sent.status_code, sent.duration_ms, result.outcome, delivery
    )
    if claim.alert:
        metrics.observe_alert_attempt(result.outcome)
    if result.outcome == "notified" and delivery:  # new mail's latency, not an event's
        metrics.observe_notified(claim.accepted_at, utcnow())
    log.log(
        logging.WARNING if result.outcome == "failed" else logging.INFO,  # the rest is routine
        "webhook attempt %s: %s",
        claim.number,
        result.outcome,
        extra={
            **job.log_ids,
            "message_id": claim.message_id,
            "thread_id": claim.thread_id,
            "reason": sent.reason,
            "status_code": sent.status_code,
            "duration_ms": sent.duration_ms,
            "trigger": job.trigger,
        },
    )
