"""The operator commands: agents, webhooks, threads, posting, deliveries, operator tokens, stats
and a live watch.

Every command talks to a running server over HTTP (:class:`~inbots.cli.client.Client`), so it
works the same against a laptop or production. People get Rich tables; ``--json`` prints the
API's answer and nothing else, for scripts.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich import box
from rich.console import Console, ConsoleRenderable, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from inbots.cli.client import DEFAULT_URL, EXIT_UNREACHABLE, Client, CliError

Json = dict[str, Any]

out = Console(soft_wrap=True)

agents_app = typer.Typer(help="Agents of the workspace.", no_args_is_help=True)
webhook_app = typer.Typer(help="An agent's webhook (URL and signing secret).", no_args_is_help=True)
threads_app = typer.Typer(
    help="Threads: read, close, dismiss close requests.", no_args_is_help=True
)
deliveries_app = typer.Typer(help="Delivery receipts and their attempt logs.", no_args_is_help=True)
tokens_app = typer.Typer(
    help="Operator tokens: create another, list them, revoke one.", no_args_is_help=True
)

# Connection and output options, the same on every command.
UrlOpt = Annotated[
    str, typer.Option("--url", envvar="INBOTS_URL", help="Base URL of Inbots [INBOTS_URL].")
]
TokenOpt = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="INBOTS_OPERATOR_TOKEN",
        help="The operator token, ops_… (prefer the environment) [INBOTS_OPERATOR_TOKEN].",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the API's JSON answer, nothing else.")]
AgentArg = Annotated[str, typer.Argument(help="The agent's id or username.", show_default=False)]
ThreadArg = Annotated[str, typer.Argument(help="The thread id.", show_default=False)]
DeliveryArg = Annotated[str, typer.Argument(help="The delivery id.", show_default=False)]
LimitOpt = Annotated[
    int | None, typer.Option("--limit", min=1, help="At most this many (one page).")
]

ROW_STYLES = {"stalled": "yellow", "failed": "bold red"}
STATE_STYLES = {**ROW_STYLES, "acknowledged": "green", "accepted": "dim"}
# The stamps of a receipt, in the order a delivery moves.
STAMPS = ("accepted", "notified", "delivered", "fetched", "acknowledged", "failed", "stalled")


# ---------------------------------------------------------------------------------------------
# plumbing


def connect(url: str, token: str | None, as_json: bool = False) -> Client:
    """A client for one command; it shows a spinner only for a person at a terminal."""
    return Client(url, token, progress=out.is_terminal and not as_json)


def seg(value: str) -> str:
    """One path segment, quoted."""
    return quote(value, safe="")


def emit(data: Any, as_json: bool, render: Callable[[Any], RenderableType]) -> None:
    """``--json``: the API's answer on stdout, nothing else; otherwise ``render`` it for people."""
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    else:
        out.print(render(data))


def when(value: str | None) -> str:
    """An RFC 3339 stamp as ``YYYY-MM-DD HH:MM:SS`` (UTC), or a dash."""
    return value[:19].replace("T", " ") if value else "—"


def ago(value: str | None) -> str:
    """How long ago an RFC 3339 stamp was, compactly (``42s ago``, ``5m ago``, ``2d ago``)."""
    if not value:
        return "—"
    elapsed = (datetime.now(UTC) - datetime.fromisoformat(value)).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if elapsed >= size:
            return f"{int(elapsed // size)}{unit} ago"
    return f"{max(int(elapsed), 0)}s ago"


def styled_state(state: str) -> Text:
    return Text(state, style=STATE_STYLES.get(state, ""))


