"""``inbots mail``, the agent CLI, and ``inbots mail hook``, against a real server.

The real ``inbots`` console script runs as a subprocess where the process is what is tested: the
round trip and its exit codes, ``--help``, and the hook as each harness runs it (its JSON event
on stdin, what it prints on stdout). The rest calls ``inbots.cli.main.main`` in this process
(the same code path, without a second of CPU per command). SQLite only: the CLI is an HTTP
client."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import httpx
import pytest

from inbots.cli.mail import hook, lines
from inbots.client import Client, Inbox, InboxItem, glance
from tests.conftest import free_port
from tests.helpers import Api, Caller
from tests.receivers import FAST
from tests.test_cli import Run, in_process, inbots


@pytest.fixture
def backend() -> str:
    """SQLite only: these drive the services the API tests cover on both databases."""
    return "sqlite"


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return dict(FAST)


def as_agent(caller: Caller | None, url: str, **extra: str) -> dict[str, str]:
    """The agent CLI's environment: the server and the agent's key."""
    env = {"INBOTS_URL": url, **extra}
    if caller is not None:
        env["INBOTS_API_KEY"] = caller.token
    return env


def mail_cli(api: Api, caller: Caller, *args: str) -> Run:
    """The real console script, as ``caller``."""
    return inbots(None, "mail", *args, **as_agent(caller, api.base_url))


@pytest.fixture
def mail(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """``inbots mail …`` in this process, through ``main()`` (errors and exit codes included)."""

    def run(api: Api, caller: Caller, *args: str, stdin: str | None = None) -> Run:
        env = as_agent(caller, api.base_url)
        return in_process(monkeypatch, capsys, env, "mail", *args, stdin=stdin)

    return run


def one_line_error(run: Run, code: int, *fragments: str) -> None:
    assert run.code == code, (run.code, run.stdout, run.stderr)
    assert "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert run.stderr.startswith("inbots: ")
    for fragment in fragments:
        assert fragment in run.stderr, run.stderr


# ---------------------------------------------------------------------------------------------
# the round trip and the exit codes, with the real console script


def test_an_agent_cli_round_trip(api: Api) -> None:
    """send, check --json, ack, and an ack the server refuses (exit 1, its sentence on stderr)."""
    alice, bob = api.agent("alice"), api.agent("bob")

    sent = mail_cli(api, alice, "send", "--to", "bob", "--kind", "task", "Rebase PR 7.", "--json")
    answer = sent.json()
    assert answer["message"]["body"] == "Rebase PR 7." and answer["message"]["kind"] == "task"
    assert [d["recipient"] for d in answer["deliveries"]] == ["bob"]

    page = mail_cli(api, bob, "check", "--json").json()
    assert page == bob.inbox() | {"items": page["items"]}  # the server's JSON, key for key
    (item,) = page["items"]
    assert item["message_id"] == answer["message"]["id"] and item["sender"] == "alice"

    acked = mail_cli(api, bob, "ack", item["delivery_id"], "--note", "done, pushed")
    assert (acked.code, acked.stderr) == (0, ""), acked
    assert acked.stdout == f"Acknowledged: {item['delivery_id']}\n"
    receipt = api.delivery(item["delivery_id"])
    assert (receipt["state"], receipt["outcome"], receipt["note"]) == (
        "acknowledged",
        "done",
        "done, pushed",
    )

    refused = mail_cli(api, bob, "ack", "dlv_nope")
    one_line_error(refused, 1, "not found: dlv_nope")


def test_an_unreachable_server_exits_3_and_bad_usage_exits_2(api: Api) -> None:
    alice = api.agent("alice")
    down = inbots(None, "mail", "check", **as_agent(alice, f"http://127.0.0.1:{free_port()}"))
    one_line_error(down, 3, "could not reach Inbots at http://127.0.0.1:")
    assert down.stdout == ""

    usage = mail_cli(api, alice, "send", "no recipient")
    one_line_error(usage, 2, "--to NAME[,NAME]", "--thread ID")


def test_mail_help_teaches_the_whole_loop_in_under_40_lines(api: Api) -> None:
    shown = inbots(None, "mail", "--help")
    assert (shown.code, shown.stderr) == (0, "")
    guide = shown.stdout.splitlines()
    assert len(guide) < 40, len(guide)
    assert max(len(line) for line in guide) <= 100
    for command in ("check", "read", "reply", "ack", "wait", "send", "sent", "hook"):
        assert f"inbots mail {command}" in shown.stdout, command
    for word in ("INBOTS_API_KEY", "INBOTS_URL", "--ack done", "--json", "Exit codes"):
        assert word in shown.stdout, word


# ---------------------------------------------------------------------------------------------
# each command's answer, in this process


def test_check_lines_are_whole_and_show_a_body_once(api: Api, mail: Any) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    long_title = "A thread title that is long enough that a terminal would wrap it " * 3
    thread = alice.open_thread(long_title, ["bob"])
    alice.send(thread["id"], "Ship it?", kind="question", priority="urgent")
    alice.send(thread["id"], "line one\nline two", summary="Two lines")

    shown = mail(api, bob, "check", "--bodies")
    assert shown.code == 0 and shown.stderr == ""
    head, urgent, normal, *body = shown.stdout.splitlines()
    assert head == "2 waiting, 1 urgent:"
    assert urgent.endswith(f"URGENT question from alice: Ship it? (thread: {long_title.strip()})")
    assert urgent.split()[0].startswith("dlv_")  # ids whole, first on the line
    assert "Ship it?" not in body  # a body the same as its summary is not printed twice
    assert normal.split(" ", 1)[1].startswith("update from alice: Two lines")
    assert body == ["    line one", "    line two"]

    nothing = mail(api, api.agent("carol"), "check")
    assert nothing.stdout == "No mail.\n"


def test_read_reply_with_ack_and_sent_say_what_became_of_the_mail(api: Api, mail: Any) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    task = alice.open_thread("Rebase", ["bob"])
    asked = alice.send(task["id"], "Please rebase PR 7.", kind="task")
    message_id = asked["message"]["id"]

    read = mail(api, bob, "read", message_id)
    assert read.code == 0, read
    head, blank, body, *rest = read.stdout.splitlines()
    assert head.startswith(f"{message_id} from alice, task, thread {task['id']}, ")
    assert (blank, body) == ("", "Please rebase PR 7.")
    assert any(line.startswith("your copy dlv_") and ": fetched" in line for line in rest)

    replied = mail(api, bob, "reply", message_id, "-", "--ack", "done", stdin="Rebased.\n")
    assert replied.code == 0 and replied.stderr == "", replied
    assert replied.stdout.startswith("Sent msg_") and "Acknowledged dlv_" in replied.stdout
    (copy,) = [d for d in asked["deliveries"] if d["recipient"] == "bob"]
    receipt = api.delivery(copy["id"])
    # One call (send with acknowledge): the reply's text is the acknowledgement's note.
    assert (receipt["state"], receipt["outcome"], receipt["note"]) == (
        "acknowledged",
        "done",
        "Rebased.",
    )
    history = alice.ok("GET", f"/threads/{task['id']}/messages")["items"]
    assert history[-1]["reply_to"] == message_id and history[-1]["body"] == "Rebased."

    sent = mail(api, alice, "sent")
    assert (
        f"{message_id} in {task['id']} \u201cPlease rebase PR 7.\u201d: bob acknowledged done"
        in (sent.stdout)
    )

    # --ack on a message that was not sent to you: refused before anything is posted.
    own = mail(api, alice, "reply", message_id, "Me too.", "--ack", "done")
    one_line_error(own, 1, "was not sent to you")
    assert len(alice.ok("GET", f"/threads/{task['id']}/messages")["items"]) == 2


def test_sent_says_why_a_message_was_rejected_and_what_a_worker_noted(api: Api, mail: Any) -> None:
    alice, bob, carol = api.agent("alice"), api.agent("bob"), api.agent("carol")
    working = alice.send(alice.open_thread("Build", ["carol"])["id"], "Build it.")
    carol.ok("POST", f"/deliveries/{working['deliveries'][0]['id']}/working", json={"note": "50%"})
    api.ok("PUT", "/policy", json={"approval": {"kinds": ["task"]}})
    held = mail(api, alice, "send", "--to", "bob", "--kind", "task", "Delete the old logs.")
    assert held.code == 0 and "held for the operator's approval" in held.stdout, held
    message_id = held.stdout.split()[1]
    api.ok("POST", f"/approvals/{message_id}/reject", json={"reason": "Logs are kept a year."})

    sent = mail(api, alice, "sent")
    assert sent.code == 0, sent
    assert "bob rejected by the operator: Logs are kept a year." in sent.stdout
    assert "carol working on it: 50%" in sent.stdout
    assert "None" not in sent.stdout
    assert bob.inbox()["items"] == []


def test_wait_returns_new_mail_and_receipts_of_yours(api: Api, mail: Any) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    sent = alice.send(alice.open_thread("Ping", ["bob"])["id"], "ping")
    waited = mail(api, bob, "wait", "--timeout", "1")
    assert waited.code == 0, waited
    assert waited.stdout.endswith("update from alice: ping (thread: Ping)\n")
    bob.ok(
        "POST", "/acks", json={"ids": [sent["message"]["id"]], "outcome": "done", "note": "pong"}
    )
    receipt = mail(api, alice, "wait", "--timeout", "1")
    assert f"receipt for {sent['message']['id']}: bob acknowledged done: pong" in receipt.stdout
    quiet = mail(api, bob, "wait", "--timeout", "1", "--json")
    assert json.loads(quiet.stdout)["items"] == []


def test_a_refused_key_is_exit_2_naming_the_variable(api: Api, mail: Any) -> None:
    bogus = Caller(api.client, "agt_not_a_key", "bogus")
    refused = mail(api, bogus, "check")
    one_line_error(refused, 2, "INBOTS_API_KEY was refused")
    operator = Caller(api.client, api.token, "operator")
    wrong = mail(api, operator, "check")
    one_line_error(wrong, 2, "INBOTS_API_KEY must be an agent key")


# ---------------------------------------------------------------------------------------------
# the hook


# Each harness's event, as it writes it on the hook's stdin (docs/harnesses.md).
CLAUDE_CODE = {
    "session_id": "0b6c8c4e-5a3f-4f1b-9d1e-2f3a4b5c6d7e",
    "transcript_path": "/home/dev/.claude/projects/app/0b6c8c4e.jsonl",
    "cwd": "/home/dev/app",
    "hook_event_name": "UserPromptSubmit",
    "prompt": "What is next?",
}
CODEX_CLI = {
    "session_id": "019d036d-c7fa-72d2-b6fd-78878bfe34e4",
    "transcript_path": None,
    "cwd": "/home/dev/app",
    "hook_event_name": "SessionStart",
    "model": "gpt-5-codex",
    "permission_mode": "default",
    "source": "startup",
}
GEMINI_CLI = {
    "session_id": "abc123",
    "transcript_path": "/home/dev/.gemini/tmp/chats/session.json",
    "cwd": "/home/dev/app",
    "hook_event_name": "BeforeAgent",
    "timestamp": "2026-12-03T10:30:00Z",
    "prompt": "What is next?",
}


def fill_inbox(api: Api) -> Caller:
    """Five messages from four senders for the reader, one urgent, with long names and
    summaries (so that the block has to cut them)."""
    reader = api.agent("reader")
    senders = [api.agent(name) for name in ("alice", "bob", "carol", "a-sender-with-a-long-name")]
    for i, sender in enumerate([*senders, senders[0]]):
        thread = sender.open_thread(f"Task {i}", ["reader"])
        text = f"Summary {i}: " + "the quick brown fox jumps over the lazy dog " * 4
        sender.send(thread["id"], text, priority="urgent" if i == 2 else "normal")
    return reader


def check_block(text: str) -> None:
    assert len(text) <= 400, len(text)
    head, first, second, third, *tail = text.splitlines()
    assert head == "Inbots: 5 messages wait for you (1 urgent):"
    assert first.startswith("- carol, urgent: Summary 2: the quick brown fox")  # urgent first
    assert second.startswith("- alice: Summary 0: ") and third.startswith("- bob: Summary 1: ")
    assert tail[-1].startswith("Read them: inbots mail check")


@pytest.mark.parametrize(
    ("harness", "event", "options"),
    [
        ("claude-code", CLAUDE_CODE, []),
        ("codex-cli", CODEX_CLI, []),
        ("gemini-cli", GEMINI_CLI, ["--json"]),
    ],
)
def test_each_harness_runs_the_hook(
    api: Api, harness: str, event: dict[str, Any], options: list[str]
) -> None:
    """The hook as the harness runs it: the event on stdin, what it injects on stdout."""
    reader = fill_inbox(api)
    done = hooked(api.base_url, reader, event, *options)
    assert (done.code, done.stderr) == (0, ""), done
    if harness == "gemini-cli":  # JSON only on stdout: the block is its additionalContext
        output = json.loads(done.stdout)["hookSpecificOutput"]
        assert output["hookEventName"] == "BeforeAgent"
        check_block(output["additionalContext"])
    else:  # plain stdout is added to the context
        check_block(done.stdout.rstrip("\n"))


def test_the_hook_is_silent_when_nothing_waits_or_the_server_is_down(api: Api) -> None:
    empty = hooked(api.base_url, api.agent("idle"), CLAUDE_CODE)
    assert (empty.code, empty.stdout, empty.stderr) == (0, "", "")

    started = time.monotonic()
    down = hooked(f"http://127.0.0.1:{free_port()}", api.agent("idle2"), CLAUDE_CODE)
    assert (down.code, down.stdout, down.stderr) == (0, "", "")
    assert time.monotonic() - started < 10


def hooked(url: str, caller: Caller, event: dict[str, Any], *options: str) -> Run:
    """``inbots mail hook`` as a harness runs it."""
    import subprocess

    from tests.test_cli import INBOTS, cli_env

    done = subprocess.run(
        [str(INBOTS), "mail", "hook", *options],
        input=json.dumps(event),
        env=cli_env(None, **as_agent(caller, url)),
        capture_output=True,
        text=True,
        timeout=30,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def test_the_hook_block_stays_under_400_characters_whatever_it_shows() -> None:
    def item(sender: str, summary: str, priority: str = "normal") -> dict[str, Any]:
        return {"sender": sender, "summary": summary, "priority": priority}

    huge = [item("s" * 64, "x" * 500, "urgent") for _ in range(20)]
    page = {"items": huge, "waiting": 1234, "more": True}
    text = hook.block(page)
    assert len(text) <= 400
    assert text.startswith("Inbots: 1234 messages wait for you (at least 20 urgent):")
    one = hook.block({"items": [item("alice", "Hi")], "waiting": 1, "more": False})
    assert one == (
        "Inbots: 1 message waits for you:\n- alice: Hi\n"
        "Read them: inbots mail check (inbots mail --help for the rest)."
    )


def test_the_hook_reads_no_more_than_its_event(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream that stays open (no harness closed it) is given up after a moment."""
    import os

    monkeypatch.setattr(hook, "STDIN_WAIT", 0.2)
    read_end, write_end = os.pipe()
    os.write(write_end, b'{"hook_event_name": "SessionStart"}')
    with os.fdopen(read_end) as stream:
        started = time.monotonic()
        assert hook.read_event(stream) == {"hook_event_name": "SessionStart"}
        assert time.monotonic() - started < 2
    os.close(write_end)
    assert hook.read_event(io.StringIO("not json")) == {}
    assert hook.read_event(io.StringIO("[1, 2]")) == {}


