"""Reservations over HTTP (coordination.md §1): reserve, conflict naming the holder, list by path,
renew, release (holder only; the operator any), check, limits, expiry; on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import Api, Caller, assert_error


def reserve(agent: Caller, *paths: str, status: int = 201, **kw: Any) -> dict[str, Any]:
    response = agent.post("/reservations", json={"paths": list(paths), **kw})
    assert response.status_code == status, response.text
    return response.json()  # type: ignore[no-any-return]


def test_a_reservation_is_made_and_read_back(api: Api) -> None:
    alice = api.agent("alice")
    answer = reserve(alice, "src/api/**", "docs/api.md", reason="splitting the router")
    assert answer["conflicts"] == []
    r = answer["reservation"]
    assert r["id"].startswith("rsv_") and r["agent"] == "alice"
    assert r["paths"] == ["src/api/**", "docs/api.md"]
    assert r["exclusive"] is True and r["reason"] == "splitting the router"
    assert r["released_at"] is None and r["expires_at"] > r["created_at"]
    assert set(r) == {
        "id", "agent", "paths", "exclusive", "reason", "created_at", "expires_at", "released_at"
    }  # fmt: skip


def test_an_overlapping_reservation_is_refused_naming_the_holder(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    held = reserve(alice, "src/api/**", reason="refactor")["reservation"]
    response = bob.post("/reservations", json={"paths": ["src/api/app.py", "README.md"]})
    assert response.status_code == 409, response.text
    body = response.json()
    assert set(body) == {"error", "conflicts"}
    assert body["error"]["code"] == "reservation_conflict"
    assert body["error"]["field"] == "paths"
    assert "alice" in body["error"]["message"] and held["id"] in body["error"]["message"]
    assert body["conflicts"] == [
        {
            "path": "src/api/app.py",
            "held_by": "alice",
            "pattern": "src/api/**",
            "reservation_id": held["id"],
            "expires_at": held["expires_at"],
            "reason": "refactor",
        }
    ]
    # Nothing of bob's was reserved, README.md included.
    mine = bob.ok("GET", "/reservations", params={"agent": "bob"})
    assert mine["items"] == []


def test_a_free_path_is_reserved_beside_another_agents(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    reserve(alice, "src/api/**")
    assert reserve(bob, "src/web/**", "docs/*.md")["reservation"]["agent"] == "bob"


def test_shared_reservations_conflict_only_with_exclusive_ones(api: Api) -> None:
    alice, bob, carol = api.agent("alice"), api.agent("bob"), api.agent("carol")
    reserve(alice, "docs/**", exclusive=False)
    reserve(bob, "docs/api.md", exclusive=False)  # shared beside shared
    refused = reserve(carol, "docs/cli.md", status=409)  # exclusive over a shared one
    assert {c["held_by"] for c in refused["conflicts"]} == {"alice"}


def test_the_same_agent_overlapping_again_extends_its_reservation(api: Api) -> None:
    alice = api.agent("alice")
    first = reserve(alice, "src/api/**", ttl_seconds=60)["reservation"]
    again = reserve(alice, "src/api/app.py", ttl_seconds=600)["reservation"]
    assert again["id"] == first["id"]
    assert again["paths"] == ["src/api/**", "src/api/app.py"]
    assert again["expires_at"] > first["expires_at"]
    listed = alice.ok("GET", "/reservations", params={"agent": "alice"})["items"]
    assert [r["id"] for r in listed] == [first["id"]]


def test_list_by_path_finds_the_reservations_that_would_conflict(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    api_glob = reserve(alice, "src/api/**")["reservation"]
    docs = reserve(bob, "docs/*.md")["reservation"]
    found = bob.ok("GET", "/reservations", params={"path": "src/api/app.py"})["items"]
    assert [r["id"] for r in found] == [api_glob["id"]]
    found = api.ok("GET", "/reservations", params={"path": "docs/cli.md"})["items"]
    assert [r["id"] for r in found] == [docs["id"]]
    assert api.ok("GET", "/reservations", params={"path": "tests/x.py"})["items"] == []
    both = api.ok("GET", "/reservations")["items"]
    assert [r["id"] for r in both] == [docs["id"], api_glob["id"]]  # newest first


def test_the_list_pages_with_a_cursor(api: Api) -> None:
    alice = api.agent("alice")
    made = [reserve(alice, f"dir{i}/file.py")["reservation"]["id"] for i in range(5)]
    seen: list[str] = []
    cursor = None
    for _ in range(5):
        params: dict[str, Any] = {"limit": 2, "path": "**/file.py"}
        if cursor:
            params["cursor"] = cursor
        page = alice.ok("GET", "/reservations", params=params)
        seen += [r["id"] for r in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == list(reversed(made))
    assert_error(
        alice.get("/reservations", params={"cursor": "nope"}), 422, "validation_error", "cursor"
    )


def test_release_by_another_agent_is_forbidden_and_by_the_holder_frees_the_paths(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    held = reserve(alice, "src/**")["reservation"]
    assert_error(bob.call("DELETE", f"/reservations/{held['id']}"), 403, "forbidden")
    assert_error(bob.post(f"/reservations/{held['id']}/renew", json={}), 403, "forbidden")
    released = alice.ok("DELETE", f"/reservations/{held['id']}")
    assert released["released_at"] is not None
    assert reserve(bob, "src/main.py")["reservation"]["agent"] == "bob"
    active = api.ok("GET", "/reservations", params={"active": "true", "agent": "alice"})
    assert active["items"] == []
    ended = api.ok("GET", "/reservations", params={"active": "false"})["items"]
    assert [r["id"] for r in ended] == [held["id"]]


def test_the_operator_releases_any_reservation_with_a_reason(api: Api, database: Any) -> None:
    from inbots.models.reservations import Reservation

    alice = api.agent("alice")
    held = reserve(alice, "src/**")["reservation"]
    released = api.ok("DELETE", f"/reservations/{held['id']}", params={"reason": "stale"})
    assert released["released_at"] is not None
    with database.session() as session:
        row = session.get(Reservation, held["id"])
        assert row.release_reason == "stale" and row.released_by_id is not None
    assert_error(api.post("/reservations", json={"paths": ["a"]}), 403, "forbidden")


def test_renew_extends_and_an_ended_reservation_is_not_active(api: Api) -> None:
    alice = api.agent("alice")
    held = reserve(alice, "src/**", ttl_seconds=60)["reservation"]
    renewed = alice.ok("POST", f"/reservations/{held['id']}/renew", json={"ttl_seconds": 7200})
    assert renewed["expires_at"] > held["expires_at"]
    alice.ok("DELETE", f"/reservations/{held['id']}")
    assert_error(alice.post(f"/reservations/{held['id']}/renew", json={}), 409, "not_active")
    assert_error(alice.post("/reservations/rsv_nothing/renew", json={}), 404, "not_found")


@pytest.mark.parametrize(
    "body",
    [
        {"paths": ["../etc/passwd"]},
        {"paths": ["src/../../x"]},
        {"paths": ["/etc/passwd"]},
        {"paths": []},
        {"paths": [""]},
        {"paths": ["x" * 513]},
        {"paths": [f"f{i}" for i in range(101)]},
    ],
)
def test_bad_paths_are_refused_naming_paths(api: Api, body: dict[str, Any]) -> None:
    alice = api.agent("alice")
    assert_error(alice.post("/reservations", json=body), 422, "validation_error", "paths")
    assert_error(alice.post("/reservations/check", json=body), 422, "validation_error", "paths")


def test_bad_ttl_reason_and_path_filter_are_refused_naming_them(api: Api) -> None:
    alice = api.agent("alice")
    for ttl in (59, 86_401):
        response = alice.post("/reservations", json={"paths": ["a"], "ttl_seconds": ttl})
        assert_error(response, 422, "validation_error", "ttl_seconds")
    response = alice.post("/reservations", json={"paths": ["a"], "reason": "x" * 501})
    assert_error(response, 422, "validation_error", "reason")
    response = alice.get("/reservations", params={"path": "../x"})
    assert_error(response, 422, "validation_error", "path")
    response = alice.post("/reservations", json={"paths": ["a"], "force": True})
    assert response.status_code == 422


def test_check_names_other_agents_exclusive_holds_and_stores_nothing(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    held = reserve(alice, "src/api/**")["reservation"]
    reserve(alice, "docs/**", exclusive=False)
    answer = bob.ok("POST", "/reservations/check", json={"paths": ["src/api/x.py", "docs/a.md"]})
    assert [(c["path"], c["held_by"], c["reservation_id"]) for c in answer["conflicts"]] == [
        ("src/api/x.py", "alice", held["id"])
    ]
    # Its own reservations are no conflict to the holder.
    assert alice.ok("POST", "/reservations/check", json={"paths": ["src/api/x.py"]}) == {
        "conflicts": []
    }
    assert len(api.ok("GET", "/reservations")["items"]) == 2


def test_an_expired_reservation_is_not_active_and_conflicts_with_nothing(
    api: Api, database: Any
) -> None:
    from datetime import timedelta

    from inbots.kit.clock import utcnow
    from inbots.models.reservations import Reservation

    alice, bob = api.agent("alice"), api.agent("bob")
    held = reserve(alice, "src/**")["reservation"]
    with database.session() as session:
        session.get(Reservation, held["id"]).expires_at = utcnow() - timedelta(seconds=1)
        session.commit()
    assert reserve(bob, "src/x.py")["reservation"]["agent"] == "bob"
    assert (
        api.ok("GET", "/reservations", params={"active": "true", "agent": "alice"})["items"] == []
    )
    assert_error(alice.post(f"/reservations/{held['id']}/renew", json={}), 409, "not_active")


def test_a_refused_request_is_a_reservation_conflict_event(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    reserve(alice, "src/**")
    reserve(bob, "src/x.py", "README.md", status=409)
    events = api.ok("GET", "/events", params={"type": "reservation.conflict"})["items"]
    assert len(events) == 1


def test_retention_deletes_released_and_expired_reservations_past_the_window(
    api: Api, database: Any, settings: Any
) -> None:
    from datetime import timedelta

    from inbots.deliveries.retention import purge
    from inbots.kit.clock import utcnow
    from inbots.models.reservations import Reservation

    alice = api.agent("alice")
    released = reserve(alice, "a/**")["reservation"]
    alice.ok("DELETE", f"/reservations/{released['id']}")
    expired = reserve(alice, "b/**")["reservation"]
    held = reserve(alice, "c/**")["reservation"]
    with database.session() as session:
        session.get(Reservation, expired["id"]).expires_at = utcnow() - timedelta(hours=1)
        session.get(Reservation, held["id"]).expires_at = utcnow() + timedelta(days=10)
        session.commit()
    assert purge(database, settings, days=1).reservations == 0  # none ended a day ago
    later = utcnow() + timedelta(days=2)
    assert purge(database, settings, days=1, now=later, dry_run=True).reservations == 2
    assert purge(database, settings, days=1, now=later).reservations == 2
    left = api.ok("GET", "/reservations")["items"]
    assert [r["id"] for r in left] == [held["id"]]


@pytest.mark.parametrize(
    "settings_overrides", [{"rate_limit_per_minute": 1, "rate_limit_burst": 2}]
)
def test_each_reservation_write_spends_a_rate_limit_token_and_reads_none(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    first = reserve(alice, "a/**")["reservation"]
    for _ in range(3):  # reads and checks spend nothing
        alice.ok("GET", "/reservations")
        alice.ok("POST", "/reservations/check", json={"paths": ["a/x"]})
    alice.ok("POST", f"/reservations/{first['id']}/renew", json={})
    refused = alice.post("/reservations", json={"paths": ["b/**"]})
    assert_error(refused, 429, "rate_limited")
    assert refused.headers["Retry-After"]
    refused = alice.call("DELETE", f"/reservations/{first['id']}")
    assert_error(refused, 429, "rate_limited")
    mine = alice.ok("GET", "/reservations", params={"agent": "alice", "active": "true"})
    assert [r["id"] for r in mine["items"]] == [first["id"]]  # nothing stored, nothing released
    # A refused reservation spends its token too (its conflict event is stored).
    reserve(bob, "a/x.py", status=409)
    reserve(bob, "a/y.py", status=409)
    assert_error(bob.post("/reservations", json={"paths": ["c"]}), 429, "rate_limited")
    # The operator is never limited.
    for _ in range(3):
        api.ok("GET", "/reservations")
    api.ok("DELETE", f"/reservations/{first['id']}", params={"reason": "done"})


def test_bodies_of_the_wrong_shape_are_refused_naming_the_field(api: Api) -> None:
    alice = api.agent("alice")
    for body, field in (
        ({"paths": "src/**"}, "paths"),
        ({"paths": [None]}, "paths"),
        ({}, "paths"),
        ({"paths": ["a"], "ttl_seconds": "soon"}, "ttl_seconds"),
        ({"paths": ["a"], "exclusive": "maybe"}, "exclusive"),
    ):
        response = alice.post("/reservations", json=body)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["error"]["field"].split(".")[0].split("[")[0] == field, body
    response = alice.get("/reservations", params={"active": "maybe"})
    assert response.status_code == 422 and response.json()["error"]["field"] == "active"
    response = alice.post("/reservations/rsv_x/renew", json={"ttl_seconds": 5})
    assert response.status_code in (404, 422)