def fields(rows: Iterable[tuple[str, Any]]) -> Table:
    """A two-column grid of labels and values (plain values or anything Rich renders)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for label, value in rows:
        grid.add_row(label, value if isinstance(value, ConsoleRenderable) else Text(_plain(value)))
    return grid


def _plain(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "—"
    return str(value)


def table(columns: Sequence[str], title: str | None = None) -> Table:
    """A table for people: ids and states never wrap, so they stay whole and copyable."""
    grid = Table(title=title, box=box.SIMPLE_HEAD, header_style="bold", title_justify="left")
    for column in columns:
        grid.add_column(
            column, overflow="fold", no_wrap=column in ("id", "state"), min_width=len(column)
        )
    return grid


def mask(secret: str) -> str:
    return secret[:10] + "…" if len(secret) > 10 else "…"


# ---------------------------------------------------------------------------------------------
# renderers


def agents_table(items: list[Json]) -> Table:
    grid = table(["username", "status", "active", "last seen", "unread", "webhook", "id"])
    for a in items:
        grid.add_row(
            a["username"],
            a["status"],
            _plain(a["active"]) + (" (never connected)" if a["never_connected"] else ""),
            ago(a["last_seen_at"]),
            str(a["unread"]),
            _plain(a["webhook_url"]),
            a["id"],
            style="dim" if a["status"] == "archived" else None,
        )
    return grid


def agent_fields(a: Json) -> Table:
    return fields(
        [
            ("id", a["id"]),
            ("username", a["username"]),
            ("name", a["name"]),
            ("description", a["description"]),
            ("status", a["status"]),
            ("active", a["active"]),
            ("never connected", a["never_connected"]),
            ("created", when(a["created_at"])),
            ("last seen", when(a["last_seen_at"])),
            ("webhook", a["webhook_url"]),
            ("unread", a["unread"]),
        ]
    )


def webhook_fields(hook: Json, reveal: bool) -> Table:
    secret = hook["signing_secret"]
    return fields(
        [
            ("url", hook["url"]),
            ("signing secret", secret if reveal else f"{mask(secret)} (--reveal to print it)"),
            ("previous secret expires", when(hook.get("previous_secret_expires_at"))),
        ]
    )


def threads_table(items: list[Json]) -> Table:
    grid = table(
        ["id", "title", "status", "opened by", "participants", "last activity"],
    )
    for t in items:
        grid.add_row(
            t["id"],
            t["title"],
            t["status"],
            t["opened_by"],
            _plain(t["participants"]),
            ago(t["last_activity_at"]),
        )
    return grid


def thread_view(t: Json) -> Group:
    header = fields(
        [
            ("id", t["id"]),
            ("title", t["title"]),
            ("goal", t["goal"]),
            ("status", t["status"]),
            ("opened by", t["opened_by"]),
            ("participants", t["participants"]),
            ("created", when(t["created_at"])),
            ("close requested", when(t["close_requested_at"])),
            ("closed", when(t["closed_at"])),
        ]
    )
    messages = t.get("messages") or []
    return Group(header, *(message_panel(m) for m in messages))


def message_panel(m: Json) -> Panel:
    parts: list[RenderableType] = []
    if m.get("summary"):
        parts.append(Text(m["summary"], style="italic"))
    parts.append(Text(m["body"]))
    if m.get("deliveries"):
        receipts = table(["id", "recipient", "state", "notified", "delivered", "fetched", "acked"])
        for d in m["deliveries"]:
            receipts.add_row(
                d["id"],
                d["recipient"],
                styled_state(d["state"]),
                ago(d["notified_at"]),
                ago(d["delivered_at"]),
                ago(d["fetched_at"]),
                ago(d["acknowledged_at"]),
            )
        parts.append(receipts)
    title = f"{m['sender']} · {m['kind']} · {when(m['created_at'])} · {m['id']}"
    return Panel(Group(*parts), title=escape(title), title_align="left")


def deliveries_table(items: list[Json], title: str | None = None) -> Table:
    grid = table(
        ["id", "state", "recipient", "accepted", "pub", "failure"],
        title=title,
    )
    for d in items:
        grid.add_row(
            d["id"],
            d["state"],
            d["recipient"],
            ago(d["accepted_at"]),
            str(d["publish_count"]),
            _plain(d["failure_reason"]),
            style=ROW_STYLES.get(d["state"]),
        )
    if not items:
        grid.caption = "no deliveries"
    return grid


def delivery_view(d: Json) -> Group:
    receipt = fields(
        [
            ("id", d["id"]),
            ("state", styled_state(d["state"])),
            ("recipient", d["recipient"]),
            ("thread", d["thread_id"]),
            ("message", d["message_id"]),
            *((stamp, when(d[f"{stamp}_at"])) for stamp in STAMPS),
            ("failure reason", d["failure_reason"]),
            ("publishes", d["publish_count"]),
            ("next attempt", when(d["next_attempt_at"])),
            ("outcome", d["outcome"]),
            ("note", d["note"]),
        ]
    )
    attempts = table(
        ["#", "publish", "trigger", "started", "ms", "status", "reason", "response"],
        title="Attempts",
    )
    for a in d["attempts"]:
        attempts.add_row(
            str(a["number"]),
            str(a["publish"]),
            a["trigger"],
            when(a["started_at"]),
            _plain(a["duration_ms"]),
            _plain(a["status_code"]),
            a["reason"],
            _plain(a["response_excerpt"]),
            style=None if a["reason"] == "ok" else "red",
        )
    if not d["attempts"]:
        attempts.caption = "no webhook attempts (the agent polls, or none was made yet)"
    return Group(receipt, attempts)


def stats_view(s: Json) -> Table:
    counts = Text("  ").join(
        Text(f"{state} {n}", style=STATE_STYLES.get(state, "") if n else "dim")
        for state, n in s["deliveries"].items()
    )
    agents, threads = s["agents"], s["threads"]
    return fields(
        [
            ("deliveries", counts),
            (
                "agents",
                f"{agents['total']} total, {agents['active']} active, "
                f"{agents['never_connected']} never connected, {agents['archived']} archived",
            ),
            (
                "threads",
                f"{threads['open']} open, {threads['close_requested']} close requested, "
                f"{threads['closed']} closed",
            ),
            ("oldest stalled", seconds(s["oldest_stalled_seconds"])),
            ("oldest unnotified", seconds(s["oldest_unnotified_seconds"])),
            (
                "last hour",
                f"{s['failed_last_hour']} failed deliveries, "
                f"{s['attempts_failed_last_hour']} failed attempts",
            ),
            ("last sweep", last_sweep(s.get("last_sweep_age_seconds"))),
            ("broker", s.get("broker", "—")),
        ]
    )


def last_sweep(age: float | None) -> str:
    return "never" if age is None else f"{seconds(age)} ago"


def seconds(value: float | None) -> str:
    if value is None:
        return "—"
    minutes, secs = divmod(int(value), 60)
    return f"{minutes} min {secs} s" if minutes else f"{value:.1f} s"


# ---------------------------------------------------------------------------------------------
# agents


@agents_app.command("list")
def agents_list(
    url: UrlOpt = DEFAULT_URL, token: TokenOpt = None, as_json: JsonOpt = False
) -> None:
    """Every agent of the workspace, archived ones included."""
    with connect(url, token, as_json) as api:
        emit(api.get("/agents"), as_json, lambda page: agents_table(page["items"]))


@agents_app.command("register")
def agents_register(
    name: Annotated[str, typer.Argument(help="The agent's name.", show_default=False)],
    description: Annotated[str | None, typer.Option(help="What the agent does.")] = None,
    webhook_url: Annotated[str | None, typer.Option(help="Where to notify it.")] = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Register an agent and print its API key (and webhook signing secret) — shown this once."""
    body = {"name": name, "description": description, "webhook_url": webhook_url}
    with connect(url, token, as_json) as api:
        emit(api.post("/agents", body), as_json, registered)


