"""The files that run Inbots in production say what docs/operations.md says: every long-running
process restarts when it exits, the web process checks its settings before serving, and no
password is written into them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.processes import procfile

ROOT = Path(__file__).resolve().parent.parent


def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())  # type: ignore[no-any-return]


def test_compose_restarts_every_long_running_service() -> None:
    services = compose()["services"]
    one_shot = {"migrate"}
    assert set(services) >= {"postgres", "redis", "migrate", "web", "worker", "beat"}
    for name, service in services.items():
        wanted = "no" if name in one_shot else "unless-stopped"
        assert service.get("restart") == wanted, (name, service.get("restart"))


def test_compose_web_checks_its_settings_and_beat_keeps_no_schedule_file() -> None:
    services = compose()["services"]
    assert services["web"]["command"][:2] == ["inbots", "web"]
    assert services["web"]["environment"]["INBOTS_METRICS_DIR"]
    assert "--schedule" not in services["beat"]["command"]


def test_compose_writes_no_database_password() -> None:
    text = (ROOT / "compose.yaml").read_text()
    services = compose()["services"]
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith(
        "${POSTGRES_PASSWORD:?"
    )
    for name in ("migrate", "web", "worker", "beat"):
        url = services[name]["environment"]["INBOTS_DATABASE_URL"]
        assert ":${POSTGRES_PASSWORD}@" in url, (name, url)
    assert "inbots:inbots@" not in text


def test_procfile_lines_exec_their_program_and_web_is_inbots_web() -> None:
    """``exec``: the supervisor's SIGTERM reaches uvicorn and Celery, not a shell between."""
    lines = procfile()
    for name in ("web", "worker", "beat"):
        assert lines[name].startswith("exec "), lines[name]
    assert lines["web"].startswith("exec inbots web ")
    assert "celerybeat-schedule*" in (ROOT / ".gitignore").read_text().splitlines()
