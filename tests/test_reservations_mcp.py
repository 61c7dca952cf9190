"""Reservations through the MCP tools (a real MCP client on /mcp): reserve_paths,
release_paths, list_reservations; a conflict's text names holder and expiry on one line."""

from __future__ import annotations

import pytest

from tests.conftest import ServerThread
from tests.helpers import Api
from tests.mcp_client import Connect, over_http, run, text_of


@pytest.fixture
def connect(server: ServerThread) -> Connect:
    return lambda key: over_http(server.url, key)


def test_two_agents_reserve_conflict_list_and_release(api: Api, connect: Connect) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")

    async def scenario() -> None:
        async with connect(alice.token) as a, connect(bob.token) as b:
            listed = [t.name for t in (await a.client.list_tools()).tools]
            assert {"reserve_paths", "release_paths", "list_reservations"} <= set(listed)

            made = await a.ok("reserve_paths", paths=["src/api/**"], reason="router split")
            held = made["reservation"]
            assert held["agent"] == "alice" and made["conflicts"] == []
            again = await a.call("reserve_paths", paths=["src/api/x.py"])  # extends its own
            assert held["id"] in text_of(again) and "release_paths" in text_of(again)
            held = again.structured_content["reservation"]  # type: ignore[index]

            code, text = await b.error("reserve_paths", paths=["src/api/app.py", "README.md"])
            assert code == "reservation_conflict"
            line = next(x for x in text.splitlines() if x.startswith("- src/api/app.py"))
            assert "alice" in line and held["expires_at"] in line and held["id"] in line

            page = await b.ok("list_reservations", path="src/api/app.py")
            assert [r["id"] for r in page["items"]] == [held["id"]]
            text = text_of(await b.call("list_reservations"))
            assert "alice" in text and "src/api/**" in text

            code, _ = await b.error("release_paths", reservation_id=held["id"])
            assert code == "forbidden"
            code, text = await b.error("reserve_paths", paths=["../x"])
            assert code == "validation_error" and "paths" in text

            other = await a.ok("reserve_paths", paths=["docs/*.md"])
            released = await a.ok("release_paths")
            assert {r["id"] for r in released["released"]} == {
                held["id"],
                other["reservation"]["id"],
            }
            assert (await a.ok("list_reservations"))["items"] == []
            assert "Nothing to release" in text_of(await a.call("release_paths"))
            made = await b.ok("reserve_paths", paths=["src/api/app.py"])
            assert made["reservation"]["agent"] == "bob"
            one = await b.ok("release_paths", reservation_id=made["reservation"]["id"])
            assert [r["id"] for r in one["released"]] == [made["reservation"]["id"]]

    run(scenario)
