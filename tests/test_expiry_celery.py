"""Expiry in the Celery shape: a real worker and beat on a real Redis run the renotify sweep that
stamps ``expired_at`` (the same function the embedded default's timer calls)."""

from __future__ import annotations

import pytest

from inbots.config import Settings
from tests.celery_harness import (  # noqa: F401  (fixtures)
    FAST,
    CeleryHarness,
    celery_fixture,
    redis_broker_fixture,
    settings_overrides_fixture,
    timings_fixture,
)
from tests.helpers import Api
from tests.test_expiry import expiry_scenario


@pytest.mark.parametrize(
    "timings", [{**FAST, "renotify_interval_seconds": 0.5, "ttl_min_seconds": 1}]
)
def test_a_message_expires_on_time_in_the_celery_shape(
    api: Api, celery: CeleryHarness, settings: Settings
) -> None:
    assert not settings.embedded and settings.ttl_min_seconds == 1
    celery.worker()
    celery.beat(wait=False)
    expiry_scenario(api, timeout=6.0)
