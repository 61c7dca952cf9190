"""The derived delivery state: ``state_of`` (Python) and ``state_sql`` / ``state_filter`` (SQL)
against a hand-written reference of the spec's rule.

    acknowledged > working > fetched > delivered > failed > rejected > expired > held > stalled
    > notified > accepted

where ``stalled`` counts only while ``stalled_at`` is newer than every progress stamp, and
``failed`` only while ``failed_at`` is newer than ``notified_at`` (when there is one).
"""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from sqlalchemy import insert, select, text

from inbots.db.engine import Database
from inbots.db.uow import unit_of_work
from inbots.deliveries.state import STATES, state_of
from inbots.deliveries.state_sql import state_filter, state_sql
from inbots.kit.ids import new_id
from inbots.models.deliveries import WAITING, Delivery
from tests.helpers import Api

SPEC_ORDER = (
    "acknowledged",
    "working",
    "fetched",
    "delivered",
    "failed",
    "rejected",
    "expired",
    "held",
    "stalled",
    "notified",
    "accepted",
)

T0 = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)  # accepted_at, always
T1 = T0 + timedelta(seconds=1)
T1_PLUS = T1 + timedelta(microseconds=1)  # just after T1: ordering to the microsecond
T2 = T0 + timedelta(seconds=2)
T3 = T0 + timedelta(minutes=20)

STAMP_CHOICES = (None, T1, T2)
STALL_CHOICES = (None, T0, T1, T1_PLUS, T2, T3)  # equal to, older and newer than the others
EXPIRY_CHOICES = (None, T2)
# The approval gate: never held, held, held then approved, held then rejected.
GATE_CHOICES: tuple[dict[str, Any], ...] = (
    {"held_at": None, "approved_at": None, "rejected_at": None},
    {"held_at": T0, "approved_at": None, "rejected_at": None},
    {"held_at": T0, "approved_at": T1, "rejected_at": None},
    {"held_at": T0, "approved_at": None, "rejected_at": T1},
)
OPTIONAL = (
    "notified_at",
    "delivered_at",
    "fetched_at",
    "working_at",
    "acknowledged_at",
    "failed_at",
)


def reference_state(d: Any) -> str:
    """The spec, written out by hand."""
    if d.acknowledged_at is not None:
        return "acknowledged"
    if d.working_at is not None:
        return "working"
    if d.fetched_at is not None:
        return "fetched"
    if d.delivered_at is not None:
        return "delivered"
    if d.failed_at is not None and (d.notified_at is None or d.failed_at > d.notified_at):
        return "failed"  # until a later notification (a redelivery) got through
    if d.rejected_at is not None:
        return "rejected"
    if d.expired_at is not None:
        return "expired"
    if d.held_at is not None and d.approved_at is None:
        return "held"
    if d.stalled_at is not None:
        progress = [
            d.accepted_at,
            d.notified_at,
            d.delivered_at,
            d.fetched_at,
            d.working_at,
            d.acknowledged_at,
        ]
        if all(p is None or d.stalled_at > p for p in progress):
            return "stalled"
    if d.notified_at is not None:
        return "notified"
    return "accepted"


def combinations() -> list[dict[str, Any]]:
    combos = []
    for values in itertools.product(STAMP_CHOICES, repeat=len(OPTIONAL)):
        for stalled, expired, gate in itertools.product(
            STALL_CHOICES, EXPIRY_CHOICES, GATE_CHOICES
        ):
            stamps = dict(zip(OPTIONAL, values, strict=True))
            combos.append(
                {
                    "accepted_at": T0,
                    **stamps,
                    "stalled_at": stalled,
                    "expired_at": expired,
                    **gate,
                }
            )
    return combos


COMBOS = combinations()


def test_states_are_the_spec_states_in_spec_order() -> None:
    assert STATES == SPEC_ORDER


def test_the_combinations_reach_every_state() -> None:
    reached = Counter(reference_state(SimpleNamespace(**c)) for c in COMBOS)
    assert set(reached) == set(SPEC_ORDER)
    assert len(COMBOS) == 3**6 * 6 * 2 * 4


def test_state_of_matches_the_reference_for_every_combination_of_stamps() -> None:
    wrong = []
    for combo in COMBOS:
        row = SimpleNamespace(**combo)
        expected = reference_state(row)
        if state_of(row) != expected:
            wrong.append((combo, state_of(row), expected))
    assert wrong == []


