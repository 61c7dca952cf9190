"""What the client-side entry points import: ``inbots mcp`` (the stdio relay to ``/mcp``, started
on every agent session; ``--enroll`` too) and the CLI reach the server only over HTTP, so they
import none of its database code, and the relay not even the MCP SDK. ``inbots mail hook`` runs
before every prompt of an agent: it imports no server code and no model at all. Each check runs
in a fresh interpreter (this test process has imported everything)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

import inbots.client
from tests.helpers import Api

SERVER_SIDE = ("sqlalchemy", "inbots.db.engine", "inbots.db.uow", "inbots.messages.service")
# What costs a second of CPU to import, which the relay does without.
MCP_SDK = ("mcp", "mcp_types", "pydantic")


def imported_by(module: str, prefixes: tuple[str, ...] = SERVER_SIDE) -> list[str]:
    probe = (
        f"import json, sys, {module}; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    return list(json.loads(done.stdout))


@pytest.mark.parametrize("module", ["inbots.mcp.stdio", "inbots.mcp.enrol", "inbots.cli.main"])
def test_client_side_entry_points_import_no_server_code(module: str) -> None:
    assert imported_by(module) == [], f"{module} imports server-side modules"


def test_the_stdio_relay_imports_no_mcp_sdk() -> None:
    assert imported_by("inbots.mcp.stdio", MCP_SDK) == []


def test_the_probe_sees_server_code_where_it_is() -> None:
    """The check above can fail: the /mcp endpoint does import the database layer."""
    assert "sqlalchemy" in imported_by("inbots.mcp.endpoint")


@pytest.mark.parametrize("module", ["inbots.cli.main", "workers"])
def test_the_entry_points_leave_httpx_command_line_unloaded(module: str) -> None:
    """httpx's own CLI (click, pygments, rich's progress bars) is nothing Inbots runs."""
    probe = (
        f"import json, sys, {module}, httpx; "
        "print(json.dumps([m for m, v in sys.modules.items() if v is not None"
        " and m.startswith(('httpx._main', 'pygments'))]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout) == []


# What the hook must never load: the server, the web framework, the task queue, the MCP SDK,
# pydantic (the client's models, and Typer's option parsing builds on it), httpcore (and the
# trio and anyio it imports when installed: the hook's one request needs no pool).
HOOK_NEVER = (
    *SERVER_SIDE,
    "fastapi",
    "starlette",
    "celery",
    "uvicorn",
    "mcp",
    "pydantic",
    "httpcore",
    "trio",
    "anyio",
    "inbots.client._models",
    "inbots.db",
    "inbots.config",
)


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_mail_hook_imports_no_server_code_and_no_model(api: Api) -> None:
    """``inbots mail hook`` as the console script runs it (``inbots.cli.main.main``), printing
    its block for mail that waits; then what it had imported."""
    alice, bob = api.agent("alice"), api.agent("bob")
    alice.send(alice.open_thread("Hello", ["bob"])["id"], "hello")
    probe = (
        "import atexit, json, sys; "
        "atexit.register(lambda: print(json.dumps(sorted(m for m in sys.modules "
        f"if m.startswith({HOOK_NEVER!r}))))); "
        "sys.argv = ['inbots', 'mail', 'hook']; "
        "from inbots.cli.main import main; main()"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("INBOTS_")}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        input='{"hook_event_name": "UserPromptSubmit", "prompt": "hi"}',
        env={**env, "INBOTS_URL": api.base_url, "INBOTS_API_KEY": bob.token},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    *block, loaded = done.stdout.splitlines()
    assert block[0] == "Inbots: 1 message waits for you:" and "- alice: hello" in block
    assert json.loads(loaded) == []


def test_the_client_loads_each_name_where_it_is_defined() -> None:
    """``inbots.client`` loads its names on first use: each of ``__all__`` is in its table and
    resolves, and importing the package or its errors loads no pydantic."""
    table = inbots.client._WHERE  # the lazy table is what is tested
    assert sorted(table) == sorted(inbots.client.__all__)
    for name in inbots.client.__all__:
        assert getattr(inbots.client, name) is not None, name
    assert inbots.client.NotFound.__module__ == "inbots.client"
    light = imported_by(
        "inbots.client; from inbots.client import glance, InbotsError", ("pydantic",)
    )
    assert light == []


def in_a_server(database_url: str, code: str) -> Any:
    """Run ``code`` in a fresh interpreter beside a server app on the embedded default, started
    with ``client`` (a ``TestClient``) open on it; what it printed last, as JSON."""
    body = "".join(f"    {line}\n" for line in code.splitlines())
    probe = (
        "import json, sys; from starlette.testclient import TestClient; "
        "from inbots.app import create_app; from inbots.config import load_settings; "
        f"app = create_app(load_settings(database_url={database_url!r}), configure_logs=False)\n"
        f"with TestClient(app) as client:\n{body}"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("INBOTS_")}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_server_loads_the_mcp_sdk_on_its_first_mcp_request(sqlite_database: str) -> None:
    """A server process that never serves ``/mcp`` never pays for the SDK: started and asked for
    ``/healthz`` it has none of it; its first ``/mcp`` request (refused here: no key) loads it,
    and the refusal is the endpoint's own 401."""
    answer = in_a_server(
        sqlite_database,
        "loaded = lambda: sorted(m for m in sys.modules if m.startswith(('mcp', 'mcp_types')))\n"
        "health = client.get('/healthz').status_code; before = loaded()\n"
        "refused = client.post('/mcp', json={'jsonrpc': '2.0', 'id': 1, 'method': 'ping'})\n"
        "print(json.dumps([health, before, refused.status_code, loaded() != []]))",
    )
    assert answer == [200, [], 401, True]


def test_the_embedded_default_loads_no_celery_and_no_redis(sqlite_database: str) -> None:
    """Celery, kombu and redis-py are the production shape's: a server on the embedded default,
    started and asked for ``/healthz`` and ``/readyz`` (which reports the broker), loads none."""
    answer = in_a_server(
        sqlite_database,
        "codes = [client.get(p).status_code for p in ('/healthz', '/readyz')]\n"
        "production = ('celery', 'kombu', 'redis')\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in production)\n"
        "print(json.dumps([codes, loaded]))",
    )
    assert answer == [[200, 200], []]
