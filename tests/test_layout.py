"""The package keeps the shape docs/development.md gives it: no module of ``inbots/`` (the
migrations aside) is over 600 lines, so each keeps telling one story."""

from __future__ import annotations

from pathlib import Path

import inbots

MAX_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    root = Path(inbots.__file__).parent
    modules = [p for p in root.rglob("*.py") if "migrations" not in p.relative_to(root).parts]
    assert len(modules) > 100  # the whole package was read
    long = {
        str(p.relative_to(root)): n
        for p in modules
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"over {MAX_LINES} lines: {long}"
