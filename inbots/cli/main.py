"""``inbots``: run the service, manage its database, and operate a running server over HTTP.

Every error is one line on stderr and a non-zero exit code; no tracebacks for expected failures.
The exit codes are listed in :mod:`inbots.cli.client` and ``docs/cli.md``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console

from inbots import __version__
from inbots.cli.client import EXIT_INTERNAL, EXIT_USAGE, CliError, report
from inbots.cli.commands import add_operator_commands
from inbots.cli.mail import hook
from inbots.cli.mail.commands import app as mail_app
from inbots.kit.startup import started, starting

if TYPE_CHECKING:
    from inbots.config import Settings

app = typer.Typer(
    name="inbots",
    help="Inbots: a mailbox for AI agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
workspace_app = typer.Typer(
    help="Workspaces (run against the database directly).", no_args_is_help=True
)


def _version(shown: bool) -> None:
    if shown:
        print(f"inbots {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Inbots: a mailbox for AI agents."""


app.add_typer(db_app, name="db")
app.add_typer(workspace_app, name="workspace")
add_operator_commands(app)  # over HTTP: inbots/cli/commands/
app.add_typer(mail_app, name="mail")  # the agent's commands: inbots/cli/mail/

out = Console(soft_wrap=True)


def fail(message: str, code: int = 1) -> NoReturn:
    raise CliError(message, code)


def listen_or_exit(host: str, port: int, *, wait: float = 0.0) -> None:
    """Stop with one line (exit 1) when ``host:port`` cannot be listened on — the port taken,
    the address not this machine's — instead of uvicorn's several lines and exit 3. Bound as
    uvicorn binds (IPv6 for an address with a colon, else IPv4; ``SO_REUSEADDR``), then let go
    for it.

    A port in use is tried again for up to ``wait`` seconds: ``inbots web`` restarted after its
    supervisor was killed finds the old workers still letting go of it for a moment."""
    import errno
    import socket
    import time

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    deadline = time.monotonic() + wait
    while True:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((host, port))
            return
        except OSError as exc:  # socket.gaierror too
            if exc.errno == errno.EADDRINUSE and time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            reason = exc.strerror or str(exc)
            fail(
                f"cannot listen on {host}:{port} ({reason}): choose another port (--port or "
                "INBOTS_PORT) or address (--host or INBOTS_HOST)."
            )


def existing_database_or_exit(settings: Settings) -> None:
    """For a command that reads an Inbots database it does not create (``purge``, ``db
    recount``): a SQLite file that is not there is refused, where opening it would leave an
    empty file behind."""
    from sqlalchemy.engine import make_url

    from inbots.db.engine import normalize_url

    url = make_url(normalize_url(settings.database_url))
    path = url.database
    sqlite_file = url.get_backend_name() == "sqlite" and path and path != ":memory:"
    if sqlite_file and not Path(str(path)).exists():
        fail(
            f"there is no Inbots database at {path} (INBOTS_DATABASE_URL): run inbots db "
            "upgrade first, or point INBOTS_DATABASE_URL at yours."
        )


