"""What the Celery tasks ``delivery.notify`` and ``delivery.notify_batch`` and the embedded
dispatcher call — :func:`notify` for one job, :func:`notify_all` for several published together —
and the batching around each job's attempt (:mod:`.attempt`: claim → send → record, the steps of
one row, whichever way it comes). None of them holds any logic of its own.

A batch keeps every row's own claim, attempt row, retry schedule and result; what it shares is
the round trips:

- **claims** (:func:`_claim_together`): one short transaction claims the batch's rows in row-id
  order, each by the per-row rules (:func:`~.attempt._claim_in`), its deliveries read and their
  attempts counted in one statement each (:func:`_read_deliveries`); the slots are taken last,
  for the whole batch in one round trip to the limiter. Rows another transaction holds
  (:func:`~.outbox.lock_free`) are left out and claimed alone once the others are done;
- **sends** (:func:`_send_and_record`): the POSTs are made in turn on the caller's thread and
  recorded together once all are answered; a POST still unanswered after a moment hands the
  rest to the engine's sender threads, which post them side by side (:mod:`.inline`);
- **records** (:func:`_record_all`): a handed-over batch's whenever a POST finishes, with every
  other that finished meanwhile — the plain successes in one transaction of a few statements
  (:func:`_notified`), a failure or a success ending a failure streak alone
  (:func:`~.attempt._settle`) — and each slot freed goes to the oldest delivery parked on its
  URL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import insert

from inbots.db.uow import unit_of_work
from inbots.deliveries import outbox
from inbots.deliveries.attempt import (
    ATTEMPTS,
    Claim,
    Engine,
    Parked,
    Ready,
    Sent,
    attempt_row,
    busy,
    claim_in,
    free_slots,
    observe,
    release_slot,
    send_and_release,
    settle,
    take,
    wake_if_free,
)
from inbots.deliveries.inline import Turn
from inbots.deliveries.parking import wake, with_lines
from inbots.dispatch.jobs import Job, Result
from inbots.kit.clock import utcnow
from inbots.observability import metrics


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
    with engine.turns.take() as turn:
        claimed = _claim_together(engine, [jobs[i] for i in order], utcnow())
        sending: list[tuple[int, Claim]] = []
        for k, claim in claimed.items():
            i = order[k]
            if isinstance(claim, Result):
                settled(i, claim)
            elif isinstance(claim, Parked):
                woken = wake_if_free(engine, claim.key)
                settled(i, Result("parked", reason="URL at its in-flight cap", wake=tuple(woken)))
            else:
                sending.append((i, claim))
        if sending:
            _send_and_record(engine, jobs, sending, settled, turn)
    # The rows another transaction held a moment ago: each alone, now that the others are
    # done (its claim may wait for its row; it holds nothing else meanwhile).
    for k in range(len(jobs)):
        if k not in claimed:
            i = order[k]

            def alone(_: int, result: Result, i: int = i) -> None:
                settled(i, result)

            _notify_all(engine, [jobs[i]], alone)


# How long a finished POST waits for the rest of its batch before it is recorded without them,
# once the batch is handed over: POSTs to healthy receivers finish within moments of each other,
# and one transaction for all of them costs a fraction of one each; a slow receiver holds up the
# others' records no longer.
TOGETHER_SECONDS = 0.1

_Sending = tuple[int, Claim]


def _send_and_record(
    engine: Engine,
    jobs: Sequence[Job],
    sending: Sequence[_Sending],
    settled: Callable[[int, Result], None],
    turn: Turn,
) -> None:
    """POST the claimed jobs in turn on this thread and record them together, unless one is
    slow: then the rest are posted side by side and each is recorded once it is done, and
    ``turn`` is left (:mod:`.inline`)."""

    def post(one: _Sending) -> Sent:
        i, claim = one
        return send_and_release(engine, claim, jobs[i].row_id)

    def take_over(done: list[tuple[_Sending, Sent]], rest: list[_Sending]) -> Future[None]:
        posts = {engine.senders.submit(post, one): one for one in rest}
        return engine.recorders.submit(_record_as_done, engine, jobs, done, posts, settled)

    outcome = engine.lookout.run(sending, post, take_over, turn)
    if outcome.done:
        _record_done(engine, jobs, outcome.done, settled)
    if outcome.late:  # the POST under way when the rest was handed over
        _record_done(engine, jobs, [outcome.late], settled)
    if outcome.handed is not None:
        outcome.handed.result()


def _record_done(
    engine: Engine,
    jobs: Sequence[Job],
    done: Sequence[tuple[_Sending, Sent]],
    settled: Callable[[int, Result], None],
) -> None:
    recorded = _record_all(engine, [(jobs[i], claim, sent) for (i, claim), sent in done])
    for ((i, claim), sent), result in zip(done, recorded, strict=True):
        observe(jobs[i], claim, sent, result)
        settled(i, result)


def _record_as_done(
    engine: Engine,
    jobs: Sequence[Job],
    done: Sequence[tuple[_Sending, Sent]],
    posts: dict[Future[Sent], _Sending],
    settled: Callable[[int, Result], None],
) -> None:
    """A handed-over batch: record the POSTs already answered, then each of the others once it
    is done, with the others that finished meanwhile or within :data:`TOGETHER_SECONDS`."""
    if done:
        _record_done(engine, jobs, done, settled)
    pending: set[Future[Sent]] = set(posts)
    while pending:
        finished, pending = wait(pending, return_when=FIRST_COMPLETED)
        if pending:  # the others are usually moments behind: one transaction records them all
            more, pending = wait(pending, timeout=TOGETHER_SECONDS)
            finished |= more
        _record_done(engine, jobs, [(posts[f], f.result()) for f in finished], settled)


def _claim_together(
    engine: Engine, jobs: Sequence[Job], now: datetime
) -> dict[int, Claim | Parked | Result]:
    """Claim jobs' rows in one short transaction, in the order given (row-id order), and say what
    each claim came to, by the job's index. Of several jobs, only the rows no other transaction
    holds are claimed (:func:`~.outbox.lock_free`; the others are left out of the answer, for
    the caller to claim alone); if the transaction fails, the slots taken are given back."""
    taken: list[Claim] = []
    claimed: dict[int, Claim | Parked | Result] = {}
    try:
        with unit_of_work(engine.db) as uow:
            free = None
            read: _Read = {}
            if len(jobs) > 1:
                read = _read_deliveries(uow.session, jobs)
                events = [job.row_id for job in jobs if job.kind != "delivery"]
                free = set(read) | (outbox.lock_free(uow.session, events) if events else set())
            ready: dict[int, Ready] = {}
            readied: set[str] = set()
            for i, job in enumerate(jobs):
                if free is not None and job.row_id not in free:
                    continue
                if job.row_id in readied:  # the same row twice: as a duplicate job would find it
                    claimed[i] = busy(engine.settings)
                    continue
                one = claim_in(uow, engine, job, now, read.get(job.row_id))
                if isinstance(one, Ready):
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
                claimed[i] = take(engine.settings, one, lease, now)
            _store_claims(
                uow,
                engine,
                [(jobs[i], one.row) for i, one in ready.items() if isinstance(claimed[i], Claim)],
                now,
            )
        return {i: claimed[i] for i in sorted(claimed)}  # in the order given
    except BaseException:
        for claim in taken:  # taken, but the claim did not commit
            release_slot(engine, claim.key, claim.lease)
        raise


def _store_claims(
    uow: Any, engine: Engine, taken: list[tuple[Job, outbox.Row]], now: datetime
) -> None:
    """The claims just taken, written in one UPDATE per kind and trigger rather than by the
    session's flush (a claimed row's columns are all set by :func:`~.attempt.take`, whatever
    its claim found): its row leaves the session."""
    if len(taken) < 2:
        return
    groups: dict[tuple[str, str], tuple[outbox.Kind, list[str]]] = {}
    for job, row in taken:
        kind = outbox.kind_of(job)
        groups.setdefault((kind.name, job.trigger), (kind, []))[1].append(job.row_id)
        uow.session.expunge(row)
    until = now + timedelta(seconds=engine.settings.claim_seconds)
    for (_, trigger), (kind, row_ids) in groups.items():
        kind.store_claims(uow, row_ids, until, trigger)


# Deliveries of a batch read before their claims: each loaded row and its attempts so far.
_Read = dict[str, tuple[outbox.Loaded, tuple[int, int, bool]]]


def _read_deliveries(session: Any, jobs: Sequence[Job]) -> _Read:
    """The batch's deliveries that no other transaction holds, loaded (locked) with their
    attempts counted, in one statement (events are locked first and read one by one, in their
    claims)."""
    mine = {job.row_id: job.trigger for job in jobs if job.kind == "delivery"}
    return outbox.lock_deliveries(session, mine) if mine else {}


def _record_all(engine: Engine, done: Sequence[tuple[Job, Claim, Sent]]) -> list[Result]:
    """Record finished attempts: those whose rows no other transaction holds together in one
    short transaction, each of the others in one of its own (:func:`~.outbox.lock_free`); and
    hand each slot they freed to the oldest delivery parked on its URL."""
    recorded = _record_together(engine, done)
    for i, one in enumerate(done):
        if i not in recorded:
            recorded[i] = _record_together(engine, [one])[0]
    return [recorded[i] for i in range(len(done))]


def _record_together(engine: Engine, done: Sequence[tuple[Job, Claim, Sent]]) -> dict[int, Result]:
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
            # Plain successes only, of rows no other transaction holds: two or three statements.
            results = _notified(uow, {i: done[i] for i in plain})
        else:
            results = {i: settle(uow, engine.settings, *done[i]) for i in mine}
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
                more = free_slots(engine, key) - freed
                if more > 0:
                    woken[key] += wake(uow.session, key, more, utcnow())
    # The operator's alerts each attempt raised, and the parked jobs its URL's slots woke (told
    # once, with the first attempt on that URL).
    return {
        i: replace(result, wake=(*result.wake, *woken.pop(done[i][1].key, ())))
        for i, result in results.items()
    }


def _notified(uow: Any, done: dict[int, tuple[Job, Claim, Sent]]) -> dict[int, Result]:
    """Plain successes (see :func:`_record_together`): what :func:`settle` does for each, for
    those whose rows no other transaction holds, all at once (the others are left out of the
    answer). Their rows are released and stamped notified in one UPDATE per kind, which skips
    the rows held elsewhere, and their attempts go in one INSERT; a plain success ends no
    failure streak, so the agents' rows are not touched."""
    by_kind: dict[str, tuple[outbox.Kind, list[str]]] = {}
    for job, _, _ in done.values():
        kind = outbox.kind_of(job)
        by_kind.setdefault(kind.name, (kind, []))[1].append(job.row_id)
    stamped: set[str] = set()
    for kind, row_ids in by_kind.values():
        stamped |= kind.release_notified_free(uow, row_ids)
    mine = {i: one for i, one in done.items() if one[0].row_id in stamped}
    if mine:
        uow.session.execute(insert(ATTEMPTS), [attempt_row(*one) for one in mine.values()])
    return dict.fromkeys(mine, Result("notified"))
