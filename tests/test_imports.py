"""What the client-side entry points import: ``inbots mcp`` (the stdio relay to ``/mcp``, started
on every agent session; ``--enroll`` too) and the CLI reach the server only over HTTP, so they
import none of its database code, and the relay not even the MCP SDK. Each check runs in a fresh
interpreter (this test process has imported everything)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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
