"""After a notify run, schedule what comes next — the same for a Celery task and the embedded
dispatcher, so both treat a retry, a busy delivery and a freed slot alike."""

from __future__ import annotations

from dataclasses import replace

from inbots.dispatch.jobs import Job, Publisher, Result


def follow_up(publisher: Publisher, job: Job, result: Result) -> None:
    """Publish the parked deliveries the run woke, and the job itself again when the result asks
    for it: on the retry lane once this publish has made an attempt (a retry) or was already
    there, so a dead receiver's retries never stand in front of new mail."""
    if result.wake:
        publisher.publish(result.wake)
    if result.countdown is not None:
        lane = replace(job, retry=job.retry or result.outcome == "retry")
        publisher.later(lane, result.countdown)
