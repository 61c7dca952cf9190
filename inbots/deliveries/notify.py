"""One webhook attempt for one outbox row — a delivery (``message.created``) or an event (every
other type; :mod:`.outbox`) — end to end. The Celery task ``delivery.notify`` and the embedded
dispatcher both call :func:`notify`; neither holds any logic of its own. Below, "delivery" stands
for either kind of row: the steps are the same, only the row's loading, payload and "still
wanted?" differ (``outbox.Kind``).

The attempt runs in three steps so no transaction is open during the HTTP call:

1. **claim** (short transaction): re-read the delivery and return early when the work is done or
   no longer wanted; otherwise take a lease on one of the URL's in-flight slots and mark the
   delivery claimed for one attempt's worth of time, so a duplicate job cannot send alongside.
   When the URL has no free slot the delivery is **parked** instead (:mod:`.parking`) and the job
   ends: it is published again when a slot frees, not every so often to ask;
2. **send**: resolve and check the target again, sign afresh, POST with httpx (no redirects, no
   proxies, the configured timeout) to the very address that was checked; then give the slot
   back;
3. **record** (short transaction): write the attempt row, release the claim, stamp
   ``notified_at``, schedule a retry (``next_attempt_at``) or stamp ``failed_at``, and wake the
   oldest delivery parked on the URL for the slot just freed.

A claim that ran out without its attempt being recorded belongs to a worker that died mid-attempt:
whoever finds it next (a job for the delivery, the renotify sweep, a redeliver) logs that attempt
as ``worker_lost``, and it counts like any other. "Give up?" counts the attempt rows of the
current publish, never a broker retry counter.
"""

from __future__ import annotations

import functools
import logging
import random
import ssl
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
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
    count_delivery_attempts,
    record_lost_attempt,
)
from inbots.deliveries.parking import park, unpark, wake, with_lines
from inbots.dispatch.jobs import Job, Result
from inbots.dispatch.limiter import Limiter, url_key
from inbots.kit.clock import utcnow
from inbots.models.deliveries import Delivery, DeliveryAttempt
from inbots.models.events import Event
from inbots.observability import metrics
from inbots.webhooks import signing, subscriptions, url_policy

log = logging.getLogger(__name__)

USER_AGENT = f"Inbots-Webhooks/{__version__}"
# The attempt log's table: an attempt is inserted without the ORM's bulk-insert machinery.
ATTEMPTS = cast(Table, DeliveryAttempt.__table__)
EXCERPT_BYTES = 1024


