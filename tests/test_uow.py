"""The unit of work's typed effects: jobs and wake-ups leave only after a commit.

A real database (both backends); the effects sink is a recorder, since what is checked is what
the unit of work hands over and when, not what a broker does with it."""

from __future__ import annotations

import importlib
from collections.abc import Collection, Sequence

import pytest
from sqlalchemy import text

from inbots.db.engine import Database
from inbots.db.uow import UnitOfWork, mode_of, mostly_reads, reads, run_unit, unit_of_work
from inbots.dispatch.jobs import Job


class Recorder:
    def __init__(self) -> None:
        self.published: list[Job] = []
        self.woken: list[str] = []

    def publish(self, jobs: Sequence[Job]) -> None:
        self.published.extend(jobs)

    def wake(self, agent_ids: Collection[str]) -> None:
        self.woken.extend(sorted(agent_ids))


JOB = Job("dlv_1", 1)


def test_effects_are_sent_after_the_commit(database: Database) -> None:
    sink = Recorder()
    with unit_of_work(database, sink) as uow:
        uow.enqueue(JOB)
        uow.wake(["ag_2", "ag_1", "ag_1"])
        uow.session.execute(text("SELECT 1"))
        assert sink.published == [] and sink.woken == []  # not before the commit
    assert sink.published == [JOB]
    assert sink.woken == ["ag_1", "ag_2"]  # once each


def test_a_rollback_drops_the_effects(database: Database) -> None:
    sink = Recorder()
    with pytest.raises(RuntimeError), unit_of_work(database, sink) as uow:
        uow.enqueue(JOB)
        uow.wake(["ag_1"])
        raise RuntimeError("the service failed")
    assert sink.published == [] and sink.woken == []


def test_a_read_only_unit_sends_nothing(database: Database) -> None:
    sink = Recorder()
    ran: list[str] = []
    with unit_of_work(database, sink, readonly=True) as uow:
        uow.enqueue(JOB)
        uow.after_commit(lambda: ran.append("after"))
    assert sink.published == [] and ran == []


def test_a_failing_effect_does_not_undo_the_answer(database: Database) -> None:
    class Broken(Recorder):
        def publish(self, jobs: Sequence[Job]) -> None:
            raise ConnectionError("broker down")

    sink = Broken()
    with unit_of_work(database, sink) as uow:
        uow.enqueue(JOB)
        uow.wake(["ag_1"])
    assert sink.woken == ["ag_1"]  # the wake-up still went, and no exception escaped


@reads
def _peek(uow: UnitOfWork, value: int) -> int:
    uow.enqueue(JOB)  # a reader asking for effects gets none: it is rolled back
    return value + 1


@mostly_reads
def _list(uow: UnitOfWork) -> str:
    uow.wake(["ag_9"])
    return "listed"


def _write(uow: UnitOfWork, *, n: int) -> int:
    uow.enqueue(*[Job(f"dlv_{i}", 1) for i in range(n)])
    return n


def test_run_unit_runs_each_function_in_the_mode_it_declares(database: Database) -> None:
    assert (mode_of(_peek), mode_of(_list), mode_of(_write)) == ("reads", "mostly_reads", "writes")
    sink = Recorder()
    assert run_unit(database, sink, _peek, 1) == 2
    assert sink.published == []
    assert run_unit(database, sink, _list) == "listed"
    assert sink.woken == ["ag_9"]
    assert run_unit(database, sink, _write, n=3) == 3
    assert [j.row_id for j in sink.published] == ["dlv_0", "dlv_1", "dlv_2"]


# The services the read routes and tools call, and the mode each declares. A decorator that
# slides onto a helper added above its function (as @reads once did, onto the directory's
# parameter parser) turns a read into a writer: on SQLite a BEGIN IMMEDIATE behind every send.
READ_SERVICES = {
    "inbots.agents.service": {
        "directory": "reads",
        "get_agent": "reads",
        "list_agents": "reads",
        "me": "reads",
        "read_brief": "reads",
    },
    "inbots.agents.keys": {"list_keys": "reads"},
    "inbots.agents.sessions": {"list_sessions": "reads"},
    "inbots.threads.service": {
        "get_thread": "reads",
        "list_threads": "reads",
        "thread_page": "reads",
    },
    "inbots.messages.reading": {
        "get_thread": "reads",
        "history": "mostly_reads",
        "outbox": "reads",
        "read_message": "mostly_reads",
    },
    "inbots.deliveries.service": {
        "has_unshown": "reads",
        "inbox": "mostly_reads",
        "mark_received": "mostly_reads",
        "waiting_count": "reads",
    },
    "inbots.deliveries.console": {"get_delivery": "reads", "list_deliveries": "reads"},
    "inbots.stats.service": {"get_stats": "reads"},
    "inbots.deliveries.events": {"get_event": "reads", "list_events": "reads"},
    "inbots.deliveries.receipts": {
        "has_unshown_receipts": "reads",
        "show_receipts": "mostly_reads",
    },
    "inbots.search.service": {"search": "reads"},
    "inbots.approvals.service": {
        "get_policy": "reads",
        "list_pending": "reads",
        "pending_count": "reads",
    },
    "inbots.alerts.service": {"get_alert_webhook": "reads"},
    "inbots.enrollments.service": {"list_enrollments": "reads"},
    "inbots.workspaces.service": {"list_operator_tokens": "reads"},
    "inbots.agents.webhook": {"get_webhook": "reads"},
}


@pytest.mark.parametrize("module", sorted(READ_SERVICES))
def test_the_read_services_declare_their_read_mode(module: str) -> None:
    loaded = importlib.import_module(module)
    modes = {name: mode_of(getattr(loaded, name)) for name in READ_SERVICES[module]}
    assert modes == READ_SERVICES[module]
