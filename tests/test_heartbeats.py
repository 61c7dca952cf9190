"""The renotify sweep's heartbeat: each run stores its time in the database, so every web process
can show how long ago the last sweep ran (``/v1/stats``, ``/metrics``) — including when the only
sweeper is a beat on another machine, and when none has ever run."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime

import pytest

from inbots.config import Settings
from inbots.db.engine import Database
from inbots.deliveries.renotify import sweep
from inbots.dispatch.jobs import Job
from tests.conftest import free_port
from tests.helpers import Api, Samples, metric_samples, sample

# Broker mode with no beat and no worker (the broker is a closed port): the web runs no sweep of
# its own, as in production.
NO_BEAT = {"broker_url": f"redis://127.0.0.1:{free_port()}/0", "renotify_interval_seconds": 20}


def ignore(jobs: Sequence[Job]) -> None:
    pass


def scrape(api: Api) -> Samples:
    response = api.client.get("/metrics")
    assert response.status_code == 200, response.text
    return metric_samples(response.text)


@pytest.mark.parametrize("settings_overrides", [NO_BEAT])
def test_no_sweep_yet_says_so_and_a_sweep_is_seen_by_the_web(
    api: Api, database: Database, settings: Settings
) -> None:
    stats = api.ok("GET", "/stats")
    assert stats["last_sweep_at"] is None
    assert stats["last_sweep_age_seconds"] is None
    samples = scrape(api)
    assert ("inbots_renotify_last_run_age_seconds", ()) not in samples
    assert ("inbots_renotify_last_run_timestamp_seconds", ()) not in samples
    assert sample(samples, "inbots_renotify_interval_seconds") == 20

    began = time.time()
    sweep(database, settings, ignore)  # what beat's delivery.renotify task runs, elsewhere
    stats = api.ok("GET", "/stats")
    ran = datetime.fromisoformat(stats["last_sweep_at"]).timestamp()
    assert began - 0.01 <= ran <= time.time()
    assert 0 <= stats["last_sweep_age_seconds"] < 2
    samples = scrape(api)
    assert sample(samples, "inbots_renotify_last_run_timestamp_seconds") == pytest.approx(
        ran, abs=0.001
    )
    first_age = sample(samples, "inbots_renotify_last_run_age_seconds")
    assert 0 <= first_age < 2

    time.sleep(1.1)  # no sweep since: the age grows
    assert sample(scrape(api), "inbots_renotify_last_run_age_seconds") >= first_age + 1
    assert api.ok("GET", "/stats")["last_sweep_age_seconds"] >= 1

    sweep(database, settings, ignore)
    later = datetime.fromisoformat(api.ok("GET", "/stats")["last_sweep_at"]).timestamp()
    assert later > ran + 1


@pytest.mark.parametrize("settings_overrides", [{"renotify_interval_seconds": 0.2}])
def test_the_embedded_timer_records_every_sweep(api: Api) -> None:
    seen: set[str] = set()
    deadline = time.monotonic() + 10
    while len(seen) < 3:
        assert time.monotonic() < deadline, f"the embedded sweeps recorded only {sorted(seen)}"
        stamp = api.ok("GET", "/stats")["last_sweep_at"]
        if stamp is not None:
            seen.add(stamp)
        time.sleep(0.1)
    assert sample(scrape(api), "inbots_renotify_last_run_age_seconds") < 2
