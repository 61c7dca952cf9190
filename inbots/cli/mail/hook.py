"""``inbots mail hook``: what a harness hook runs before a session or a prompt (Claude Code's
``SessionStart`` and ``UserPromptSubmit``, Codex CLI's, Gemini CLI's ``SessionStart`` and
``BeforeAgent``: ``docs/harnesses.md``).

Standard input is the hook's JSON event; standard output is what the harness adds to the
agent's context:

- nothing at all when no mail waits, or when anything goes wrong: the server is down or slow
  (one request, :data:`TIMEOUT` seconds at most), the key is missing or refused (one line on
  stderr says so). It always exits 0, so it never holds up or fails the harness;
- when mail waits, one block of at most :data:`BLOCK_MAX` characters: how many messages, how many
  urgent, the first three senders and summaries, and the command that reads them;
- with ``--json``, that block as hook JSON (``hookSpecificOutput.additionalContext``, with the
  event's ``hookEventName``): Gemini CLI reads only JSON on stdout.

Its start-up is part of every prompt, so it imports no model: :func:`inbots.client.glance`
(httpx and the standard library) makes its one request. ``inbots mail hook`` reaches this module
without Typer building the other commands (``inbots.cli.main.main``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import IO, Any

from inbots import __version__
from inbots.kit.text import cut

DEFAULT_URL = "http://127.0.0.1:8000"
TIMEOUT = 2.0  # seconds for the one request; a hook must not hold up its harness
STDIN_WAIT = 1.0  # seconds to wait for the event on stdin (harnesses write it at once)
PAGE = 20  # inbox items asked for: the urgent count is exact unless 20 urgent ones wait
SHOWN = 3  # senders and summaries in the block
BLOCK_MAX = 400  # characters
READ_THEM = "Read them: inbots mail check (inbots mail --help for the rest)."


def fast(args: list[str]) -> int | None:
    """``inbots mail hook [--json]`` (``args``: what follows ``hook``) run at once, without
    Typer, which would build every ``inbots`` command (importing pydantic for their options) to
    run this one; None for anything else (``--help``, a typo), which Typer answers."""
    if all(arg == "--json" for arg in args):
        return run(json_output=bool(args))
    return None


def run(
    *,
    json_output: bool = False,
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Read the event, look at the inbox once, print the block or nothing. Returns 0."""
    out = stdout or sys.stdout
    event = read_event(stdin or sys.stdin)
    page = look(stderr or sys.stderr)
    if page is None or not page.get("items"):
        return 0
    text = block(page)
    if json_output:
        output: dict[str, Any] = {"additionalContext": text}
        if isinstance(event.get("hook_event_name"), str):
            output = {"hookEventName": event["hook_event_name"], **output}
        text = json.dumps({"hookSpecificOutput": output}, ensure_ascii=False)
    out.write(text + "\n")
    out.flush()
    return 0


def read_event(stream: IO[str]) -> dict[str, Any]:
    """The hook's JSON event, or ``{}``: from a terminal, an empty stream, something that is
    not a JSON object, or a stream still open after :data:`STDIN_WAIT` seconds."""
    try:
        if stream.isatty():
            return {}
        text = _read_within(stream, STDIN_WAIT)
        event = json.loads(text) if text.strip() else {}
    except (OSError, ValueError):
        return {}
    return event if isinstance(event, dict) else {}


def _read_within(stream: IO[str], seconds: float) -> str:
    """All of ``stream`` up to its end, waiting at most ``seconds`` for more to come."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's StringIO)
        return stream.read()
    import select

    chunks: list[bytes] = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def look(stderr: IO[str]) -> dict[str, Any] | None:
    """The inbox's first page, or None when it cannot be had (said on ``stderr``, except for a
    server that is down: that is no news to the agent's prompt)."""
    from inbots.client import InbotsError, TransportError, glance

    url = os.environ.get("INBOTS_URL") or DEFAULT_URL
    key = os.environ.get("INBOTS_API_KEY", "")
    if not key.startswith("agt_"):
        stderr.write("inbots mail hook: INBOTS_API_KEY holds no agent key (agt_…); silent.\n")
        return None
    try:
        return glance(
            url,
            key,
            limit=PAGE,
            timeout=TIMEOUT,
            headers={"User-Agent": f"inbots-mail-hook/{__version__}"},
        )
    except TransportError:
        return None
    except InbotsError as exc:
        if exc.status < 500:
            stderr.write(f"inbots mail hook: {exc.message} (HTTP {exc.status}); silent.\n")
        return None
    except ValueError as exc:  # a URL httpx cannot use
        stderr.write(f"inbots mail hook: {exc}; silent.\n")
        return None


def block(page: dict[str, Any]) -> str:
    """The few lines that tell the agent what waits, at most :data:`BLOCK_MAX` characters."""
    items = page["items"]
    waiting = max(int(page.get("waiting") or 0), len(items))
    urgent = sum(1 for item in items if item.get("priority") == "urgent")
    head = f"Inbots: {waiting} messages wait for you"
    if waiting == 1:
        head = "Inbots: 1 message waits for you"
    if urgent:
        exact = not (page.get("more") and urgent == len(items))
        head += f" ({'' if exact else 'at least '}{urgent} urgent)"
    head += ":"
    shown = items[:SHOWN]
    rest = waiting - len(shown)
    tail = ([f"… and {rest} more."] if rest > 0 else []) + [READ_THEM]
    fixed = sum(len(line) + 1 for line in (head, *tail))
    room = (BLOCK_MAX - fixed) // max(len(shown), 1) - 1  # each item's line, its newline apart
    entries = [_entry(item, room) for item in shown]
    text = "\n".join([head, *entries, *tail])
    return text if len(text) <= BLOCK_MAX else text[: BLOCK_MAX - 1] + "…"


def _entry(item: dict[str, Any], room: int) -> str:
    sender = cut(_flat(str(item.get("sender") or "someone")), 40)
    urgent = ", urgent" if item.get("priority") == "urgent" else ""
    lead = f"- {sender}{urgent}: "
    return lead + cut(_flat(str(item.get("summary") or "")), max(room - len(lead), 10))


def _flat(text: str) -> str:
    return " ".join(text.split())
