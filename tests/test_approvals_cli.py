"""The approval gate from the operator CLI: ``inbots pending`` shows what the operator decides
on (thread titles, recipients, the start of each body; held threads and briefs), ``inbots
approve|reject`` decide any of them, and ``inbots policy show|set`` read and change the policy.
In this process, through ``main()`` (errors and exit codes included); SQLite only: the CLI is
an HTTP client (the API tests cover both databases)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers import Api
from tests.receivers import FAST
from tests.test_cli import Run, in_process

Cli = Callable[..., Run]


@pytest.fixture
def backend() -> str:
    return "sqlite"


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return dict(FAST)


@pytest.fixture
def cli(api: Api, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    """``inbots …`` as the operator, in this process."""

    def run(*args: str) -> Run:
        env = {"INBOTS_URL": api.base_url, "INBOTS_OPERATOR_TOKEN": api.token, "COLUMNS": "200"}
        return in_process(monkeypatch, capsys, env, *args)

    return run


def one_line_error(run: Run, code: int, *fragments: str) -> None:
    assert run.code == code, (run.code, run.stdout, run.stderr)
    assert "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    for fragment in fragments:
        assert fragment in run.stderr, run.stderr


BODY = "Run the migration on the primary, then " + "check every replica caught up. " * 10


def test_pending_shows_what_the_operator_decides_on(api: Api, cli: Cli) -> None:
    alice, mallory = api.agent("alice"), api.agent("mallory")
    api.agent("bob")
    api.agent("carol")
    api.ok("PUT", "/policy", json={"approval": {"kinds": ["task"], "senders": ["mallory"]}})
    thread = alice.open_thread("Release 4.2", ["bob", "carol"])["id"]
    sent = alice.send(thread, BODY, kind="task", summary="Migrate")
    opened = mallory.open_thread("Wire the money", ["bob"], goal="Before noon", ref="PAY-1")
    mallory.ok("PUT", "/me/brief", json={"brief": "I move money."})

    table = cli("pending", "--output", "table").stdout
    (row,) = [line for line in table.splitlines() if sent["message"]["id"] in line]
    assert "Release 4.2" in row and thread not in row  # the title, not the raw id
    assert "bob, carol" in row and "Migrate — Run the migration on the primary" in row
    assert row.rstrip().endswith("…")  # the body's start, cut
    (row,) = [line for line in table.splitlines() if opened["id"] in line]
    assert "Wire the money" in row and "Before noon" in row and "PAY-1" in row
    assert "brief: I move money." in table
    assert cli("pending", "--output", "json").json() == api.ok("GET", "/approvals")


def test_approve_and_reject_a_thread_and_a_brief(api: Api, cli: Cli) -> None:
    mallory, bob = api.agent("mallory"), api.agent("bob")
    api.ok("PUT", "/policy", json={"approval": {"senders": ["mallory"]}})
    thread = mallory.open_thread("Wire the money", ["bob"])["id"]
    mallory.ok("PUT", "/me/brief", json={"brief": "I move money."})
    agent_id = api.ok("GET", "/agents/mallory")["id"]

    approved = cli("approve", thread)
    assert approved.stdout.strip() == f"Approved thread {thread}: its participants see it."
    assert bob.ok("GET", f"/threads/{thread}")["title"] == "Wire the money"
    rejected = cli("reject", agent_id, "--reason", "No", "--output", "json").json()
    assert (rejected["subject"], rejected["state"], rejected["brief"]) == (
        "brief",
        "rejected",
        "I move money.",
    )
    assert mallory.ok("GET", "/agents/mallory/brief")["brief"] is None
    one_line_error(cli("approve", thread), 1, "not_held")
    one_line_error(cli("reject", "th_nope"), 1, "not_found")


def test_policy_show_and_set_change_only_the_lists_given(api: Api, cli: Cli) -> None:
    api.agent("alice")
    api.agent("bob")
    assert cli("policy", "show", "--output", "json").json() == api.ok("GET", "/policy")
    assert "kinds held" in cli("policy", "show").stdout

    def rules(run: Run) -> Any:
        answer = run.json()
        assert answer == api.ok("GET", "/policy")
        return answer["approval"]

    assert rules(cli("policy", "set", "--kinds", "task,decision", "--json")) == {
        "kinds": ["task", "decision"],
        "priorities": [],
        "senders": [],
    }
    assert rules(
        cli("policy", "set", "--senders", "alice, bob", "--priorities", "urgent", "-o", "json")
    ) == {
        "kinds": ["task", "decision"],  # not given: kept
        "priorities": ["urgent"],
        "senders": ["alice", "bob"],
    }
    assert rules(cli("policy", "set", "--kinds", "", "--senders", "bob", "--json")) == {
        "kinds": [],  # an empty value clears the list
        "priorities": ["urgent"],
        "senders": ["bob"],
    }
    table = cli("policy", "set", "--priorities", "").stdout
    assert "senders held" in table and "bob" in table

    before = api.ok("GET", "/policy")
    one_line_error(cli("policy", "set", "--kinds", "chore"), 1, "approval.kinds", "'chore'")
    one_line_error(cli("policy", "set", "--senders", "nobody"), 1, "approval.senders")
    assert cli("policy", "set").code == 2  # nothing to change: a usage error
    assert api.ok("GET", "/policy") == before
