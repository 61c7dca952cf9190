"""The dashboard's approvals page as served (the headless-browser checks are in
test_dashboard.py): what it shows the operator to decide on, deciding on a held thread and a
held brief, and the policy form (CSRF-guarded, a refusal shown with what was typed). SQLite
only: the page runs the services the API tests cover on both databases."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import httpx
import pytest

from tests.helpers import CSRF, Api, dashboard
from tests.receivers import FAST

BODY = "Run the migration on the primary, then check every replica caught up."


@pytest.fixture
def backend() -> str:
    return "sqlite"


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return dict(FAST)


@pytest.fixture
def page(api: Api) -> Iterator[httpx.Client]:
    with dashboard(api) as client:
        yield client


def csrf_of(page: httpx.Client) -> str:
    found = CSRF.search(page.get("/approvals").text)
    assert found
    return found.group(1)


def row_of(text: str, ident: str) -> str:
    row = text[text.index(f'data-item="{ident}"') :]
    return html.unescape(row[: row.index("</tr>")])


def test_the_page_shows_what_the_operator_decides_on(api: Api, page: httpx.Client) -> None:
    alice, mallory = api.agent("alice"), api.agent("mallory")
    api.agent("bob")
    api.agent("carol")
    api.ok("PUT", "/policy", json={"approval": {"kinds": ["task"], "senders": ["mallory"]}})
    thread = alice.open_thread("Release 4.2", ["bob", "carol"], ref="R-42")["id"]
    sent = alice.send(thread, BODY, kind="task", summary="Migrate")["message"]["id"]
    opened = mallory.open_thread("Wire the money", ["bob"], goal="Before noon")["id"]
    mallory.ok("PUT", "/me/brief", json={"brief": "I move money."})
    agent_id = api.ok("GET", "/agents/mallory")["id"]

    text = page.get("/approvals").text
    message = row_of(text, sent)
    assert "Release 4.2" in message and "ref R-42" in message and "bob, carol" in message
    assert BODY in message and "Migrate" in message
    held_thread = row_of(text, opened)
    assert "Wire the money" in held_thread and "Goal: Before noon" in held_thread
    assert "new thread" in held_thread and "bob" in held_thread
    brief = row_of(text, agent_id)
    assert "I move money." in brief and "every agent" in brief
    # The policy form shows the policy.
    assert re.search(r'name="kinds" value="task" checked', text)
    assert not re.search(r'name="kinds" value="decision" checked', text)
    assert 'name="senders" value="mallory"' in text


def test_approving_a_thread_and_rejecting_a_brief_from_the_page(
    api: Api, page: httpx.Client
) -> None:
    mallory, bob = api.agent("mallory"), api.agent("bob")
    api.ok("PUT", "/policy", json={"approval": {"senders": ["mallory"]}})
    thread = mallory.open_thread("Wire the money", ["bob"])["id"]
    mallory.ok("PUT", "/me/brief", json={"brief": "I move money."})
    agent_id = api.ok("GET", "/agents/mallory")["id"]
    csrf = csrf_of(page)

    done = page.post(f"/approvals/{thread}/approve", data={"csrf": csrf})
    assert done.status_code == 303 and done.headers["location"] == "/approvals"
    assert bob.ok("GET", f"/threads/{thread}")["title"] == "Wire the money"
    done = page.post(f"/approvals/{agent_id}/reject", data={"csrf": csrf, "reason": "No"})
    assert done.status_code == 303
    assert "the brief of agent" in page.get("/approvals").text  # the flash
    assert mallory.ok("GET", "/agents/mallory/brief")["brief"] is None
    assert api.ok("GET", "/approvals")["items"] == []


def test_the_policy_form_replaces_the_policy(api: Api, page: httpx.Client) -> None:
    api.agent("alice")
    api.agent("bob")
    csrf = csrf_of(page)
    form = {"csrf": csrf, "kinds": ["task", "decision"], "priorities": ["urgent"]}
    saved = page.post("/approvals/policy", data={**form, "senders": "alice, bob"})
    assert saved.status_code == 303 and saved.headers["location"] == "/approvals"
    rules = {"kinds": ["task", "decision"], "priorities": ["urgent"], "senders": ["alice", "bob"]}
    assert api.ok("GET", "/policy")["approval"] == rules
    shown = page.get("/approvals").text
    assert "Approval policy saved" in shown
    assert re.search(r'name="priorities" value="urgent" checked', shown)

    # Without the CSRF token, or from another origin: refused, nothing changed.
    assert page.post("/approvals/policy", data={"kinds": ["ack"]}).status_code == 403
    foreign = page.post(
        "/approvals/policy",
        data={"csrf": csrf, "kinds": ["ack"]},
        headers={"Origin": "http://evil.example"},
    )
    assert foreign.status_code == 403
    # A username that names no agent: the form again, with what was typed and the sentence.
    refused = page.post("/approvals/policy", data={"csrf": csrf, "senders": "alice, ghost"})
    assert refused.status_code == 422
    assert "ghost" in refused.text and 'id="form-error"' in refused.text
    assert 'value="alice, ghost"' in refused.text
    assert api.ok("GET", "/policy")["approval"] == rules
    # Nothing ticked and no senders: the policy holds nothing.
    assert page.post("/approvals/policy", data={"csrf": csrf}).status_code == 303
    assert api.ok("GET", "/policy")["approval"] == {"kinds": [], "priorities": [], "senders": []}