@dataclass
class Engine:
    """Everything an attempt needs besides the job. ``senders``: the threads a batch's POSTs run
    on side by side (a batch of one sends on the caller's thread)."""

    db: Database
    settings: Settings
    client: httpx.Client
    limiter: Limiter
    resolver: url_policy.Resolver = url_policy.system_resolver
    senders: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(32, thread_name_prefix="inbots-post")
    )

    def close(self) -> None:
        self.senders.shutdown(wait=False, cancel_futures=True)
        self.client.close()


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context (certifi's roots) for every webhook client of this process: building
    one reads and parses the whole CA bundle, tens of milliseconds of CPU each time."""
    return httpx.create_ssl_context(trust_env=False)


def make_client(settings: Settings) -> httpx.Client:
    """httpx as the spec wants it: no redirects, proxy variables ignored, one timeout."""
    return httpx.Client(
        verify=_tls(),
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
    message_id: str | None
    thread_id: str | None
    key: str  # the URL's, for the in-flight cap
    lease: str  # the slot this attempt holds
    recipient_id: str = ""
    failures_before: int = 0  # the recipient's webhook failures in a row, at the claim
    alert: bool = False  # an operator's alert (inbots.alerts)


@dataclass
class _Parked:
    key: str


@dataclass
class _Ready:
    """A row that passed every check of its claim: what is left is one of its URL's slots
    (taken for all the batch's rows at once, :meth:`~inbots.dispatch.limiter.Limiter.
    acquire_all`), then the claim itself or the parking (:func:`_take`)."""

    row: outbox.Row
    claim: _Claim  # its lease still to come


def _claim_together(
    engine: Engine, jobs: Sequence[Job], now: datetime
) -> dict[int, _Claim | _Parked | Result]:
    """Claim jobs' rows in one short transaction, in the order given (row-id order), and say what
    each claim came to, by the job's index. Of several jobs, only the rows no other transaction
    holds are claimed (:func:`~.outbox.lock_free`; the others are left out of the answer, for
    the caller to claim alone); if the transaction fails, the slots taken are given back."""
    taken: list[_Claim] = []
    claimed: dict[int, _Claim | _Parked | Result] = {}
    try:
        with unit_of_work(engine.db) as uow:
            free = None
            read: _Read = {}
            if len(jobs) > 1:
                free = outbox.lock_free(uow.session, [job.row_id for job in jobs])
                read = _read_deliveries(uow.session, [job for job in jobs if job.row_id in free])
            ready: dict[int, _Ready] = {}
            readied: set[str] = set()
            for i, job in enumerate(jobs):
                if free is not None and job.row_id not in free:
                    continue
                if job.row_id in readied:  # the same row twice: as a duplicate job would find it
                    claimed[i] = _busy(engine.settings)
                    continue
                one = _claim_in(uow, engine, job, now, read.get(job.row_id))
                if isinstance(one, _Ready):
                    ready[i] = one
                    readied.add(job.row_id)
                else:
                    claimed[i] = one
            # The slots, in one round trip for the whole batch: the last step that can fail
            # before the commit. Each lease is in ``taken`` before anything else can fail.
            leases = engine.limiter.acquire_all([r.claim.key for r in ready.values()])
            for one, lease in zip(ready.values(), leases, strict=True):
                if lease is not None:
                    one.claim.lease = lease
                    taken.append(one.claim)
            for (i, one), lease in zip(ready.items(), leases, strict=True):
                claimed[i] = _take(engine.settings, one, lease, now)
        return {i: claimed[i] for i in sorted(claimed)}  # in the order given
    except BaseException:
        for claim in taken:  # taken, but the claim did not commit
            _release(engine, claim.key, claim.lease)
        raise


# Deliveries of a batch read before their claims: each loaded row and its attempts so far.
_Read = dict[str, tuple[outbox.Loaded, tuple[int, int, bool]]]


def _read_deliveries(session: Any, jobs: Sequence[Job]) -> _Read:
    """The batch's deliveries loaded (locked) and their attempts counted, one statement each
    for all of them (events are read one by one, in their claims)."""
    mine = {job.row_id: job for job in jobs if job.kind == "delivery"}
    if len(mine) < 2:
        return {}
    loaded = outbox.load_deliveries(session, {r: job.trigger for r, job in mine.items()})
    counted = count_delivery_attempts(session, {r: job.publish for r, job in mine.items()})
    return {r: (one, counted[r]) for r, one in loaded.items()}


def _claim_in(
    uow: Any,
    engine: Engine,
    job: Job,
    now: datetime,
    read: tuple[outbox.Loaded, tuple[int, int, bool]] | None = None,
) -> _Ready | Result:
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
        return _busy(s, wait)
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
    claim = _Claim(
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
    return _Ready(row, claim)


def _busy(s: Settings, wait: float | None = None) -> Result:
    """Another attempt holds the row: come back ``wait`` seconds from now (by default when an
    attempt claimed just now must have ended: its slot's lease)."""
    wait = s.inflight_lease_seconds if wait is None else wait
    return Result("busy", countdown=wait + 0.05, reason="another attempt is running")


def _take(s: Settings, ready: _Ready, lease: str | None, now: datetime) -> _Claim | _Parked:
    """A ready row with its slot (``lease``) is claimed for one attempt; without one (its URL at
    its cap) it is parked until a slot frees."""
    row, claim = ready.row, ready.claim
    if lease is None:
        park(row, claim.key, now)
        return _Parked(claim.key)
    row.claimed_until = now + timedelta(seconds=s.claim_seconds)
    row.next_attempt_at = None
    unpark(row)
    claim.lease = lease
    return claim


def _accepted_at(row: outbox.Row) -> datetime:
    """When the row's notification became owed (the ``notified`` latency starts there)."""
    return row.accepted_at if isinstance(row, Delivery) else row.created_at


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


def _send(engine: Engine, claim: _Claim, webhook_id: str) -> _Sent:
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
        **signing.headers_for(claim.secrets, webhook_id, claim.payload),
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


def _record_all(engine: Engine, done: Sequence[tuple[Job, _Claim, _Sent]]) -> list[Result]:
    """Record finished attempts: those whose rows no other transaction holds together in one
    short transaction, each of the others in one of its own (:func:`~.outbox.lock_free`); and
    hand each slot they freed to the oldest delivery parked on its URL."""
    recorded = _record_together(engine, done)
    for i, one in enumerate(done):
        if i not in recorded:
            recorded[i] = _record_together(engine, [one])[0]
    return [recorded[i] for i in range(len(done))]


def _record_together(
    engine: Engine, done: Sequence[tuple[Job, _Claim, _Sent]]
) -> dict[int, Result]:
    """Record attempts in one transaction and say what each came to, by index; of several, only
    the plain successes whose rows no other transaction holds (the others are left out of the
    answer)."""
    with unit_of_work(engine.db) as uow:
        mine = list(range(len(done)))
        if len(done) > 1:
            # Together: successes that end no failure streak, so the transaction locks outbox
            # rows only. A failure (a streak counted on the agent's row, maybe an alert, a
            # failed stamp) is recorded alone, as it always was.
            plain = [
                i
                for i in mine
                if done[i][2].reason == "ok"
                and not (done[i][1].failures_before and not done[i][1].alert)
            ]
            free = outbox.lock_free(uow.session, [done[i][0].row_id for i in plain])
            mine = [i for i in plain if done[i][0].row_id in free]
        if len(done) > 1:  # plain successes only: recorded in two or three statements
            results = _notified(uow, {i: done[i] for i in mine})
        else:
            results = {i: _settle(uow, engine.settings, *done[i]) for i in mine}
        # The slots these attempts held are free: hand them to the oldest deliveries parked on
        # their URLs, and, when there were some, any other free slot too (leases of a dead
        # worker expire with nobody releasing them).
        woken: dict[str, list[Job]] = {}
        freed_by_key = Counter(done[i][1].key for i in results)
        waiting = with_lines(uow.session, list(freed_by_key))
        for key, freed in freed_by_key.items():
            if key not in waiting:
                continue
            woken[key] = wake(uow.session, key, freed, utcnow())
            if woken[key]:
                more = _free(engine, key) - freed
                if more > 0:
                    woken[key] += wake(uow.session, key, more, utcnow())
    # The operator's alerts each attempt raised, and the parked jobs its URL's slots woke (told
    # once, with the first attempt on that URL).
    return {
        i: replace(result, wake=(*result.wake, *woken.pop(done[i][1].key, ())))
        for i, result in results.items()
    }


def _attempt(job: Job, claim: _Claim, sent: _Sent) -> dict[str, Any]:
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


def _notified(uow: Any, done: dict[int, tuple[Job, _Claim, _Sent]]) -> dict[int, Result]:
    """Plain successes (see :func:`_record_together`): what :func:`_settle` does for each, for
    all at once. Their attempts go in one INSERT, and their rows are released and stamped
    notified in one UPDATE per kind; a plain success ends no failure streak, so the agents' rows
    are not touched."""
    if not done:
        return {}
    uow.session.execute(insert(ATTEMPTS), [_attempt(*one) for one in done.values()])
    by_kind: dict[str, tuple[outbox.Kind, list[str]]] = {}
    for job, _, _ in done.values():
        kind = outbox.kind_of(job)
        by_kind.setdefault(kind.name, (kind, []))[1].append(job.row_id)
    for kind, row_ids in by_kind.values():
        kind.release_notified(uow, *row_ids)
    return dict.fromkeys(done, Result("notified"))


def _settle(uow: Any, s: Settings, job: Job, claim: _Claim, sent: _Sent) -> Result:
    made = claim.attempts_so_far + 1
    session = uow.session
    kind = outbox.kind_of(job)
    # An INSERT of one row, without the unit of work's flush machinery.
    session.execute(insert(ATTEMPTS), _attempt(job, claim, sent))
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


def _release(engine: Engine, key: str, lease: str) -> None:
    try:
        engine.limiter.release(key, lease)
    except Exception as exc:  # the lease expires by itself; the attempt must still be recorded
        log.warning("could not release the URL's slot: %s", type(exc).__name__)


def _free(engine: Engine, key: str) -> int:
    try:
        return engine.limiter.free(key)
    except Exception as exc:  # the sweep wakes what this could not
        log.warning("could not count the URL's free slots: %s", type(exc).__name__)
        return 0


def _wake_if_free(engine: Engine, key: str) -> list[Job]:
    """Just parked: if a slot came free meanwhile, its release may have looked for a parked
    delivery before this one was in the line, so wake as many as there are free slots."""
    free = _free(engine, key)
    if free <= 0:
        return []
    with unit_of_work(engine.db) as uow:
        return wake(uow.session, key, free, utcnow())


def notify(engine: Engine, job: Job) -> Result:
    """Make the next attempt of ``job`` if it is still wanted, or park it until its URL has a free
    slot; say what should happen next (``Result``)."""
    return notify_all(engine, [job])[0]


def notify_all(
    engine: Engine, jobs: Sequence[Job], then: Callable[[Job, Result], None] | None = None
) -> list[Result]:
    """:func:`notify` for several jobs at once (one Celery task's batch): one transaction claims
    them all; their POSTs run side by side; each finished attempt is recorded at once, together
    with the others that finished meanwhile, so a slow receiver holds up neither the others'
    records nor what comes next for them: ``then(job, result)`` runs for each job as soon as its
    result is known (the caller's follow-up: a retry's countdown starts then). Each job keeps its
    own claim, attempt row, retry schedule and result."""
    results: dict[int, Result] = {}

    def settled(i: int, result: Result) -> None:
        results[i] = result
        metrics.observe_job(result.outcome)
        if then is not None:
            then(jobs[i], result)

    try:
        _notify_all(engine, jobs, settled)
    except Exception:
        for _ in range(len(jobs) - len(results)):
            metrics.observe_job("error")
        raise
    return [results[i] for i in range(len(jobs))]


def _notify_all(
    engine: Engine, jobs: Sequence[Job], settled: Callable[[int, Result], None]
) -> None:
    order = sorted(range(len(jobs)), key=lambda i: jobs[i].row_id)
    claimed = _claim_together(engine, [jobs[i] for i in order], utcnow())
    sending: list[tuple[int, _Claim]] = []
    for k, claim in claimed.items():
        i = order[k]
        if isinstance(claim, Result):
            settled(i, claim)
        elif isinstance(claim, _Parked):
            woken = _wake_if_free(engine, claim.key)
            settled(i, Result("parked", reason="URL at its in-flight cap", wake=tuple(woken)))
        else:
            sending.append((i, claim))
    if len(sending) == 1:  # no thread hop for a batch of one
        i, claim = sending[0]
        sent = _send_and_release(engine, claim, jobs[i].row_id)
        result = _record_all(engine, [(jobs[i], claim, sent)])[0]
        _observe(jobs[i], claim, sent, result)
        settled(i, result)
    elif sending:
        _send_and_record(engine, jobs, sending, settled)
    # The rows another transaction held a moment ago: each alone, now that the others are
    # done (its claim may wait for its row; it holds nothing else meanwhile).
    for k in range(len(jobs)):
        if k not in claimed:
            i = order[k]

            def alone(_: int, result: Result, i: int = i) -> None:
                settled(i, result)

            _notify_all(engine, [jobs[i]], alone)


def _send_and_record(
    engine: Engine,
    jobs: Sequence[Job],
    sending: Sequence[tuple[int, _Claim]],
    settled: Callable[[int, Result], None],
) -> None:
    """POST the claimed jobs side by side; record each as soon as it is done, with the others
    that finished meanwhile."""
    posts = {
        engine.senders.submit(_send_and_release, engine, claim, jobs[i].row_id): (i, claim)
        for i, claim in sending
    }
    pending: set[Future[_Sent]] = set(posts)
    while pending:
        finished, pending = wait(pending, return_when=FIRST_COMPLETED)
        done = [(posts[f], f.result()) for f in finished]
        recorded = _record_all(engine, [(jobs[i], claim, sent) for (i, claim), sent in done])
        for ((i, claim), sent), result in zip(done, recorded, strict=True):
            _observe(jobs[i], claim, sent, result)
            settled(i, result)


def _send_and_release(engine: Engine, claim: _Claim, webhook_id: str) -> _Sent:
    try:
        return _send(engine, claim, webhook_id)
    finally:
        _release(engine, claim.key, claim.lease)


def _observe(job: Job, claim: _Claim, sent: _Sent, result: Result) -> None:
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
