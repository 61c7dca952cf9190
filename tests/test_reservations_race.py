"""Reservations are race-free across web processes: many agents reserving overlapping paths at
once through ``inbots web --workers 2`` on PostgreSQL — exactly one wins each round, the others
are told who holds it (the per-workspace advisory lock around check-then-insert)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from inbots.config import Settings
from inbots.db.engine import Database
from inbots.db.uow import unit_of_work
from inbots.models.reservations import Reservation
from tests.conftest import new_workspace
from tests.test_caps import _register, race, two_web_processes

pytestmark = pytest.mark.xdist_group("web_processes")


@pytest.mark.parametrize("backend", ["postgres"])
def test_concurrent_overlapping_reservations_across_two_web_processes_one_wins(
    settings: Settings, database: Database, tmp_path: Path
) -> None:
    token = new_workspace(database)
    names = [f"agent-{n}" for n in range(8)]
    with (
        two_web_processes(settings, tmp_path, rate_limit_per_minute=0) as url,
        httpx.Client(base_url=url, timeout=60, limits=httpx.Limits(max_connections=64)) as client,
    ):
        keys = _register(client, token, *names)

        def reserve(key: str, path: str) -> httpx.Response:
            headers = {"Authorization": f"Bearer {key}"}
            return client.post("/v1/reservations", json={"paths": [path]}, headers=headers)

        for round_ in range(4):
            # Two requests per agent, of patterns that all overlap one another.
            patterns = [f"r{round_}/a.py", f"r{round_}/*.py", f"r{round_}/**"]
            calls = [
                (lambda key=keys[name], path=patterns[n % 3]: reserve(key, path))
                for n, name in enumerate(names * 2)
            ]
            answers = race(calls)
            for answer in answers:
                assert answer.status_code in (201, 409), (answer.status_code, answer.text)
            won = [a.json()["reservation"]["agent"] for a in answers if a.status_code == 201]
            # One agent wins (its second request extends its own reservation).
            assert len(set(won)) == 1, won
            for answer in answers:
                if answer.status_code == 409:
                    held_by = {c["held_by"] for c in answer.json()["conflicts"]}
                    assert held_by == set(won), (held_by, won)
    with unit_of_work(database, readonly=True) as uow:
        holders = uow.session.execute(
            select(func.count(func.distinct(Reservation.agent_id)), func.count())
        ).one()
    assert holders[0] <= 4 and holders[1] >= 4
