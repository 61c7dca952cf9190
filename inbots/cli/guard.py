"""``inbots guard``: a git ``pre-commit`` hook that turns reservations (coordination.md §1) into a
check before each commit.

``inbots guard install [--repo DIR]`` writes ``.git/hooks/pre-commit`` (the path git names for
the repository: ``git rev-parse --git-path hooks``), marked by :data:`MARK`; it refuses to
overwrite a hook it did not write, and ``inbots guard uninstall`` removes only its own. The hook
runs :func:`check` with the interpreter that installed it (``python -P -m inbots.cli.guard
check``; only its exit 1, a refusal, blocks the commit):
it lists the staged paths (``git diff --cached --name-only``) and asks the server, as the agent
whose key is in ``INBOTS_API_KEY``, whether another agent holds an exclusive reservation on any
of them (``POST /v1/reservations/check``, read-only). Conflicts: it prints who holds which path
until when and exits 1, so git refuses the commit. ``INBOTS_GUARD=off`` skips it; no key, a
server it cannot reach or an answer it cannot use is a warning on stderr, never a block.

A hook runs on every commit, so this module imports only httpx and the standard library (no
Typer, no server code); the Typer commands are :mod:`inbots.cli.commands.reservations`'.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

MARK = "# inbots guard: written by `inbots guard install`; `inbots guard uninstall` removes it."
DEFAULT_URL = "http://127.0.0.1:8000"
TIMEOUT = 5.0  # seconds: a commit must not hang on a server that does not answer
BATCH = 100  # paths per check (the API's limit)
EXIT_REFUSED = 1


class GuardError(Exception):
    """Install or uninstall could not be done; the sentence says why."""


def hook_path(repo: Path) -> Path:
    """Where git looks for the repository's ``pre-commit`` hook."""
    try:
        found = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--git-path", "hooks"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        raise GuardError(f"{repo} is not in a git repository (git rev-parse failed).") from None
    hooks = Path(found)
    if not hooks.is_absolute():
        hooks = repo / hooks
    return hooks / "pre-commit"


def script(python: str | None = None) -> str:
    """The hook: this interpreter, running :func:`check`."""
    exe = shlex.quote(python or sys.executable)
    return (
        "#!/bin/sh\n"
        f"{MARK}\n"
        "# Refuses a commit of paths another agent has reserved (INBOTS_GUARD=off skips it).\n"
        '[ "$INBOTS_GUARD" = "off" ] && exit 0\n'
        # -P: never import an ``inbots`` directory of the repository being committed.
        f"{exe} -P -m inbots.cli.guard check\n"
        "status=$?\n"
        '[ "$status" -eq 1 ] && exit 1\n'
        # Only a refusal blocks: an interpreter gone or broken is a warning.
        '[ "$status" -ne 0 ] && echo "inbots guard: warning: the check did not run (exit '
        '$status); commit allowed." >&2\n'
        "exit 0\n"
    )


def ours(path: Path) -> bool:
    try:
        return MARK in path.read_text(errors="replace")
    except OSError:
        return False


def install(repo: Path) -> Path:
    """Write the hook (again, if it is ours); refuse to replace another one."""
    path = hook_path(repo)
    if path.exists() and not ours(path):
        raise GuardError(
            f"{path} exists and was not written by inbots guard: not replaced. Merge it by hand "
            "(add a line running: python -m inbots.cli.guard check), or move it away first."
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script())
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def uninstall(repo: Path) -> Path | None:
    """Remove the hook if it is ours; None when there is none; refuse another one."""
    path = hook_path(repo)
    if not path.exists():
        return None
    if not ours(path):
        raise GuardError(f"{path} was not written by inbots guard: left as it is.")
    path.unlink()
    return path


def staged() -> list[str]:
    """The paths of the commit being made, as git lists them (added, changed, renamed, deleted)."""
    out = subprocess.run(
        ["git", "diff", "--cached", "--name-only", "-z"],
        capture_output=True,
        check=True,
    ).stdout
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


def conflicts(url: str, key: str, paths: list[str]) -> list[dict[str, Any]]:
    """The other agents' exclusive reservations on ``paths`` (raises httpx errors, and
    ValueError for an answer that is not the check's)."""
    import httpx

    found: list[dict[str, Any]] = []
    with httpx.Client(
        base_url=url.rstrip("/"),
        headers={"Authorization": f"Bearer {key}"},
        timeout=TIMEOUT,
    ) as http:
        for start in range(0, len(paths), BATCH):
            response = http.post(
                "/v1/reservations/check", json={"paths": paths[start : start + BATCH]}
            )
            if response.status_code != 200:
                try:
                    said = response.json()["error"]["message"]
                except (ValueError, KeyError, TypeError):
                    said = response.text[:200]
                raise ValueError(f"HTTP {response.status_code}: {said}")
            body = response.json()
            if not isinstance(body, dict) or not isinstance(body.get("conflicts"), list):
                raise ValueError("the answer is not a reservations check")
            found += body["conflicts"]
    return found


def line(c: dict[str, Any]) -> str:
    why = f": {c['reason']}" if c.get("reason") else ""
    return (
        f"  {c['path']} is reserved by {c['held_by']} until {c['expires_at']} "
        f"({c['pattern']}, {c['reservation_id']}){why}"
    )


def check(stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """The hook's work: 1 when another agent holds a staged path, else 0 (warnings aside)."""
    err = stderr or sys.stderr
    if os.environ.get("INBOTS_GUARD", "").lower() == "off":
        return 0
    try:
        paths = staged()
    except (OSError, subprocess.CalledProcessError):
        err.write("inbots guard: warning: cannot list the staged paths; commit allowed.\n")
        return 0
    if not paths:
        return 0
    url = os.environ.get("INBOTS_URL") or DEFAULT_URL
    key = os.environ.get("INBOTS_API_KEY", "")
    if not key:
        err.write("inbots guard: warning: INBOTS_API_KEY is not set; commit allowed unchecked.\n")
        return 0
    try:
        found = conflicts(url, key, paths)
    except Exception as exc:  # down, refused, not Inbots: a warning, never a block
        err.write(
            f"inbots guard: warning: cannot check reservations at {url} ({exc}); commit allowed.\n"
        )
        return 0
    if not found:
        return 0
    holders = sorted({c["held_by"] for c in found})
    err.write(
        f"inbots guard: commit refused: {len(found)} staged path(s) reserved by "
        f"{', '.join(holders)}:\n"
    )
    err.writelines(line(c) + "\n" for c in found)
    err.write(
        "Ask the holder (inbots mail send --to NAME …), wait for the reservation to end, or "
        "commit anyway with INBOTS_GUARD=off.\n"
    )
    return EXIT_REFUSED


if __name__ == "__main__":
    if sys.argv[1:] == ["check"]:
        sys.exit(check())
    sys.stderr.write("usage: python -m inbots.cli.guard check\n")
    sys.exit(2)
