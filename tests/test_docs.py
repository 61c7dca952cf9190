"""The documentation keeps up with the code."""

from __future__ import annotations

from pathlib import Path

from inbots.config import Settings

ROOT = Path(__file__).resolve().parent.parent


def test_every_setting_is_documented() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    missing = [n for n in Settings.model_fields if f"`INBOTS_{n.upper()}`" not in text]
    assert missing == []


def test_readme_quick_start_commands_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    assert ".ci/dev serve" in readme and ".ci/dev test" in readme
    script = (ROOT / ".ci" / "dev").read_text()
    assert "serve)" in script and "test)" in script
    assert ".ci/dev test" in (ROOT / ".ci" / "run").read_text()
