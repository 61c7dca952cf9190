"""``inbots reservations`` (the operator's view of the agents' reservations, and release) and
``inbots guard`` (the git pre-commit hook that checks them: :mod:`inbots.cli.guard`)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from inbots.cli import guard
from inbots.cli.client import CliError
from inbots.cli.options import AllPagesOpt, LimitOpt, Operator, operator_command
from inbots.cli.render import Json, cell, table, when

app = typer.Typer(help="Agents' reservations of repository paths.", no_args_is_help=True)
guard_app = typer.Typer(
    help="A git pre-commit hook refusing commits of paths another agent reserved.",
    no_args_is_help=True,
)


def reservations_table(items: list[Json], title: str | None = None) -> Table:
    grid = table(["id", "holder", "paths", "reason", "expires", "released"], title=title)
    for r in items:
        grid.add_row(
            r["id"],
            r["agent"],
            cell(", ".join(r["paths"])),
            cell(r.get("reason") or ""),
            when(r["expires_at"]),
            when(r.get("released_at")),
        )
    if not items:
        grid.caption = "no reservations"
    return grid


def reservation_view(r: Json) -> Table:
    return reservations_table([r])


@app.command("list")
@operator_command()
def reservations_list(
    op: Operator,
    active: Annotated[bool, typer.Option("--active", help="Only those held now.")] = False,
    agent: Annotated[str | None, typer.Option(help="The holder: username or id.")] = None,
    path: Annotated[str | None, typer.Option(help="Only those that hold this path.")] = None,
    limit: LimitOpt = None,
    all_pages: AllPagesOpt = False,
) -> None:
    """Reservations, newest first."""
    fetch = partial(
        op.api.reservations, agent=agent, path=path, active=True if active else None, limit=limit
    )
    op.show_pages(fetch, reservations_table, every_page=all_pages)


@app.command("release")
@operator_command()
def reservations_release(
    op: Operator,
    reservation: Annotated[str, typer.Argument(help="The reservation id (rsv_…).")],
    reason: Annotated[str | None, typer.Option(help="Why (recorded).")] = None,
) -> None:
    """Release an agent's reservation."""
    op.show(op.api.release_reservation(reservation, reason=reason), reservation_view)


RepoOpt = Annotated[
    Path, typer.Option("--repo", help="The git repository (default: the current directory).")
]


@guard_app.command("install")
def guard_install(repo: RepoOpt = Path(".")) -> None:
    """Write the repository's pre-commit hook (never over one it did not write)."""
    try:
        path = guard.install(repo)
    except guard.GuardError as exc:
        raise CliError(str(exc)) from None
    typer.echo(
        f"Installed {path}: commits of paths another agent reserved are refused "
        "(INBOTS_URL, INBOTS_API_KEY; INBOTS_GUARD=off skips it)."
    )


@guard_app.command("uninstall")
def guard_uninstall(repo: RepoOpt = Path(".")) -> None:
    """Remove the pre-commit hook inbots guard wrote (only that one)."""
    try:
        path = guard.uninstall(repo)
    except guard.GuardError as exc:
        raise CliError(str(exc)) from None
    typer.echo(f"Removed {path}." if path else "No pre-commit hook to remove.")


@guard_app.command("check")
def guard_check() -> None:
    """What the hook runs: refuse (exit 1) when another agent reserved a staged path."""
    raise typer.Exit(guard.check())
