"""The operator CLI: the real ``inbots`` console script, run as a subprocess against a real server.

SQLite only: the CLI is an HTTP client, the database behind the server does not change what it
does (the API tests cover both backends)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from inbots.cli import views
from tests.conftest import free_port
from tests.helpers import Api
from tests.receivers import FAST, always, not_inbots, receiver

INBOTS = Path(sys.executable).parent / "inbots"
# Polling agents' deliveries stall after a second; the sweep runs often enough to see it.
# A 5 s webhook timeout: the receiver answers 500 at once, but the first request to it once took
# 1.4 s on a loaded machine and was logged a timeout (the test reads every attempt's reason).
STALLING = {
    **FAST,
    "stall_seconds": 1.0,
    "renotify_interval_seconds": 0.3,
    "webhook_timeout_seconds": 5.0,
    "publish_lost_seconds": 30.0,
}
RED, YELLOW = "\x1b[1;31m", "\x1b[33m"


# SQLite only: these drive the same services the API tests cover on both databases.
pytestmark = pytest.mark.parametrize("backend", ["sqlite"])


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return dict(FAST)


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.code == 0 and self.stderr == "", (self.code, self.stderr)
        return json.loads(self.stdout)


def in_process(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    env: dict[str, str],
    *args: str,
    stdin: str | None = None,
) -> Run:
    """``inbots …`` in this process, through ``inbots.cli.main.main`` (errors and exit codes
    included): the console script's code path without a second of CPU per command."""
    from inbots.cli.main import main

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["inbots", *args])
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    with pytest.raises(SystemExit) as done:
        main()
    captured = capsys.readouterr()
    code = done.value.code
    return Run(code if isinstance(code, int) else 0, captured.out, captured.err)