def test_state_of_spot_checks() -> None:
    def state(**stamps: Any) -> str:
        base: dict[str, Any] = {
            name: None for name in (*OPTIONAL, "stalled_at", "expired_at", *GATE_CHOICES[0])
        }
        return state_of(SimpleNamespace(**{**base, "accepted_at": T0, **stamps}))

    assert state() == "accepted"
    assert state(notified_at=T1) == "notified"
    assert state(stalled_at=T3) == "stalled"
    assert state(notified_at=T1, stalled_at=T3) == "stalled"
    assert state(notified_at=T2, stalled_at=T1) == "notified"  # moved after the stall
    assert state(notified_at=T1, stalled_at=T1) == "notified"  # equal is not newer
    assert state(stalled_at=T0) == "accepted"
    assert state(stalled_at=T3, failed_at=T1) == "failed"
    assert state(stalled_at=T3, delivered_at=T1) == "delivered"
    assert state(failed_at=T1, fetched_at=T2) == "fetched"
    assert state(notified_at=T1, failed_at=T2) == "failed"  # a redelivery of it gave up
    assert state(failed_at=T1, notified_at=T2) == "notified"  # a redelivery got through
    assert state(failed_at=T1, notified_at=T2, stalled_at=T3) == "stalled"
    assert state(failed_at=T2, delivered_at=T1) == "delivered"
    assert state(acknowledged_at=T1, fetched_at=T2, stalled_at=T3) == "acknowledged"
    assert state(fetched_at=T1, working_at=T2) == "working"
    assert state(working_at=T1) == "working"  # working on it from the inbox summary alone
    assert state(working_at=T1, stalled_at=T3) == "working"  # a lapsed heartbeat: stamped only
    assert state(working_at=T2, acknowledged_at=T1) == "acknowledged"
    assert state(expired_at=T2, stalled_at=T3) == "expired"
    assert state(expired_at=T2, failed_at=T1) == "failed"
    assert state(expired_at=T2, delivered_at=T1) == "delivered"
    assert state(held_at=T0) == "held"
    assert state(held_at=T0, stalled_at=T3) == "held"  # the sweep never stamps it; if it did
    assert state(held_at=T0, approved_at=T1) == "accepted"
    assert state(held_at=T0, approved_at=T1, notified_at=T2) == "notified"
    assert state(held_at=T0, rejected_at=T1) == "rejected"
    assert state(held_at=T0, rejected_at=T1, expired_at=T2) == "rejected"
    assert state(held_at=T0, expired_at=T2) == "expired"


def _anchor(api: Api, database: Database, title: str) -> Any:
    """One real send's delivery (its workspace, message, thread and recipient), for rows of a
    test's own to hang from."""
    sender = api.agent("sender")
    api.agent("reader")
    thread = sender.open_thread(title, ["reader"])
    sent = sender.send(thread["id"], "anchor")
    with unit_of_work(database, readonly=True) as uow:
        return uow.session.execute(
            select(
                Delivery.workspace_id,
                Delivery.message_id,
                Delivery.thread_id,
                Delivery.recipient_id,
            ).where(Delivery.id == sent["deliveries"][0]["id"])
        ).one()


def _insert_combinations(api: Api, database: Database) -> dict[str, str]:
    """One real delivery row per combination; returns id -> reference state."""
    anchor = _anchor(api, database, "State table")
    expected: dict[str, str] = {}
    rows = []
    for combo in COMBOS:
        ident = new_id("dlv")
        rows.append(
            {
                "id": ident,
                "workspace_id": anchor.workspace_id,
                "message_id": anchor.message_id,
                "thread_id": anchor.thread_id,
                "recipient_id": anchor.recipient_id,
                "publish_count": 0,
                "moved_at": T0,
                **combo,
            }
        )
        expected[ident] = reference_state(SimpleNamespace(**combo))
    with unit_of_work(database) as uow:  # NULLs as NULL: a few statements, not one per row
        uow.session.execute(insert(Delivery).execution_options(render_nulls=True), rows)
    return expected


def anchor_message(database: Database, expected: dict[str, str]) -> str:
    with unit_of_work(database, readonly=True) as uow:
        return str(
            uow.session.scalar(
                select(Delivery.message_id).where(Delivery.id == next(iter(expected)))
            )
        )


