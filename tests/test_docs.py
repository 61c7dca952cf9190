"""The documentation keeps up with the code."""

from __future__ import annotations

import re
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


def test_the_python_blocks_of_the_readme_and_the_client_docs_compile() -> None:
    for page in (ROOT / "README.md", ROOT / "docs" / "client.md"):
        blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.DOTALL)
        assert blocks, page
        for number, code in enumerate(blocks, 1):
            compile(code, f"{page.name}, Python block {number}", "exec")


def test_relative_links_in_the_docs_lead_somewhere() -> None:
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_every_metric_is_in_the_runbook() -> None:
    from prometheus_client import REGISTRY

    import inbots.observability.metrics  # noqa: F401  (registers the counters)

    runbook = (ROOT / "docs" / "operations.md").read_text()
    ours = {m.name for m in REGISTRY.collect() if m.name.startswith("inbots_")}
    assert ours and [m for m in sorted(ours) if m not in runbook] == []