def cli_env(api: Api | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INBOTS_", "FORCE_COLOR"))}
    env |= {"COLUMNS": "200", "NO_COLOR": "", "TERM": "dumb"}
    if api is not None:
        env |= {"INBOTS_URL": api.base_url, "INBOTS_OPERATOR_TOKEN": api.token}
    return env | extra


def inbots(api: Api | None, *args: str, **env: str) -> Run:
    """Run the console script; ``api`` supplies INBOTS_URL and INBOTS_OPERATOR_TOKEN."""
    done = subprocess.run(
        [str(INBOTS), *args], env=cli_env(api, **env), capture_output=True, text=True, timeout=30
    )
    return Run(done.returncode, done.stdout, done.stderr)


def ok(api: Api, *args: str) -> Run:
    run = inbots(api, *args)
    assert run.code == 0, (run.code, run.stderr)
    return run


def assert_one_line_error(run: Run, code: int, *fragments: str) -> None:
    assert run.code == code, (run.code, run.stdout, run.stderr)
    assert run.stdout == ""
    assert "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert run.stderr.startswith("inbots: ")
    for fragment in fragments:
        assert fragment in run.stderr, run.stderr


def wait_for(api: Api, delivery_id: str, check: Any, timeout: float = 10) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        receipt = api.delivery(delivery_id)
        if check(receipt) or time.monotonic() > deadline:
            return receipt
        time.sleep(0.05)


def test_a_url_that_is_not_inbots_is_one_line_exit_3(api: Api) -> None:
    """INBOTS_URL at another server that answers 200 with a page (a proxy's, another app's):
    one line naming the URL, exit 3, not a crash report (exit 70)."""
    with not_inbots() as url:
        run = inbots(api, "stats", "--url", url)
    assert_one_line_error(run, 3, "not Inbots' JSON", "text/html", "INBOTS_URL")


def test_agents_register_list_show_archive(api: Api) -> None:
    created = inbots(
        api, "agents", "register", "scout", "--description", "Finds things", "--json"
    ).json()
    assert created["username"] == "scout" and created["webhook"] is None
    assert api.client.get(
        "/v1/me", headers={"Authorization": f"Bearer {created['api_key']}"}
    ).is_success

    human = ok(api, "agents", "register", "pusher", "--webhook-url", "http://127.0.0.1:9/hook")
    pusher = api.ok("GET", "/agents/pusher")
    secret = api.ok("GET", f"/agents/{pusher['id']}/webhook")["signing_secret"]
    assert "shown once" in human.stdout and "agt_" in human.stdout and secret in human.stdout

    listed = inbots(api, "agents", "list", "--json").json()
    assert listed == api.ok("GET", "/agents")
    assert {a["username"] for a in listed["items"]} == {"scout", "pusher"}
    table = ok(api, "agents", "list").stdout
    assert "scout" in table and "pusher" in table and "agt_" not in table

    assert inbots(api, "agents", "show", "scout", "--json").json() == api.ok("GET", "/agents/scout")
    assert "Finds things" in ok(api, "agents", "show", created["id"]).stdout

    assert inbots(api, "agents", "archive", "scout", "--json").json()["status"] == "archived"
    assert "Archived @scout" in ok(api, "agents", "archive", "scout").stdout  # idempotent
    assert api.ok("GET", "/agents/scout")["status"] == "archived"


def test_webhook_set_show_rotate_remove(api: Api) -> None:
    api.agent("hooked")
    hook_url = "http://127.0.0.1:9/first"
    assert inbots(api, "webhook", "set", "hooked", hook_url, "--json").json()["url"] == hook_url
    stored = api.ok("GET", "/agents/hooked/webhook")
    assert inbots(api, "webhook", "show", "hooked", "--json").json() == stored

    shown = ok(api, "webhook", "show", "hooked").stdout
    assert hook_url in shown and stored["signing_secret"] not in shown  # masked for people
    assert stored["signing_secret"] in ok(api, "webhook", "show", "hooked", "--reveal").stdout

    rotated = ok(api, "webhook", "rotate", "hooked").stdout
    fresh = api.ok("GET", "/agents/hooked/webhook")
    assert fresh["signing_secret"] != stored["signing_secret"]
    assert fresh["signing_secret"] in rotated and fresh["previous_secret_expires_at"]

    assert "Removed" in ok(api, "webhook", "remove", "hooked").stdout
    assert api.get("/agents/hooked/webhook").status_code == 404
    assert_one_line_error(inbots(api, "webhook", "show", "hooked"), 1, "not_found", "404")
    rejected = inbots(api, "webhook", "set", "hooked", "ftp://example.com/x")
    assert_one_line_error(rejected, 1, "422")


def test_webhook_events_and_the_events_commands(api: Api) -> None:
    with receiver(always(200)) as hook:
        lead = api.agent("lead")
        chosen = inbots(
            api,
            "webhook",
            "set",
            "lead",
            hook.url,
            "--events",
            "message.acknowledged,thread.closed",
            "--json",
        ).json()
        assert chosen["webhook_events"] == ["message.acknowledged", "thread.closed"]
        shown = ok(api, "webhook", "show", "lead").stdout
        assert "message.acknowledged, thread.closed" in shown
        assert_one_line_error(
            inbots(api, "webhook", "set", "lead", hook.url, "--events", "nope"), 1, "422"
        )
        worker = api.agent("worker")
        thread = lead.open_thread("Delegated", ["worker"])
        message_id = lead.send(thread["id"], "do it")["message"]["id"]
        worker.ok("POST", "/acks", json={"ids": [message_id], "outcome": "declined"})
        hook.wait_for(1)
        listed = inbots(api, "events", "list", "--json").json()
        (event,) = listed["items"]
        assert listed == api.ok("GET", "/events")
        assert (event["type"], event["recipient"], event["actor"]) == (
            "message.acknowledged",
            "lead",
            "worker",
        )
        assert "message.acknowledged" in ok(api, "events", "list").stdout
        detail = ok(api, "events", "show", event["id"]).stdout
        assert "declined" in detail and "Attempts" in detail
        again = inbots(api, "events", "redeliver", event["id"], "--json").json()
        assert again["publish_count"] == 2
        hook.wait_for(2)
    assert_one_line_error(inbots(api, "events", "show", "evt_nope"), 1, "not_found", "404")


def test_threads_post_show_close_dismiss(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    thread = alice.open_thread("Plan the launch", ["bob"], goal="A date")
    tid = thread["id"]

    listed = inbots(api, "threads", "list", "--json").json()
    assert listed == api.ok("GET", "/threads") and listed["items"][0]["id"] == tid
    assert "Plan the launch" in ok(api, "threads", "list").stdout
    second = api.open_thread("Second", ["bob"])["id"]
    one = inbots(api, "threads", "list", "--limit", "1", "--json").json()
    assert [t["id"] for t in one["items"]] == [second] and one["next_cursor"]
    assert "more: --all" in ok(api, "threads", "list", "--limit", "1", "--output", "table").stdout
    piped = ok(api, "threads", "list", "--limit", "1")  # tsv: the hint goes to stderr
    assert len(piped.stdout.splitlines()) == 2 and "more: --all" in piped.stderr
    every = inbots(api, "threads", "list", "--limit", "1", "--all", "--json").json()
    assert [t["id"] for t in every["items"]] == [second, tid] and every["next_cursor"] is None

    posted = inbots(
        api, "post", tid, "Ship on Friday", "--summary", "Friday", "--kind", "decision", "--json"
    ).json()
    assert posted["message"]["body"] == "Ship on Friday"
    assert posted["message"]["kind"] == "decision"
    assert {d["recipient"] for d in posted["deliveries"]} == {"alice", "bob"}
    assert "Posted msg_" in ok(api, "post", tid, "And bring cake").stdout

    detail = inbots(api, "threads", "show", tid, "--json").json()
    assert detail == api.ok("GET", f"/threads/{tid}")
    assert [m["body"] for m in detail["messages"]] == ["Ship on Friday", "And bring cake"]
    bob.inbox()  # bob's receipts move to delivered
    human = ok(api, "threads", "show", tid).stdout
    assert "Ship on Friday" in human and "operator" in human and "delivered" in human
    for delivery in posted["deliveries"]:
        assert delivery["id"] in human

    assert_one_line_error(inbots(api, "threads", "dismiss", tid), 1, "409")
    alice.ok("POST", f"/threads/{tid}/close-request", 202)
    assert inbots(api, "threads", "dismiss", tid, "--json").json()["status"] == "open"
    assert "is now closed" in ok(api, "threads", "close", tid).stdout
    assert api.ok("GET", f"/threads/{tid}")["status"] == "closed"
    assert inbots(api, "threads", "list", "--status", "closed", "--json").json()["items"][0][
        "id"
    ] == (tid)


def test_deliveries_list_follows_pages_with_all(api: Api) -> None:
    for name in ("ann", "ben", "cat"):
        api.agent(name)
    thread = api.open_thread("Fan out", ["ann", "ben", "cat"])
    api.send(thread["id"], "to everyone")
    everything = api.ok("GET", "/deliveries", params={"limit": 100})["items"]

    one_page = inbots(api, "deliveries", "list", "--limit", "1", "--json").json()
    assert len(one_page["items"]) == 1 and one_page["next_cursor"]
    assert one_page["items"] == everything[:1]
    every_page = inbots(api, "deliveries", "list", "--all", "--limit", "1", "--json").json()
    assert every_page == {"items": everything, "next_cursor": None}

    only_a2 = inbots(api, "deliveries", "list", "--agent", "ben", "--json").json()["items"]
    assert [d["recipient"] for d in only_a2] == ["ben"]
    table = ok(api, "deliveries", "list", "--thread", thread["id"]).stdout
    assert all(d["id"] in table for d in everything)


@pytest.mark.parametrize("settings_overrides", [STALLING])
def test_failed_and_stalled_deliveries_are_listed_shown_redelivered_and_watched(
    api: Api,
) -> None:
    with receiver(always(500, b"boom")) as hook:
        api.ok("POST", "/agents", 201, json={"name": "broken", "webhook_url": hook.url})
        api.agent("poller")
        thread = api.open_thread("Doomed", ["broken", "poller"])
        sent = api.send(thread["id"], "will fail")["deliveries"]
        ids = {d["recipient"]: d["id"] for d in sent}
        failed_id, stalled_id = ids["broken"], ids["poller"]
        assert wait_for(api, failed_id, lambda r: r["state"] == "failed")["state"] == "failed"
        assert wait_for(api, stalled_id, lambda r: r["state"] == "stalled")["state"] == "stalled"

        failed = inbots(api, "deliveries", "list", "--state", "failed", "--json").json()
        assert failed == api.ok("GET", "/deliveries", params={"state": "failed"})
        assert [d["id"] for d in failed["items"]] == [failed_id]

        shown = inbots(api, "deliveries", "show", failed_id, "--json").json()
        assert shown == api.delivery(failed_id)
        assert [a["reason"] for a in shown["attempts"]] == ["http_500"] * 4
        log = ok(api, "deliveries", "show", failed_id).stdout
        assert log.split("Attempts")[1].count("http_500") == 4 and "boom" in log

        requests_before = len(hook.requests)
        redelivered = inbots(api, "deliveries", "redeliver", failed_id, "--json").json()
        assert redelivered["id"] == failed_id
        after = wait_for(
            api, failed_id, lambda r: any(a["trigger"] == "redeliver" for a in r["attempts"])
        )
        assert any(a["trigger"] == "redeliver" for a in after["attempts"])
        assert len(hook.wait_for(requests_before + 1)) > requests_before

        frame = inbots(api, "watch", "--once", FORCE_COLOR="1", TERM="xterm-256color")
        assert frame.code == 0, frame.stderr
        lines = frame.stdout.splitlines()
        (failed_line,) = [line for line in lines if failed_id in line]
        (stalled_line,) = [line for line in lines if stalled_id in line]
        assert RED in failed_line and "failed" in failed_line
        assert YELLOW in stalled_line and "stalled" in stalled_line
        plain = ok(api, "watch", "--once", "--state", "failed").stdout
        assert failed_id in plain and stalled_id not in plain and "\x1b[" not in plain

        stats = inbots(api, "stats", "--json").json()
        assert stats["deliveries"]["failed"] == 1 and stats["deliveries"]["stalled"] == 1
        assert stats["deliveries"]["total"] == 2
        assert stats["agents"]["total"] == 2 and stats["threads"]["open"] == 1
        assert stats["deliveries"] == api.ok("GET", "/stats")["deliveries"]
        shown = ok(api, "stats").stdout
        assert "failed 1" in shown
        assert "last sweep" in shown and "broker" in shown


def test_watch_stops_cleanly_on_ctrl_c(api: Api) -> None:
    watcher = subprocess.Popen(
        [str(INBOTS), "watch", "--interval", "0.2"],
        env=cli_env(api),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Ctrl-C once it is watching (the first frame is out), not while Python is still starting.
    assert watcher.stdout is not None
    first = ""
    deadline = time.monotonic() + 20
    while "Recent deliveries" not in first and time.monotonic() < deadline:
        first += watcher.stdout.readline()
    time.sleep(0.5)  # a few refreshes
    watcher.send_signal(signal.SIGINT)
    stdout, stderr = watcher.communicate(timeout=10)
    assert watcher.returncode == 0, stderr
    assert "Traceback" not in stderr and "Recent deliveries" in first + stdout


def test_errors_are_one_line_with_an_exit_code_per_kind(api: Api) -> None:
    missing = inbots(api, "deliveries", "show", "dlv_nope")
    assert_one_line_error(missing, 1, "not_found", "404")
    bad_state = inbots(api, "deliveries", "list", "--state", "lost")
    assert_one_line_error(bad_state, 1, "validation_error", "state")

    wrong = inbots(api, "agents", "list", INBOTS_OPERATOR_TOKEN="ops_not_a_real_token")
    assert_one_line_error(wrong, 4, "unauthorized", "401")
    sneaky = api.agent("sneaky")
    agent_key = sneaky.token
    # An agent key is refused before any request: the desk is the operator's alone (inbox and
    # reply would otherwise have worked on the agent's own mail, as the agent).
    thread = api.open_thread("For sneaky", ["sneaky"])["id"]
    sent = api.send(thread, "hello")
    to_sneaky = sent["message"]["id"]
    for args in (("stats",), ("inbox",), ("reply", to_sneaky, "posted as sneaky?")):
        as_agent = inbots(api, *args, INBOTS_OPERATOR_TOKEN=agent_key)
        assert_one_line_error(as_agent, 4, "agent key", "ops_")
    assert [m["sender"] for m in api.ok("GET", f"/threads/{thread}")["messages"]] == ["operator"]
    assert api.delivery(sent["deliveries"][0]["id"])["delivered_at"] is None  # never listed
    assert agent_key not in wrong.stderr

    nowhere = f"http://127.0.0.1:{free_port()}"
    assert_one_line_error(inbots(api, "stats", "--url", nowhere), 3, nowhere)
    with receiver(always(500, b"down")) as broken:
        failing = inbots(api, "deliveries", "redeliver", "dlv_x", "--url", f"{broken.url[:-5]}")
    assert_one_line_error(failing, 3, "500")

    assert_one_line_error(inbots(None, "agents", "list"), 2, "INBOTS_OPERATOR_TOKEN")
    assert_one_line_error(inbots(api, "deliveries", "list", "--limit", "0"), 2, "--limit")
    assert_one_line_error(inbots(api, "stats", "--url", "ftp://x"), 2, "INBOTS_URL")
    assert_one_line_error(inbots(api, "stats", "--url", "http://[::1"), 2, "INBOTS_URL")
    garbled = inbots(api, "stats", INBOTS_OPERATOR_TOKEN="ops_köln token")
    assert_one_line_error(garbled, 2, "INBOTS_OPERATOR_TOKEN")
    assert_one_line_error(inbots(api, "agents", "lst"), 2, "No such command")


def test_url_and_token_options_override_the_environment(api: Api) -> None:
    run = inbots(None, "stats", "--json", "--url", api.base_url, "--token", api.token)
    assert run.json()["agents"]["total"] == 0


def test_tokens_create_list_revoke(api: Api) -> None:
    created = inbots(api, "tokens", "create", "--label", "ci", "--json").json()
    assert created["label"] == "ci" and created["token"].startswith("ops_")
    shown = ok(api, "tokens", "create", "--label", "laptop")
    assert "shown once" in shown.stdout
    laptop_token = next(w for w in shown.stdout.split() if w.startswith("ops_"))

    listed = ok(api, "tokens", "list", "--output", "table")
    assert "ci" in listed.stdout and "laptop" in listed.stdout and "(this one)" in listed.stdout
    assert created["token"] not in listed.stdout and laptop_token not in listed.stdout
    piped = tsv_rows(ok(api, "tokens", "list").stdout)
    assert [(t["label"], t["current"]) for t in piped][1:] == [("ci", "false"), ("laptop", "false")]
    assert created["token"] not in str(piped) and laptop_token not in str(piped)
    items = inbots(api, "tokens", "list", "--json").json()["items"]
    assert [t["label"] for t in items] == ["minted with the workspace", "ci", "laptop"]

    revoked = ok(api, "tokens", "revoke", created["id"])
    assert revoked.stdout.strip() == f"Revoked operator token {created['id']}."
    gone = inbots(api, "agents", "list", INBOTS_OPERATOR_TOKEN=created["token"])
    assert_one_line_error(gone, 4, "unauthorized", "401")
    assert inbots(api, "tokens", "list", "--json").json()["items"][1]["revoked_at"]

    # Rotation: the laptop token retires the first one; then it is the last and stays.
    first = items[0]["id"]
    ok(api, "tokens", "revoke", first, "--token", laptop_token)
    last = inbots(api, "tokens", "revoke", items[2]["id"], "--token", laptop_token)
    assert_one_line_error(last, 1, "conflict", "last live operator token", "409")
    assert_one_line_error(inbots(api, "tokens", "revoke", "otk_nope"), 4, "401")
    missing = inbots(api, "tokens", "revoke", "otk_nope", "--token", laptop_token)
    assert_one_line_error(missing, 1, "not_found", "404")


# ---------------------------------------------------------------------------------------------
# Output formats. Issue 9: at 80 columns `inbots agents list | cat` folded `implementer` onto two
# lines, so grep and scripts broke. Piped output never wraps: lists print tab-separated values.

# Names as long as a username may be (32), so an 80-column table would fold them.
LONG_NAMES = ("implementer-of-the-release-plan1", "reviewer-of-every-migration-ok22")
HOOKED = "watcher-of-stalled-deliveries-03"
LONG_TITLE = "Plan the release of version two with every reviewer and the implementer, in full"
# A tab, a line break, a backslash and a leading quote: what a tsv writer must not let through.
AWKWARD_TITLE = '"Quoted" plan\twith a tab,\na line break and a back\\slash'
LONG_BODY = "Friday, with cake. " + " ".join(f"step-{n}" for n in range(60))
AT_80 = {"COLUMNS": "80"}  # what a pipe gets without COLUMNS: Rich then assumes 80

LISTS = {  # command -> (API path, the fields each line must hold whole)
    "agents": ("/agents", ("id", "username", "webhook_url")),
    "threads": ("/threads", ("id", "opened_by")),
    "deliveries": ("/deliveries", ("id", "recipient")),
    "tokens": ("/tokens", ("id", "label")),
}


def long_workspace(api: Api) -> None:
    """Agents, threads, deliveries and tokens whose cells are wider than an 80-column table."""
    for name in LONG_NAMES:
        api.agent(name, description="Implements and reviews the long release plan, step by step")
    hook = f"http://127.0.0.1:9/hooks/{HOOKED}/notifications-for-the-whole-team"
    api.ok("POST", "/agents", 201, json={"name": HOOKED, "webhook_url": hook})
    thread = api.open_thread(LONG_TITLE, list(LONG_NAMES))
    api.send(thread["id"], LONG_BODY)
    api.open_thread(AWKWARD_TITLE, [LONG_NAMES[0]])
    api.ok("POST", "/tokens", 201, json={"label": "the-continuous-integration-runner-of-team-b"})


def tsv_cell(value: Any) -> str:
    """What docs/cli.md promises a tsv cell is, written again independently."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(tsv_cell(v) for v in value)
    text = str(value).replace("\\", "\\\\")
    return text.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def steady(record: dict[str, Any]) -> dict[str, Any]:
    """A record less what moves between two calls (each call uses the operator token)."""
    return {k: v for k, v in record.items() if k not in ("last_used_at", "last_seen_at")}


def tsv_rows(stdout: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(stdout), delimiter="\t"))


def test_piped_lists_print_one_line_per_row_with_every_cell_whole(api: Api) -> None:
    long_workspace(api)
    for command, (path, whole) in LISTS.items():
        items = api.ok("GET", path)["items"]
        piped = ok_at(api, command, "list").stdout  # tsv, the default off a terminal
        assert_one_line_per_item(piped, items, whole)
        assert len(piped.splitlines()) == len(items) + 1  # a header line, then one per item
        table = ok_at(api, command, "list", "--output", "table").stdout
        assert_one_line_per_item(table, items, whole)
        assert "\t" not in table


def assert_one_line_per_item(
    stdout: str, items: list[dict[str, Any]], whole: tuple[str, ...]
) -> None:
    lines = stdout.splitlines()
    for item in items:
        (line,) = [line for line in lines if item["id"] in line]
        for field in whole:
            assert item[field] is None or item[field] in line, (field, line)
        if item.get("title") == LONG_TITLE:
            assert LONG_TITLE in line


def ok_at(api: Api, *args: str) -> Run:
    """Run with stdout to a pipe and an 80-column environment, as `… | cat` does."""
    run = inbots(api, *args, **AT_80)
    assert run.code == 0, (run.code, run.stderr)
    return run


ID = re.compile(r"\b[a-z]{2,4}_[0-9a-z]{26}\b")


@pytest.mark.parametrize("width", [100, 120])
def test_tables_on_a_terminal_keep_ids_whole_and_every_row_on_one_line(
    api: Api, width: int
) -> None:
    """Issue 25: at 120 columns `inbots pending` split its msg_ ids, and at 100 folded titles
    over five lines. On a terminal of any width a row is one line, every id in it whole; the
    rest of its text is cut with an ellipsis."""
    long_workspace(api)
    api.ok("PUT", "/policy", json={"approval": {"kinds": ["task"]}})
    worker = api.agent("worker")
    thread = api.open_thread(LONG_TITLE, ["worker"])
    worker.send(thread["id"], LONG_BODY, summary=LONG_TITLE)  # the operator's mail
    worker.send(thread["id"], LONG_BODY, kind="task", summary=LONG_TITLE)  # held
    shown: dict[str, tuple[Callable[[list[Any]], Any], tuple[str, ...]]] = {
        "/agents": (views.agents_table, ("id",)),  # the ids each row shows
        "/threads": (views.threads_table, ("id",)),
        "/deliveries": (views.deliveries_table, ("id",)),
        "/tokens": (views.tokens_table, ("id",)),
        "/inbox": (views.inbox_table, ("message_id",)),
        "/approvals": (views.approvals_table, ("id",)),
    }
    for path, (view, id_fields) in shown.items():
        items = api.ok("GET", path)["items"]
        assert items, path
        terminal = Console(width=width, file=io.StringIO(), color_system=None)
        terminal.print(view(items))
        lines = terminal.file.getvalue().splitlines()  # type: ignore[attr-defined]
        assert all(len(line) <= width for line in lines), (path, lines)
        for item in items:
            key = item.get(id_fields[0]) or item["message_id"]  # (a held message: its id)
            assert ID.fullmatch(key)
            assert len([line for line in lines if key in line]) == 1, (path, key, lines)
        assert len([line for line in lines if ID.search(line)]) == len(items), (path, lines)
        if path in ("/threads", "/inbox", "/approvals"):
            assert "…" in "".join(lines), (path, lines)  # the long titles were cut, not folded


def test_lists_as_tsv_and_json(api: Api) -> None:
    long_workspace(api)
    for command, (path, _) in LISTS.items():
        answer = api.ok("GET", path)
        items = [steady(item) for item in answer["items"]]
        as_tsv = ok_at(api, command, "list", "--output", "tsv").stdout
        assert as_tsv.splitlines()[0].split("\t") == list(answer["items"][0])  # API names, order
        rows = [steady(row) for row in tsv_rows(as_tsv)]
        assert rows == [{k: tsv_cell(v) for k, v in item.items()} for item in items]
        as_json = inbots(api, command, "list", "--output", "json").json()
        assert [steady(item) for item in as_json["items"]] == items
        if command == "threads":
            (awkward,) = [row for row in rows if "Quoted" in row["title"]]
            assert awkward["title"] == tsv_cell(AWKWARD_TITLE)
            assert awkward["participants"] == f"{LONG_NAMES[0]},operator"
    assert inbots(api, "agents", "list", "--json").json() == api.ok("GET", "/agents")


def test_show_commands_never_wrap_when_piped_and_speak_tsv_and_json(api: Api) -> None:
    long_workspace(api)
    hooked = api.ok("GET", f"/agents/{HOOKED}")
    shown = ok_at(api, "agents", "show", HOOKED).stdout
    (webhook_line,) = [line for line in shown.splitlines() if line.startswith("webhook")]
    assert hooked["webhook_url"] in webhook_line

    thread = next(t for t in api.ok("GET", "/threads")["items"] if t["title"] == LONG_TITLE)
    receipts = api.ok("GET", f"/threads/{thread['id']}")["messages"][0]["deliveries"]
    shown = ok_at(api, "threads", "show", thread["id"]).stdout
    assert all(word in shown for word in LONG_BODY.split())  # wrapped, not cut at the border
    lines = shown.splitlines()
    for receipt in receipts:
        (line,) = [line for line in lines if receipt["id"] in line]
        assert receipt["recipient"] in line and receipt["state"] in line

    (row,) = tsv_rows(ok_at(api, "agents", "show", HOOKED, "--output", "tsv").stdout)
    assert row["id"] == hooked["id"] and row["webhook_url"] == hooked["webhook_url"]
    (row,) = tsv_rows(ok_at(api, "deliveries", "show", receipts[0]["id"], "-o", "tsv").stdout)
    assert row["id"] == receipts[0]["id"] and "attempts" not in row
    (row,) = tsv_rows(ok_at(api, "stats", "--output", "tsv").stdout)
    assert row["deliveries.total"] == "2" and row["agents.total"] == "3"
    assert inbots(api, "stats", "--output", "json").json()["agents"]["total"] == 3
    detail = inbots(api, "threads", "show", thread["id"], "--output", "json").json()
    assert detail["id"] == thread["id"]


def test_output_option_errors(api: Api) -> None:
    assert_one_line_error(inbots(api, "agents", "list", "--output", "yaml"), 2, "--output")
    both = inbots(api, "agents", "list", "--json", "--output", "tsv")
    assert_one_line_error(both, 2, "--json", "--output")
    same = inbots(api, "agents", "list", "--json", "--output", "json").json()
    assert same == api.ok("GET", "/agents")


def test_a_piped_table_keeps_a_row_on_one_line_whatever_the_body_holds(api: Api) -> None:
    """Line breaks and tabs in a body (and a long summary) never fold a row of a piped table."""
    worker = api.agent("worker")
    thread = api.open_thread("Odd bodies", ["worker"])["id"]
    summary = "A summary long enough to take most of a line at eighty columns, and then more"
    worker.send(thread, "first line\nsecond\twith a tab\r\nthird", summary=summary)
    table = ok_at(api, "inbox", "--bodies", "--output", "table").stdout
    (row,) = [line for line in table.splitlines() if "first line" in line]
    assert "second with a tab third" in row, table
    assert "\t" not in table, table


def test_the_operators_desk_inbox_reply_ack_and_watch_for_operator(api: Api) -> None:
    worker = api.agent("worker")
    thread = api.open_thread("Nightly build", ["worker"])
    asked = api.send(thread["id"], "Please rebuild the index")
    question = worker.send(thread["id"], "Which index?", kind="question", priority="urgent")
    update = worker.send(thread["id"], "Started anyway", kind="update")

    listed = ok(api, "inbox", "--output", "tsv").stdout.splitlines()
    header, *rows = [line.split("\t") for line in listed]
    ids = [row[header.index("message_id")] for row in rows]
    assert ids == [question["message"]["id"], update["message"]["id"]]  # urgent first

    table = ok(api, "inbox", "--bodies", "--output", "table").stdout
    assert "Which index?" in table and "Started anyway" in table and "URGENT" in table

    replied = ok(api, "reply", question["message"]["id"], "The search index", "--ack", "done")
    assert "Posted msg_" in replied.stdout and "worker" in replied.stdout
    (answer,) = worker.inbox()["items"][1:]
    assert answer["sender"] == "operator" and answer["summary"] == "The search index"
    assert (
        worker.ok("GET", f"/messages/{answer['message_id']}")["message"]["reply_to"]
        == (question["message"]["id"])
    )
    assert worker.inbox()["items"][0]["message_id"] == asked["message"]["id"]

    acked = ok(api, "ack", update["message"]["id"], "--declined", "--note", "not needed")
    assert f"acknowledged: {update['message']['id']}" in acked.stdout
    assert ok(api, "inbox", "--output", "json").json()["items"] == []
    again = ok(api, "inbox", "--status", "acked", "--output", "json").json()["items"]
    assert {i["message_id"] for i in again} == {question["message"]["id"], update["message"]["id"]}

    frame = ok(api, "watch", "--once", "--for", "operator").stdout
    assert "for operator" in frame and "worker" not in frame.split("Recent deliveries")[1]
    assert question["message"]["id"] not in frame  # the table lists delivery ids
    delivery_ids = {d["id"] for d in update["deliveries"] if d["recipient"] == "operator"}
    assert delivery_ids and all(d in frame for d in delivery_ids)

    missing = inbots(api, "reply", "msg_nope", "hello")
    assert_one_line_error(missing, 1, "not_found")


def test_reply_checks_its_ack_before_posting_and_ack_exits_1_for_unknown_ids(api: Api) -> None:
    """A bad --ack, or an --ack of a message that was not sent to the operator, is refused
    before the reply is posted (so running it again cannot post twice); ack of an id that is
    not the operator's mail says so on stdout and stderr and exits 1."""
    worker, other = api.agent("worker"), api.agent("other")
    to_operator = api.open_thread("Desk", ["worker"])
    question = worker.send(to_operator["id"], "Which index?")["message"]["id"]
    between = worker.open_thread("Between agents", ["other"])
    elsewhere = worker.send(between["id"], "for other")["message"]["id"]
    other.ok("GET", "/me")

    def replies() -> int:
        messages = api.ok("GET", f"/threads/{to_operator['id']}")["messages"]
        return len([m for m in messages if m["sender"] == "operator"])

    assert_one_line_error(inbots(api, "reply", question, "x", "--ack", "bogus"), 2, "--ack")
    assert replies() == 0
    assert_one_line_error(inbots(api, "reply", elsewhere, "x", "--ack", "done"), 1, "not sent")
    assert api.ok("GET", f"/threads/{between['id']}")["messages"][-1]["body"] == "for other"

    acked = inbots(api, "ack", question, "dlv_nope")
    assert acked.code == 1, acked
    assert f"acknowledged: {question}" in acked.stdout and "not found: dlv_nope" in acked.stdout
    assert acked.stderr.startswith("inbots: not found: dlv_nope"), acked.stderr
    assert ok(api, "ack", question).stdout.startswith("already acknowledged")


@pytest.mark.parametrize(
    "settings_overrides", [{"ttl_min_seconds": 1, "renotify_interval_seconds": 0.2}]
)
def test_acking_the_operators_expired_mail_says_so_and_fails(api: Api) -> None:
    """Mail to the operator that expired unacknowledged is no longer theirs: ``inbots ack``
    shows it as expired beside what it did acknowledge, and a script sees exit 1."""
    worker = api.agent("worker")
    desk = api.open_thread("Desk", ["worker"])["id"]
    stale = worker.send(desk, "Still there?", ttl_seconds=1)
    fresh = worker.send(desk, "Kept")["message"]["id"]
    stale_id = stale["message"]["id"]
    expired = wait_for(api, stale["deliveries"][0]["id"], lambda r: r["state"] == "expired")
    assert expired["state"] == "expired"
    acked = inbots(api, "ack", stale_id, fresh)
    assert acked.code == 1, acked
    assert f"acknowledged: {fresh}" in acked.stdout
    assert f"expired (no longer yours): {stale_id}" in acked.stdout
    assert acked.stderr.startswith(f"inbots: expired, no longer yours: {stale_id}"), acked.stderr
    assert api.delivery(stale["deliveries"][0]["id"])["state"] == "expired"


def test_inbox_wait_long_polls_for_the_operators_mail(api: Api) -> None:
    worker = api.agent("worker")
    thread = api.open_thread("Nightly build", ["worker"])
    api.send(thread["id"], "go")
    env = cli_env(api)
    waiting = subprocess.Popen(
        [str(INBOTS), "inbox", "--wait", "20", "--output", "json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)
    assert waiting.poll() is None
    reply = worker.send(thread["id"], "done")
    out, err = waiting.communicate(timeout=15)
    assert waiting.returncode == 0, err
    items = json.loads(out)["items"]
    assert [i["message_id"] for i in items] == [reply["message"]["id"]]