def test_state_sql_and_state_filter_agree_with_state_of_on_real_rows(
    api: Api, database: Database
) -> None:
    expected = _insert_combinations(api, database)
    # The test's database holds the anchor's delivery and these rows (it is emptied per test):
    # the rows are the anchor's message's deliveries moved at T0. (Naming 35,000 ids in an IN
    # list, once per state, took most of the test's time.) Any other row found would fail the
    # comparisons below, as would a row missed.
    ours = (Delivery.message_id == anchor_message(database, expected)) & (Delivery.moved_at == T0)

    with unit_of_work(database, readonly=True) as uow:
        loaded = [
            (delivery.id, state_of(delivery), sql_state)
            for delivery, sql_state in uow.session.execute(
                select(Delivery, state_sql(Delivery)).where(ours)
            )
        ]
        filtered = {
            state: set(
                uow.session.scalars(select(Delivery.id).where(ours, state_filter(Delivery, state)))
            )
            for state in SPEC_ORDER
        }

    assert len(loaded) == len(expected)
    assert {ident for ident, _, _ in loaded} == set(expected)
    python_wrong = [(i, p, expected[i]) for i, p, _ in loaded if p != expected[i]]
    sql_wrong = [(i, s, expected[i]) for i, _, s in loaded if s != expected[i]]
    assert python_wrong == []
    assert sql_wrong == []
    for state in SPEC_ORDER:
        wanted = {ident for ident, s in expected.items() if s == state}
        assert wanted, state
        assert filtered[state] == wanted, state
    assert sum(len(ids) for ids in filtered.values()) == len(expected)


def test_state_filter_of_an_unknown_state_matches_nothing(api: Api, database: Database) -> None:
    sender = api.agent("sender")
    api.agent("reader")
    thread = sender.open_thread("Unknown state", ["reader"])
    sender.send(thread["id"], "one row")

    with unit_of_work(database, readonly=True) as uow:
        everything = uow.session.scalars(select(Delivery.id)).all()
        matched = uow.session.scalars(
            select(Delivery.id).where(state_filter(Delivery, "bogus"))
        ).all()

    assert len(everything) == 1
    assert matched == []


def test_the_inbox_index_predicate_and_the_waiting_expressions_pick_the_same_rows(
    api: Api, database: Database
) -> None:
    """The waiting predicate is written twice: as SQL text, ``WAITING`` (the predicate of
    ``ix_deliveries_inbox``, which the migration creates), and as the expressions the inbox's
    queries use, ``Delivery.waiting()``. Over every combination of the stamps they read they
    pick the same rows; and on PostgreSQL, whose planner uses a partial index only for a query
    that implies its predicate, the waiting count of a recipient reads that index."""
    base = {
        **_anchor(api, database, "Waiting")._asdict(),
        "publish_count": 0,
        "accepted_at": T0,
        "moved_at": T0,
    }
    stamps = ("acknowledged_at", "expired_at", "thread_closed_at", "held_at", "approved_at")
    rows = [
        {**base, "id": new_id("dlv"), **dict(zip(stamps, values, strict=True))}
        for values in itertools.product((None, T1), repeat=len(stamps))
    ]
    with unit_of_work(database) as uow:
        uow.session.execute(insert(Delivery).execution_options(render_nulls=True), rows)

    ours = Delivery.moved_at == T0
    with unit_of_work(database, readonly=True) as uow:
        by_text = set(uow.session.scalars(select(Delivery.id).where(ours, text(WAITING))))
        by_expressions = set(
            uow.session.scalars(select(Delivery.id).where(ours, *Delivery.waiting()))
        )
    # Not acknowledged, expired or closed, and released: never held (approved or not, which
    # the gate never writes), or held and approved.
    assert len(by_text) == 3
    assert by_expressions == by_text

    if database.engine.dialect.name != "postgresql":
        return
    # The inbox's first page: with sequential scans, bitmap scans and sorts priced out, only an
    # index that holds these rows in this order will do, and of those only ix_deliveries_inbox
    # can serve it, if the expressions imply its predicate (the tiny table gives the planner no
    # other reason to choose).
    page = (
        select(Delivery.id)
        .where(Delivery.recipient_id == base["recipient_id"], *Delivery.waiting())
        .order_by(Delivery.priority_rank, Delivery.id)
        .limit(1)
    )
    compiled = page.compile(database.engine, compile_kwargs={"literal_binds": True})
    with database.engine.begin() as conn:
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            conn.execute(text(f"SET LOCAL {setting} = off"))
        plan = "\n".join(conn.execute(text(f"EXPLAIN {compiled}")).scalars())
    assert "ix_deliveries_inbox" in plan, plan
