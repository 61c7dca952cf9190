"""What the client-side entry points import: ``inbots mcp`` (the stdio bridge, started on every
agent session) and the CLI reach the server only over HTTP, so they import none of its database
code. Each check runs in a fresh interpreter (this test process has imported everything)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SERVER_SIDE = ("sqlalchemy", "inbots.db.engine", "inbots.db.uow", "inbots.messages.service")


def imported_by(module: str) -> list[str]:
    probe = (
        f"import json, sys, {module}; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({SERVER_SIDE!r}))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    return list(json.loads(done.stdout))


@pytest.mark.parametrize("module", ["inbots.mcp.stdio", "inbots.cli.main"])
def test_client_side_entry_points_import_no_server_code(module: str) -> None:
    assert imported_by(module) == [], f"{module} imports server-side modules"


def test_the_probe_sees_server_code_where_it_is() -> None:
    """The check above can fail: the /mcp endpoint does import the database layer."""
    assert "sqlalchemy" in imported_by("inbots.mcp.endpoint")
