"""Every ``inbots`` command the dashboard's templates tell the operator to run exists."""

from __future__ import annotations

import re

import typer.main

from inbots.cli.main import app
from inbots.dashboard.render import TEMPLATES


def test_every_command_named_in_the_templates_exists() -> None:
    root = typer.main.get_command(app)
    named = {
        (group, command)
        for path in TEMPLATES.glob("*.html")
        for group, command in re.findall(r"inbots ([a-z][\w-]*) ([a-z][\w-]*)", path.read_text())
    }
    assert ("agents", "register") in named  # the agents page's empty state
    for group, command in sorted(named):
        sub = root.commands.get(group)  # type: ignore[attr-defined]
        assert sub is not None, f"inbots {group} is not a command"
        assert command in sub.commands, f"inbots {group} {command} is not a command"