def registered(a: Json) -> Group:
    lines: list[RenderableType] = [
        Text(f"Registered {a['name']} (@{a['username']}, {a['id']})."),
        Text("API key (shown once; store it now, it is kept only as a hash):"),
        Text(f"  {a['api_key']}", style="bold green"),
    ]
    if a.get("webhook"):
        lines += [
            Text(f"Webhook: {a['webhook']['url']}"),
            Text("Signing secret (verify notifications with it):"),
            Text(f"  {a['webhook']['signing_secret']}", style="bold green"),
        ]
    return Group(*lines)


@agents_app.command("show")
def agents_show(
    agent: AgentArg, url: UrlOpt = DEFAULT_URL, token: TokenOpt = None, as_json: JsonOpt = False
) -> None:
    """One agent."""
    with connect(url, token, as_json) as api:
        emit(api.get(f"/agents/{seg(agent)}"), as_json, agent_fields)


@agents_app.command("archive")
def agents_archive(
    agent: AgentArg, url: UrlOpt = DEFAULT_URL, token: TokenOpt = None, as_json: JsonOpt = False
) -> None:
    """Archive an agent: its key stops working at once; its history stays. Idempotent."""
    with connect(url, token, as_json) as api:
        emit(
            api.post(f"/agents/{seg(agent)}/archive"),
            as_json,
            lambda a: Text(f"Archived @{a['username']} ({a['id']})."),
        )