# ---------------------------------------------------------------------------------------------
# inbots.client.glance, the hook's one request


def test_glance_asks_what_client_inbox_asks(api: Api) -> None:
    """The same request as ``Client.inbox(limit)`` (its path, query and headers are the
    client's), answered as the server's JSON."""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"items": [], "returned": 0, "waiting": 0, "more": False})

    transport = httpx.MockTransport(answer)
    page = glance("http://inbots.test", "agt_k", limit=20, transport=transport)
    with Client("http://inbots.test", "agt_k", transport=transport) as client:
        client.inbox(20)
    glanced, listed = seen
    assert page == {"items": [], "returned": 0, "waiting": 0, "more": False}
    assert (glanced.method, glanced.url) == (listed.method, listed.url)
    assert dict(glanced.headers) == dict(listed.headers)


def test_glance_over_the_real_server(api: Api) -> None:
    """One connection of its own (http.client), the page the client would get."""
    alice, bob = api.agent("alice"), api.agent("bob")
    alice.send(alice.open_thread("Hello", ["bob"])["id"], "hello", priority="urgent")
    page = glance(api.base_url, bob.token, limit=5)
    assert [i["summary"] for i in page["items"]] == ["hello"] and page["waiting"] == 1
    with Client(api.base_url, bob.token) as client:
        assert page == client.inbox(5).model_dump(mode="json", exclude_unset=True)
        inbox = client.inbox(5)
    assert lines.inbox(Inbox.model_validate(page)) == lines.inbox(inbox)
    assert isinstance(inbox.items[0], InboxItem)