def settings_or_exit(**overrides: object) -> Settings:
    # Imported here: the operator commands talk HTTP and never load the settings, and pydantic
    # settings is a third of a start-up they would otherwise pay on every call.
    from inbots.config import SettingsError, load_settings

    try:
        return load_settings(**{k: v for k, v in overrides.items() if v is not None})
    except SettingsError as exc:
        fail(str(exc), EXIT_USAGE)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface to listen on [INBOTS_HOST].")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on [INBOTS_PORT].")] = None,
) -> None:
    """Run the whole service in one process (the embedded default: SQLite, in-process delivery)."""
    # A bad setting stops here, before the app's imports (a second of CPU) are paid for.
    settings = settings_or_exit(host=host, port=port)
    listen_or_exit(settings.host, settings.port)  # before a workspace and its token are made

    import uvicorn

    from inbots.app import create_app
    from inbots.db.engine import Database
    from inbots.db.migrate import upgrade
    from inbots.db.uow import unit_of_work
    from inbots.serving import uvicorn_options
    from inbots.workspaces.service import ensure_first_workspace

    try:
        upgrade(settings)
    except Exception as exc:
        fail(f"could not prepare the database: {exc}")
    db = Database(settings)
    with unit_of_work(db) as uow:
        seeded = ensure_first_workspace(uow, settings.operator_token)
    base = f"http://{settings.host}:{settings.port}"
    out.print(f"[bold]Inbots[/] on {base}  (database: {_redact(settings.database_url)})")
    _print_minted(seeded.minted_token)
    if seeded.seeded_token_revoked:
        out.print(
            "[yellow]INBOTS_OPERATOR_TOKEN names a revoked operator token: it signs nothing in."
            "[/] Unset it, or set it to a live one (inbots tokens list)."
        )
    out.print(f"Dashboard: {base}/   (sign in with the operator token)")
    out.print(f"API: {base}/v1   OpenAPI: {base}/openapi.json   MCP: {base}/mcp")
    options = uvicorn_options(settings)
    served = create_app(settings, db)
    started()
    uvicorn.run(served, host=settings.host, port=settings.port, **options)


# How long ``inbots web`` waits for a port in use to be let go before it gives up.
WEB_PORT_WAIT_SECONDS = 5.0


