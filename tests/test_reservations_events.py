"""``reservation.conflict``: each refused reservation is an operator event (``GET /v1/events``)
naming both agents and the paths, and reaches the operator's alert webhook, signed, when it
receives that type."""

from __future__ import annotations

from tests.helpers import Api
from tests.receivers import always, receiver
from tests.test_alerts import alert_hook, alerts_of


def test_a_refused_reservation_reaches_the_alert_webhook_naming_both_agents(api: Api) -> None:
    with receiver(always(200)) as hook:
        secret = alert_hook(api, hook, ["reservation.conflict"])
        alice, bob = api.agent("alice"), api.agent("bob")
        held = alice.ok("POST", "/reservations", 201, json={"paths": ["src/api/**"]})
        refused = bob.post("/reservations", json={"paths": ["src/api/app.py", "README.md"]})
        assert refused.status_code == 409
        (alert,) = alerts_of(hook, secret, "reservation.conflict", 1)
    assert alert["agent"] == "bob" and alert["holders"] == ["alice"]
    assert alert["paths"] == ["src/api/app.py", "README.md"]
    (conflict,) = alert["conflicts"]
    assert conflict["held_by"] == "alice"
    assert conflict["reservation_id"] == held["reservation"]["id"]
    (event,) = api.ok("GET", "/events", params={"type": "reservation.conflict"})["items"]
    assert event["actor"] == "bob" and event["alert"]["holders"] == ["alice"]


def test_without_an_alert_webhook_the_conflict_is_still_an_event(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    alice.ok("POST", "/reservations", 201, json={"paths": ["docs/**"]})
    assert bob.post("/reservations", json={"paths": ["docs/a.md"]}).status_code == 409
    (event,) = api.ok("GET", "/events", params={"type": "reservation.conflict"})["items"]
    assert event["alert"]["agent"] == "bob" and event["alert"]["paths"] == ["docs/a.md"]
    assert event["publish_count"] == 0
