"""``inbots reservations list|release`` (the operator, through the client) and ``inbots guard``:
a real git repository in tmp_path whose pre-commit hook asks the real test server; a commit of a
reserved file is refused naming the holder, a free one goes through."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers import Api, Caller
from tests.test_cli import cli_env, inbots, ok


def git(
    repo: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, timeout=60
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    assert git(path, "init", "-q").returncode == 0
    git(path, "config", "user.email", "bob@example.com")
    git(path, "config", "user.name", "bob")
    git(path, "config", "commit.gpgsign", "false")
    return path


def commit(
    repo: Path, api: Api, agent: Caller, name: str, **env: str
) -> subprocess.CompletedProcess[str]:
    file = repo / name
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(f"{name}\n")
    assert git(repo, "add", name).returncode == 0
    environment = cli_env(None, INBOTS_URL=api.base_url, INBOTS_API_KEY=agent.token, **env)
    return git(repo, "commit", "-q", "-m", f"change {name}", env=environment)


def reserve(agent: Caller, *paths: str) -> dict[str, object]:
    answer = agent.ok("POST", "/reservations", 201, json={"paths": list(paths), "reason": "wip"})
    return answer["reservation"]  # type: ignore[no-any-return]


def test_the_guard_refuses_a_reserved_file_naming_the_holder_and_allows_a_free_one(
    api: Api, repo: Path
) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    held = reserve(alice, "src/api/**")
    installed = inbots(None, "guard", "install", "--repo", str(repo))
    assert installed.code == 0, installed.stderr
    hook = repo / ".git" / "hooks" / "pre-commit"
    assert os.access(hook, os.X_OK)

    refused = commit(repo, api, bob, "src/api/app.py")
    assert refused.returncode != 0
    assert "alice" in refused.stderr and "src/api/app.py" in refused.stderr
    assert str(held["id"]) in refused.stderr and str(held["expires_at"]) in refused.stderr
    assert git(repo, "log", "--oneline").stdout == ""  # nothing committed
    assert git(repo, "reset", "-q").returncode == 0  # bob unstages it

    allowed = commit(repo, api, bob, "docs/readme.md")
    assert allowed.returncode == 0, allowed.stderr
    assert "change docs/readme.md" in git(repo, "log", "--oneline").stdout

    # The holder itself commits its own reserved files; INBOTS_GUARD=off skips the check.
    assert commit(repo, api, alice, "src/api/app.py").returncode == 0, "the holder commits"
    skipped = commit(repo, api, bob, "src/api/other.py", INBOTS_GUARD="off")
    assert skipped.returncode == 0, skipped.stderr


def test_an_unreachable_server_is_a_warning_not_a_block(api: Api, repo: Path) -> None:
    bob = api.agent("bob")
    ok(api, "guard", "install", "--repo", str(repo))
    file = repo / "a.py"
    file.write_text("x\n")
    git(repo, "add", "a.py")
    env = cli_env(None, INBOTS_URL="http://127.0.0.1:9", INBOTS_API_KEY=bob.token)
    done = git(repo, "commit", "-q", "-m", "a", env=env)
    assert done.returncode == 0, done.stderr
    assert "warning" in done.stderr and "127.0.0.1:9" in done.stderr


def test_install_refuses_a_hook_it_did_not_write_and_uninstall_removes_only_its_own(
    repo: Path,
) -> None:
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("#!/bin/sh\necho mine\n")
    refused = inbots(None, "guard", "install", "--repo", str(repo))
    assert refused.code == 1 and "not written by inbots guard" in refused.stderr
    assert hook.read_text() == "#!/bin/sh\necho mine\n"
    kept = inbots(None, "guard", "uninstall", "--repo", str(repo))
    assert kept.code == 1 and hook.exists()

    hook.unlink()
    assert inbots(None, "guard", "install", "--repo", str(repo)).code == 0
    assert inbots(None, "guard", "install", "--repo", str(repo)).code == 0  # again: its own
    removed = inbots(None, "guard", "uninstall", "--repo", str(repo))
    assert removed.code == 0 and not hook.exists()
    assert inbots(None, "guard", "uninstall", "--repo", str(repo)).code == 0


def test_the_operator_lists_and_releases_reservations(api: Api) -> None:
    alice, bob = api.agent("alice"), api.agent("bob")
    held = reserve(alice, "src/**")
    ended = reserve(bob, "docs/**")
    bob.ok("DELETE", f"/reservations/{ended['id']}")

    listed = json.loads(ok(api, "reservations", "list", "--output", "json").stdout)
    assert [r["id"] for r in listed["items"]] == [ended["id"], held["id"]]
    active = json.loads(ok(api, "reservations", "list", "--active", "--output", "json").stdout)
    assert [r["id"] for r in active["items"]] == [held["id"]]
    table = ok(api, "reservations", "list").stdout
    assert "alice" in table and "src/**" in table

    released = ok(
        api, "reservations", "release", str(held["id"]), "--reason", "stale", "--output", "json"
    )
    assert json.loads(released.stdout)["released_at"] is not None
    assert reserve(bob, "src/x.py")["agent"] == "bob"
    missing = inbots(api, "reservations", "release", "rsv_nothing")
    assert missing.code == 1 and "rsv_nothing" in missing.stderr


def test_the_hook_ignores_an_inbots_directory_of_the_repository(api: Api, repo: Path) -> None:
    """The hook's interpreter never imports the committed repository's own ``inbots/`` (this
    one exits 1 on import, which would block every commit)."""
    alice, bob = api.agent("alice"), api.agent("bob")
    reserve(alice, "src/**")
    (repo / "inbots").mkdir()
    (repo / "inbots" / "__init__.py").write_text("raise SystemExit(1)\n")
    ok(api, "guard", "install", "--repo", str(repo))
    allowed = commit(repo, api, bob, "README.md")
    assert allowed.returncode == 0, allowed.stderr
    refused = commit(repo, api, bob, "src/x.py")
    assert refused.returncode == 1 and "alice" in refused.stderr