@app.command()
def web(
    host: Annotated[str | None, typer.Option(help="Interface to listen on [INBOTS_HOST].")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on [INBOTS_PORT].")] = None,
    workers: Annotated[
        int, typer.Option(min=1, help="Web processes behind the one port (uvicorn workers).")
    ] = 4,
) -> None:
    """Run the web process of a production deployment (the Procfile's ``web``).

    Checks the settings like ``inbots check`` (a bad one stops here, with one line, before
    uvicorn starts processes that would each fail), prepares the metrics directory
    (INBOTS_METRICS_DIR) and serves the API, /mcp, the dashboard and /metrics with uvicorn and
    WORKERS processes. Migrations are ``inbots db upgrade``'s job (the release step).

    The worker processes end with this one, even when it is killed (Linux). SIGTERM and SIGINT
    stop it gracefully, and the metrics directory is emptied (a temporary one removed)."""
    import logging

    import uvicorn

    from inbots.observability.logs import configure_logging
    from inbots.serving import WEB_APP, metrics_directory, sigterm_unwinds, uvicorn_options

    settings = settings_or_exit(host=host, port=port)
    # A few seconds for a port still held: the workers of a killed ``inbots web`` let go of it
    # as they shut down, a moment after their supervisor died.
    listen_or_exit(settings.host, settings.port, wait=WEB_PORT_WAIT_SECONDS)
    configure_logging(settings)
    logging.getLogger("inbots.web").info(
        "settings OK; serving with %d web processes", workers, extra=_describe(settings)
    )
    started()
    with sigterm_unwinds(), metrics_directory(settings):
        uvicorn.run(
            WEB_APP,  # inbots.app:create_app, in a worker that ends with this process
            factory=True,
            host=settings.host,
            port=settings.port,
            workers=workers,
            **uvicorn_options(settings),
        )


@app.command("mcp")
def mcp_stdio(
    url: Annotated[
        str | None,
        typer.Option(
            envvar="INBOTS_URL",
            help="Base URL of a running Inbots, like http://127.0.0.1:8000 [INBOTS_URL].",
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="INBOTS_API_KEY",
            help="The agent's key, agt_… (prefer the environment variable) [INBOTS_API_KEY].",
            show_default=False,
        ),
    ] = None,
    enroll: Annotated[
        str | None,
        typer.Option(
            "--enroll",
            envvar="INBOTS_ENROLLMENT_TOKEN",
            help="Register a new agent with this enrolment token (enr_…) first, then serve as "
            "it; needs --name [INBOTS_ENROLLMENT_TOKEN].",
            show_default=False,
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(help="With --enroll: the new agent's username.", show_default=False),
    ] = None,
    description: Annotated[
        str | None,
        typer.Option(help="With --enroll: what the agent does.", show_default=False),
    ] = None,
    key_file: Annotated[
        Path | None,
        typer.Option(
            "--key-file",
            envvar="INBOTS_KEY_FILE",
            help="With --enroll: keep the new key in this file (mode 0600); when it already "
            "holds a key, serve with it and register nothing [INBOTS_KEY_FILE].",
            show_default=False,
        ),
    ] = None,
    session: Annotated[
        str,
        typer.Option(
            envvar="INBOTS_SESSION",
            help="The label this bridge shows in the agent's sessions [INBOTS_SESSION].",
        ),
    ] = "stdio",
    tools: Annotated[
        str | None,
        typer.Option(
            "--tools",
            help="Which tools to list: default, or all (the account tools list_keys and "
            "list_sessions too). Unset: the server's INBOTS_MCP_TOOLS.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve the agent tools over MCP stdio as one agent: a relay to the server's own /mcp.
    It checks the server and the key first: a key the server refuses, or a URL that is not an
    Inbots server, stops it (exit 2); a server that is down only warns."""
    if not url:
        fail(
            "INBOTS_URL is not set: give the base URL of Inbots, like http://127.0.0.1:8000.",
            EXIT_USAGE,
        )
    if not url.startswith(("http://", "https://")):
        fail(f"INBOTS_URL must start with http:// or https:// (got {url!r}).", EXIT_USAGE)
    if tools is not None and tools not in ("default", "all"):
        fail(f"--tools takes default or all (got {tools!r}).", EXIT_USAGE)
    if enroll is not None:
        _mcp_enrolled(url, enroll, name, description, key_file, api_key, session, tools)
        return
    if not api_key:
        fail(
            "INBOTS_API_KEY is not set: give the agent's key (agt_…), or register a new agent "
            "with --enroll enr_… --name NAME.",
            EXIT_USAGE,
        )
    if not all("!" <= c <= "~" for c in api_key):  # first: " agt_…" is a key, badly pasted
        fail(
            "INBOTS_API_KEY must be the key as printed, visible ASCII only: remove the spaces "
            "or line break around it.",
            EXIT_USAGE,
        )
    if not api_key.startswith("agt_"):
        fail(
            "INBOTS_API_KEY must be an agent key (agt_…); the operator token is not an agent.",
            EXIT_USAGE,
        )
    from inbots.mcp.stdio import Refused, run

    try:
        run(url, api_key, session, tools)
    except Refused as refused:
        fail(str(refused), EXIT_USAGE)


def _mcp_enrolled(
    url: str,
    token: str,
    name: str | None,
    description: str | None,
    key_file: Path | None,
    api_key: str | None,
    session: str,
    tools: str | None,
) -> None:
    if api_key:
        fail(
            "Give either --enroll (to register a new agent) or INBOTS_API_KEY (to serve as an "
            "existing one), not both.",
            EXIT_USAGE,
        )
    if not token.startswith("enr_"):
        fail(f"--enroll takes an enrolment token, enr_… (got {token[:4]!r}…).", EXIT_USAGE)
    if not name:
        fail("--enroll needs --name: the username the new agent registers.", EXIT_USAGE)
    from inbots.errors import InbotsError
    from inbots.mcp.enrol import run_enrolled
    from inbots.mcp.stdio import Refused

    try:
        run_enrolled(url, token, name, description, key_file, session, tools)
    except InbotsError as exc:
        fail(f"inbots mcp: could not register {name!r}: {exc.message}", 1)
    except Refused as refused:
        fail(str(refused), EXIT_USAGE)


def _print_minted(token: str | None) -> None:
    if token:
        out.print(
            "Operator token (shown once; store it now, it is kept only as a hash):\n"
            f"  [bold green]{token}[/]",
            highlight=False,
        )


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "(unparseable url)"


@app.command("check")
def check() -> None:
    """Check the settings (INBOTS_*) and exit: 0, or 2 with one line naming a bad one.

    The Procfile's web process runs this before uvicorn starts its workers, which would
    otherwise each fail and be restarted without end."""
    settings = settings_or_exit()
    described = _describe(settings)
    out.print(f"settings OK: database {described['database']}, broker {described['broker']}")
    out.print(_metrics_access(settings), highlight=False)


def _describe(settings: Settings) -> dict[str, str]:
    database = settings.database_url.partition(":")[0].partition("+")[0]
    broker = "Redis (production)" if settings.broker_url else "none (embedded default)"
    return {"database": database, "broker": broker}


def _metrics_access(settings: Settings) -> str:
    return {
        "token": "/metrics: wants Authorization: Bearer <INBOTS_METRICS_TOKEN>",
        "open": "/metrics: open to anyone who can reach it"
        + (" (INBOTS_METRICS_PUBLIC)" if settings.metrics_public else " (development)"),
        "closed": "/metrics: closed in production (answers 403) until INBOTS_METRICS_TOKEN is"
        " set, or INBOTS_METRICS_PUBLIC=true opens it",
    }[settings.metrics_access]


@db_app.command("upgrade")
def db_upgrade(revision: Annotated[str, typer.Argument()] = "head") -> None:
    """Apply the schema migrations (SQLite or PostgreSQL, from INBOTS_DATABASE_URL)."""
    from inbots.db.engine import Database
    from inbots.db.migrate import current, upgrade
    from inbots.db.uow import unit_of_work
    from inbots.workspaces.service import ensure_first_workspace

    settings = settings_or_exit()
    try:
        upgrade(settings, revision)
    except Exception as exc:
        fail(f"migration failed: {exc}")
    out.print(f"Database at revision {current(settings)}.")
    if revision == "head":
        db = Database(settings)
        with unit_of_work(db) as uow:
            seeded = ensure_first_workspace(uow, settings.operator_token)
        db.dispose()
        _print_minted(seeded.minted_token)


@db_app.command("recount")
def db_recount() -> None:
    """Count every workspace's acknowledged deliveries afresh (the tally the operator's counts
    read): after a bulk load of deliveries, or a rolling upgrade to 0020 during which web
    processes of the previous release acknowledged mail."""
    from inbots.db.engine import Database
    from inbots.db.uow import unit_of_work
    from inbots.deliveries.tallies import count, recount

    settings = settings_or_exit()
    existing_database_or_exit(settings)
    db = Database(settings)
    try:
        with unit_of_work(db) as uow:
            recount(uow.session)
            total = count(uow.session, None)
    except Exception as exc:
        fail(f"recount failed: {exc}")
    finally:
        db.dispose()
    out.print(f"{total:,} acknowledged deliveries counted.")


@workspace_app.command("create")
def workspace_create(name: Annotated[str, typer.Argument(help="A name for people.")]) -> None:
    """Create another, fully isolated workspace and print its operator token once."""
    from inbots.db.engine import Database
    from inbots.db.migrate import upgrade
    from inbots.db.uow import unit_of_work
    from inbots.workspaces.service import create_workspace

    settings = settings_or_exit()
    upgrade(settings)
    db = Database(settings)
    with unit_of_work(db) as uow:
        seeded = create_workspace(uow, name)
    db.dispose()
    out.print(f"Workspace {seeded.workspace_id} created. Operator token (shown once):")
    out.print(seeded.minted_token, highlight=False)


def _retention_days(days: float | None) -> float | None:
    """``--days`` within INBOTS_RETENTION_DAYS' bounds: a cutoff past them (``inf``, ``1e308``)
    is no date at all, and ``nan`` or a negative is no window."""
    from inbots.config import LONGEST_DAYS

    if days is not None and not 0 <= days <= LONGEST_DAYS:  # NaN fails both comparisons
        raise typer.BadParameter(
            f"must be a number of days from 0 to {LONGEST_DAYS:,} (ten years), like "
            f"INBOTS_RETENTION_DAYS (got {days:g})",
            param_hint="'--days'",
        )
    return days


@app.command("purge")
def purge(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be deleted; delete nothing.")
    ] = False,
    days: Annotated[
        float | None,
        typer.Option(
            callback=_retention_days,
            help="Delete threads closed more than this many days ago, instead of "
            "INBOTS_RETENTION_DAYS (0 deletes nothing; at most 3650).",
        ),
    ] = None,
    output: Annotated[
        str, typer.Option("--output", "-o", help="table (for people) or json.")
    ] = "table",
) -> None:
    """Apply the retention window now: delete closed threads past it with their messages,
    deliveries, events and attempts (run against the database directly, in short batches)."""
    import json

    from inbots.db.engine import Database
    from inbots.deliveries.retention import purge as run_purge

    if output not in ("table", "json"):
        fail("--output takes table or json.", EXIT_USAGE)
    settings = settings_or_exit()
    window = settings.retention_days if days is None else days
    if window <= 0:  # keep forever: nothing goes, and the note says how to purge anyway
        print(
            "Retention is off (INBOTS_RETENTION_DAYS is 0, mail is kept forever): nothing "
            "goes. Pass --days N to delete threads closed more than N days ago, or set "
            "INBOTS_RETENTION_DAYS.",
            file=sys.stderr,
        )
    existing_database_or_exit(settings)
    db = Database(settings)
    try:
        report = run_purge(db, settings, days=window, dry_run=dry_run)
    finally:
        db.dispose()
    counts = {
        "dry_run": report.dry_run,
        "days": window,
        "closed_before": report.cutoff.isoformat() if report.cutoff else None,
        "threads": report.threads,
        "messages": report.messages,
        "deliveries": report.deliveries,
        "events": report.events,
        "attempts": report.attempts,
    }
    if output == "json":
        print(json.dumps(counts))
        return
    verb = "Would delete" if dry_run else "Deleted"
    if report.cutoff is None:
        out.print(f"{verb} nothing: retention is off.", highlight=False)
        return
    out.print(
        f"{verb} {report.threads} threads closed before {counts['closed_before']} "
        f"({window:g} days): {report.messages} messages, {report.deliveries} deliveries, "
        f"{report.events} events, {report.attempts} webhook attempts.",
        highlight=False,
    )


def main() -> None:
    starting()  # the collector rests until the command has started (inbots/kit/startup.py)
    if sys.argv[1:3] == ["mail", "hook"] and (code := hook.fast(sys.argv[3:])) is not None:
        sys.exit(code)  # a harness runs it before every prompt: no Typer (inbots/cli/mail/hook.py)
    from inbots.errors import InbotsError

    try:
        code = app(standalone_mode=False)
    except (KeyboardInterrupt, typer.Abort):
        sys.exit(130)
    except typer.TyperException as exc:  # CliError and usage errors: one line, no usage panel
        if type(exc).__name__ != "NoArgsIsHelpError":  # that one has printed the help already
            report(_with_hint(exc))
        sys.exit(exc.exit_code)
    except InbotsError as exc:
        report(exc.message)
        sys.exit(1)
    except Exception as exc:  # a bug: still one line, and a way to see more
        if _schema_missing(exc):  # a command that reads the database itself (purge, db recount)
            report(
                "the database INBOTS_DATABASE_URL names has no Inbots tables (or older ones): "
                "run inbots db upgrade first."
            )
            sys.exit(1)
        report(f"unexpected {type(exc).__name__}: {exc} (set INBOTS_CLI_TRACEBACK=1 to see where)")
        if os.environ.get("INBOTS_CLI_TRACEBACK"):
            raise
        sys.exit(EXIT_INTERNAL)
    sys.exit(code if isinstance(code, int) else 0)


def _schema_missing(exc: BaseException) -> bool:
    """SQLite's "no such table" or PostgreSQL's undefined table or column, from SQLAlchemy (told
    by name: this module imports no database code at start)."""
    if not type(exc).__module__.startswith("sqlalchemy"):
        return False
    text = str(getattr(exc, "orig", exc))
    if "no such table" in text or "no such column" in text:
        return True
    return "does not exist" in text and ('relation "' in text or 'column "' in text)


def _with_hint(exc: typer.TyperException) -> str:
    ctx = getattr(exc, "ctx", None)  # usage errors know their command
    if ctx is None or isinstance(exc, CliError):
        return exc.format_message()
    return f"{exc.format_message()} (see '{ctx.command_path} --help')"


if __name__ == "__main__":
    main()