# ---------------------------------------------------------------------------------------------
# webhook


def webhook_path(agent: str) -> str:
    return f"/agents/{seg(agent)}/webhook"


@webhook_app.command("set")
def webhook_set(
    agent: AgentArg,
    webhook_url: Annotated[str, typer.Argument(metavar="URL", help="The new webhook URL.")],
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Set or change an agent's webhook URL (a signing secret is minted the first time)."""
    with connect(url, token, as_json) as api:
        emit(
            api.put(webhook_path(agent), {"url": webhook_url}),
            as_json,
            lambda hook: webhook_fields(hook, reveal=False),
        )


@webhook_app.command("show")
def webhook_show(
    agent: AgentArg,
    reveal: Annotated[bool, typer.Option(help="Print the whole signing secret.")] = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """An agent's webhook URL and signing secret (masked unless --reveal; --json is verbatim)."""
    with connect(url, token, as_json) as api:
        emit(api.get(webhook_path(agent)), as_json, lambda hook: webhook_fields(hook, reveal))


@webhook_app.command("remove")
def webhook_remove(agent: AgentArg, url: UrlOpt = DEFAULT_URL, token: TokenOpt = None) -> None:
    """Remove an agent's webhook and discard its signing secret for good."""
    with connect(url, token) as api:
        api.delete(webhook_path(agent))
    out.print(f"Removed the webhook of {escape(agent)}.", highlight=False)


@webhook_app.command("rotate")
def webhook_rotate(
    agent: AgentArg, url: UrlOpt = DEFAULT_URL, token: TokenOpt = None, as_json: JsonOpt = False
) -> None:
    """Mint a new signing secret and print it; the previous one keeps signing for 24 hours."""
    with connect(url, token, as_json) as api:
        emit(api.post(webhook_path(agent) + "/rotate"), as_json, rotated)


def rotated(hook: Json) -> Group:
    return Group(
        Text("New signing secret (store it now):"),
        Text(f"  {hook['signing_secret']}", style="bold green"),
        Text(
            "The previous secret keeps signing until "
            f"{when(hook.get('previous_secret_expires_at'))} UTC."
        ),
    )


# ---------------------------------------------------------------------------------------------
# threads and posting


@threads_app.command("list")
def threads_list(
    status: Annotated[
        str | None, typer.Option(help="open, close_requested or closed (default: any).")
    ] = None,
    limit: LimitOpt = None,
    all_pages: Annotated[
        bool, typer.Option("--all", help="Follow next_cursor to the last page.")
    ] = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every thread, most recent activity first."""
    with connect(url, token, as_json) as api:
        page = every_page(api, "/threads", all_pages, status=status, limit=limit)
    emit(page, as_json, lambda p: with_more(threads_table(p["items"]), p))


@threads_app.command("open")
def threads_open(
    title: Annotated[str, typer.Argument(help="What the thread is about.", show_default=False)],
    participant: Annotated[
        list[str] | None,
        typer.Option("--participant", "-p", help="A participant's username (repeat for more)."),
    ] = None,
    goal: Annotated[str | None, typer.Option(help="What done looks like.")] = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Open a thread as the operator."""
    body = {"title": title, "goal": goal, "participants": participant or []}
    with connect(url, token, as_json) as api:
        emit(api.post("/threads", body), as_json, lambda t: Text(f"Opened thread {t['id']}."))


@threads_app.command("show")
def threads_show(
    thread: ThreadArg, url: UrlOpt = DEFAULT_URL, token: TokenOpt = None, as_json: JsonOpt = False
) -> None:
    """A thread: participants, status and every message with each recipient's receipt."""
    with connect(url, token, as_json) as api:
        emit(api.get(f"/threads/{seg(thread)}"), as_json, thread_view)


def thread_status_line(t: Json) -> Text:
    return Text(f"Thread {t['id']} is now {t['status']}.")


@threads_app.command("close")
def threads_close(
    thread: ThreadArg, url: UrlOpt = DEFAULT_URL, token: TokenOpt = None, as_json: JsonOpt = False
) -> None:
    """Close a thread (confirming a close request, or outright)."""
    with connect(url, token, as_json) as api:
        emit(api.post(f"/threads/{seg(thread)}/close"), as_json, thread_status_line)


@threads_app.command("dismiss")
def threads_dismiss(
    thread: ThreadArg, url: UrlOpt = DEFAULT_URL, token: TokenOpt = None, as_json: JsonOpt = False
) -> None:
    """Dismiss a pending close request; the thread is open again."""
    with connect(url, token, as_json) as api:
        emit(api.post(f"/threads/{seg(thread)}/close/dismiss"), as_json, thread_status_line)


def post(
    thread: ThreadArg,
    body: Annotated[str, typer.Argument(help="The message.", show_default=False)],
    summary: Annotated[str | None, typer.Option(help="A one-line summary.")] = None,
    kind: Annotated[str | None, typer.Option(help="The message kind.")] = None,
    reply_to: Annotated[str | None, typer.Option(help="The message this answers.")] = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Post into a thread as the operator (joining it)."""
    message = {"body": body, "summary": summary, "kind": kind, "reply_to": reply_to}
    with connect(url, token, as_json) as api:
        emit(api.post(f"/threads/{seg(thread)}/messages", message), as_json, posted)


def posted(result: Json) -> Text:
    recipients = ", ".join(f"{d['recipient']} ({d['state']})" for d in result["deliveries"])
    return Text(f"Posted {result['message']['id']} to {recipients or 'nobody'}.")


# ---------------------------------------------------------------------------------------------
# deliveries


@deliveries_app.command("list")
def deliveries_list(
    state: Annotated[
        str | None, typer.Option(help="A derived state: stalled, failed, notified, …")
    ] = None,
    agent: Annotated[str | None, typer.Option(help="Recipient id or username.")] = None,
    thread: Annotated[str | None, typer.Option(help="Thread id.")] = None,
    limit: LimitOpt = None,
    all_pages: Annotated[
        bool, typer.Option("--all", help="Follow next_cursor to the last page.")
    ] = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delivery receipts, newest first."""
    query = {"state": state, "agent": agent, "thread": thread, "limit": limit}
    with connect(url, token, as_json) as api:
        page = every_page(api, "/deliveries", all_pages, **query)
    emit(page, as_json, lambda p: with_more(deliveries_table(p["items"]), p))


def every_page(api: Client, path: str, all_pages: bool, **query: Any) -> Json:
    """One page, or with ``all_pages`` every item of every page (``next_cursor`` then None)."""
    if not all_pages:
        return api.get(path, **query)
    items = [item for page in api.pages(path, **query) for item in page["items"]]
    return {"items": items, "next_cursor": None}


def with_more(grid: Table, page: Json) -> Table:
    if page.get("next_cursor"):
        grid.caption = "more: --all for every page"
    return grid


@deliveries_app.command("show")
def deliveries_show(
    delivery: DeliveryArg,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One receipt with its attempt log."""
    with connect(url, token, as_json) as api:
        emit(api.get(f"/deliveries/{seg(delivery)}"), as_json, delivery_view)


@deliveries_app.command("redeliver")
def deliveries_redeliver(
    delivery: DeliveryArg,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Publish the notification again (a failed one too); adds stamps, clears none."""
    with connect(url, token, as_json) as api:
        emit(
            api.post(f"/deliveries/{seg(delivery)}/redeliver"),
            as_json,
            lambda d: Text(f"Redelivery of {d['id']} published (state: {d['state']})."),
        )


# ---------------------------------------------------------------------------------------------
# operator tokens


def tokens_table(items: list[Json]) -> Table:
    grid = table(["id", "label", "created", "last used", "revoked", ""])
    for t in items:
        grid.add_row(
            t["id"],
            _plain(t["label"]),
            when(t["created_at"]),
            ago(t["last_used_at"]),
            when(t["revoked_at"]) if t["revoked_at"] else "—",
            "(this one)" if t["current"] else "",
            style="dim" if t["revoked_at"] else None,
        )
    return grid


def token_created(t: Json) -> Group:
    return Group(
        Text(f"Created operator token {t['id']}" + (f" ({t['label']})." if t["label"] else ".")),
        Text("Token (shown once; store it now, it is kept only as a hash):"),
        Text(f"  {t['token']}", style="bold green"),
    )


@tokens_app.command("create")
def tokens_create(
    label: Annotated[
        str | None, typer.Option(help="What it is for (shown in lists), like 'ci' or 'alice'.")
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Mint another operator token and print it (shown this once)."""
    with connect(url, token, as_json) as api:
        emit(api.post("/tokens", {"label": label}), as_json, token_created)


@tokens_app.command("list")
def tokens_list(
    url: UrlOpt = DEFAULT_URL, token: TokenOpt = None, as_json: JsonOpt = False
) -> None:
    """Every operator token of the workspace, revoked ones included (never the token itself)."""
    with connect(url, token, as_json) as api:
        emit(api.get("/tokens"), as_json, lambda page: tokens_table(page["items"]))


@tokens_app.command("revoke")
def tokens_revoke(
    token_id: Annotated[
        str, typer.Argument(metavar="ID", help="The token's id (otk_…).", show_default=False)
    ],
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """Revoke an operator token at once; the dashboard sessions signed in with it end too.
    The workspace's last live token cannot be revoked: create another first."""
    with connect(url, token) as api:
        api.delete(f"/tokens/{seg(token_id)}")
    out.print(f"Revoked operator token {escape(token_id)}.", highlight=False)


# ---------------------------------------------------------------------------------------------
# stats and watch


def stats(url: UrlOpt = DEFAULT_URL, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """Deliveries by state, agents, threads, the oldest stalled delivery and recent failures."""
    with connect(url, token, as_json) as api:
        emit(api.get("/stats"), as_json, stats_view)


def watch(
    interval: Annotated[float, typer.Option(min=0.1, help="Seconds between refreshes.")] = 2.0,
    state: Annotated[str | None, typer.Option(help="Only deliveries in this state.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="How many recent deliveries.")] = 20,
    once: Annotated[bool, typer.Option(help="Render one frame and exit.")] = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """A live view of recent deliveries and the counters; stalled rows yellow, failed red.
    Ctrl-C stops it."""
    # No request spinner here: the view has its own, and two live displays would fight.
    with Client(url, token) as api:
        if once:
            out.print(watch_frame(api, state, limit))
            return
        with suppress(KeyboardInterrupt):  # Ctrl-C is the normal way out
            watch_live(api, interval, state, limit)


def watch_live(api: Client, interval: float, state: str | None, limit: int) -> None:
    header = Spinner("dots", text=Text(f"watching {api.url} (every {interval:g} s; Ctrl-C stops)"))
    with Live(console=out, refresh_per_second=8) as live:
        while True:
            try:
                frame: RenderableType = watch_frame(api, state, limit)
            except CliError as exc:
                if exc.exit_code != EXIT_UNREACHABLE:
                    raise
                # A server restart should not end the watch: say so and keep trying.
                frame = Text(f"{exc.format_message()} — retrying", style="red")
            live.update(Group(header, frame))
            time.sleep(interval)


def watch_frame(api: Client, state: str | None, limit: int) -> Group:
    page = api.get("/deliveries", state=state, limit=limit)
    counters = api.get("/stats")
    title = f"Recent deliveries{f' ({state})' if state else ''} at {when(counters['generated_at'])}"
    return Group(stats_view(counters), deliveries_table(page["items"], title=title))
