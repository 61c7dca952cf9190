"""What each answer of the API looks like for people (``--output table``): one function per
answer, taking the decoded JSON and returning something Rich draws. Formats for scripts (tsv,
json) need no view: :mod:`inbots.cli.render` prints the answer's own fields."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from inbots.cli.render import Json, Prose, ago, cell, fields, mask, plain, seconds, table, when

ROW_STYLES = {"stalled": "yellow", "failed": "bold red", "held": "magenta", "rejected": "red"}
STATE_STYLES = {**ROW_STYLES, "acknowledged": "green", "accepted": "dim"}
# The stamps of a receipt, in the order a delivery moves.
STAMPS = (
    "accepted",
    "notified",
    "delivered",
    "fetched",
    "working",
    "acknowledged",
    "failed",
    "stalled",
)


def styled_state(state: str) -> Text:
    return Text(state, style=STATE_STYLES.get(state, ""))


def shown_once(what: str, secret: str) -> list[RenderableType]:
    return [
        Text(f"{what} (shown once; store it now, it is kept only as a hash):"),
        Text(f"  {secret}", style="bold green"),
    ]


# ---------------------------------------------------------------------------------------------
# agents and webhooks


def agents_table(items: list[Json]) -> Table:
    grid = table(["username", "status", "active", "last seen", "unread", "webhook", "id"])
    for a in items:
        grid.add_row(
            a["username"],
            a["status"],
            plain(a["active"]) + (" (never connected)" if a["never_connected"] else ""),
            ago(a["last_seen_at"]),
            str(a["unread"]),
            cell(a["webhook_url"]),
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
            ("brief", "yes (inbots agents brief)" if a.get("has_brief") else "none"),
        ]
    )


def registered(a: Json) -> Group:
    lines: list[RenderableType] = [
        Text(f"Registered {a['name']} (@{a['username']}, {a['id']})."),
        *shown_once("API key", a["api_key"]),
    ]
    if a.get("webhook"):
        lines += [
            Text(f"Webhook: {a['webhook']['url']}"),
            Text("Signing secret (verify notifications with it):"),
            Text(f"  {a['webhook']['signing_secret']}", style="bold green"),
        ]
    return Group(*lines)


def brief_view(b: Json) -> Group:
    if not b.get("brief"):
        return Group(Text(f"@{b['username']} has no brief."))
    return Group(
        Text(f"Brief of @{b['username']} (updated {when(b['updated_at'])}):", style="bold"),
        Text(b["brief"]),
    )


def archived(a: Json) -> Text:
    return Text(f"Archived @{a['username']} ({a['id']}).")


def webhook_fields(hook: Json, *, reveal: bool = False) -> Table:
    secret = hook["signing_secret"]
    return fields(
        [
            ("url", hook["url"]),
            ("signing secret", secret if reveal else f"{mask(secret)} (--reveal to print it)"),
            ("previous secret expires", when(hook.get("previous_secret_expires_at"))),
            ("receives", ", ".join(hook.get("webhook_events") or []) or "nothing"),
        ]
    )


def alert_webhook_fields(hook: Json) -> Table | Group:
    grid = fields(
        [
            ("url", hook["url"]),
            ("receives", ", ".join(hook.get("events") or []) or "nothing"),
            ("previous secret expires", when(hook.get("previous_secret_expires_at"))),
        ]
    )
    if not hook.get("signing_secret"):
        return grid
    return Group(
        grid,
        Text("Signing secret (store it now; it is not shown again):"),
        Text(f"  {hook['signing_secret']}", style="bold green"),
    )


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
# threads and messages


def threads_table(items: list[Json]) -> Table:
    grid = table(["id", "title", "status", "opened by", "participants", "last activity"])
    for t in items:
        grid.add_row(
            t["id"],
            cell(t["title"]),
            t["status"],
            t["opened_by"],
            cell(t["participants"]),
            ago(t["last_activity_at"]),
        )
    return grid


def thread_view(t: Json) -> Group:
    header = fields(
        [
            ("id", t["id"]),
            ("title", t["title"]),
            ("goal", t["goal"]),
            ("ref", t.get("ref")),
            ("status", t["status"]),
            ("opened by", t["opened_by"]),
            ("participants", t["participants"]),
            ("created", when(t["created_at"])),
            ("close requested", when(t["close_requested_at"])),
            ("closed", when(t["closed_at"])),
        ]
    )
    return Group(header, *(message_panel(m) for m in t.get("messages") or []))


def message_panel(m: Json) -> Panel:
    parts: list[RenderableType] = []
    if m.get("summary"):
        parts.append(Prose(m["summary"], style="italic"))
    parts.append(Prose(m["body"]))
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
    urgent = " · urgent" if m.get("priority") == "urgent" else ""
    title = f"{m['sender']} · {m['kind']}{urgent} · {when(m['created_at'])} · {m['id']}"
    return Panel(Group(*parts), title=escape(title), title_align="left")


def thread_opened(t: Json) -> Text:
    return Text(f"Opened thread {t['id']}.")


def thread_status(t: Json) -> Text:
    return Text(f"Thread {t['id']} is now {t['status']}.")


def posted(result: Json) -> Text:
    recipients = ", ".join(f"{d['recipient']} ({d['state']})" for d in result["deliveries"])
    return Text(f"Posted {result['message']['id']} to {recipients or 'nobody'}.")


# ---------------------------------------------------------------------------------------------
# the operator's inbox


def inbox_table(items: list[Json]) -> Table:
    with_bodies = any("body" in i for i in items)
    columns = ["id", "state", "from", "thread", "sent", "summary"]
    grid = table([*columns, "body"] if with_bodies else columns)
    for i in items:
        thread = i["thread_title"] + (f" [{i['thread_ref']}]" if i.get("thread_ref") else "")
        row = [
            i["message_id"],
            i["state"],
            i["sender"],
            cell(thread),
            ago(i["sent_at"]),
            cell(("URGENT " if i["priority"] == "urgent" else "") + (i["summary"] or "")),
        ]
        if with_bodies:
            row.append(cell(i.get("body")))
        grid.add_row(*row, style="bold" if i["priority"] == "urgent" else None)
    if not items:
        grid.caption = "no mail"
    return grid


def acked(result: Json) -> Text:
    parts = [
        f"{label}: {', '.join(result[key])}"
        for key, label in (
            ("acknowledged", "acknowledged"),
            ("already", "already acknowledged"),
            ("not_found", "not found"),
            ("expired", "expired (no longer yours)"),
        )
        if result.get(key)
    ]
    return Text("; ".join(parts) or "Nothing to acknowledge.")


# ---------------------------------------------------------------------------------------------
# the approval gate


START = 120  # how much of a held body or brief a row of `inbots pending` shows


def approvals_table(items: list[Json]) -> Table:
    grid = table(["id", "what", "from", "to", "thread", "held", "text"])
    for i in items:
        urgent = i.get("priority") == "urgent"
        if i.get("subject") == "brief":
            text = f"brief: {i.get('brief') or ''}"
        elif i.get("subject") == "thread":
            text = " · ".join(f"{k}: {i[k]}" for k in ("thread_goal", "thread_ref") if i.get(k))
        else:
            text = " — ".join(v for v in (i.get("summary"), i.get("body")) if v)
        thread = i.get("thread_title") or i.get("thread_id")
        grid.add_row(
            i.get("id") or i.get("message_id"),
            ("URGENT " if urgent else "") + (i.get("kind") or i.get("subject") or "message"),
            i["sender"],
            cell(i.get("recipients") or ("everyone" if i.get("subject") == "brief" else None)),
            cell(thread),
            ago(i["held_at"]),
            cell(text if len(text) <= START else text[: START - 1] + "…"),
            style="bold" if urgent else None,
        )
    if not items:
        grid.caption = "nothing waits for approval"
    return grid


def decided(d: Json) -> Text:
    subject = d.get("subject", "")
    what = {"thread": f"thread {d['id']}", "brief": f"the brief of {d['sender']}"}.get(
        subject, f"{d.get('id') or d['message_id']} from {d['sender']}"
    )
    if d["state"] == "approved":
        done = {"thread": "its participants see it", "brief": "every agent may read it"}
        return Text(f"Approved {what}: {done.get(subject, 'its recipients have it now')}.")
    reason = f" ({d['reason']})" if d.get("reason") else ""
    gone = {"thread": "it stays hidden", "brief": "it is removed"}
    told = "it never reaches its recipients, and its sender is told"
    return Text(f"Rejected {what}{reason}: {gone.get(subject, told)}.")


def policy_fields(p: Json) -> Table:
    rules = p["approval"]
    return fields(
        [
            ("kinds held", rules["kinds"]),
            ("priorities held", rules["priorities"]),
            ("senders held", rules["senders"]),
            ("updated", when(p.get("updated_at"))),
        ]
    )


# ---------------------------------------------------------------------------------------------
# deliveries


def deliveries_table(items: list[Json], title: str | None = None) -> Table:
    grid = table(["id", "state", "recipient", "accepted", "pub", "failure"], title=title)
    for d in items:
        grid.add_row(
            d["id"],
            d["state"],
            d["recipient"],
            ago(d["accepted_at"]),
            str(d["publish_count"]),
            cell(d["failure_reason"]),
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
            *((stamp, when(d.get(f"{stamp}_at"))) for stamp in STAMPS),
            # The approval gate's stamps, only on deliveries of a held message.
            *(
                (stamp, when(d[f"{stamp}_at"]))
                for stamp in ("held", "approved", "rejected")
                if d.get(f"{stamp}_at")
            ),
            *((("rejection reason", d["rejection_reason"]),) if d.get("rejection_reason") else ()),
            ("failure reason", d["failure_reason"]),
            ("publishes", d["publish_count"]),
            ("next attempt", when(d["next_attempt_at"])),
            ("working note", d.get("working_note")),
            ("outcome", d["outcome"]),
            ("note", d["note"]),
        ]
    )
    empty = "no webhook attempts (the agent polls, or none was made yet)"
    return Group(receipt, _attempts_table(d["attempts"], empty))


def _attempts_table(attempts_of: list[Json], empty: str) -> Table:
    attempts = table(
        ["#", "publish", "trigger", "started", "ms", "status", "reason", "response"],
        title="Attempts",
    )
    for a in attempts_of:
        attempts.add_row(
            str(a["number"]),
            str(a["publish"]),
            a["trigger"],
            when(a["started_at"]),
            cell(a["duration_ms"]),
            cell(a["status_code"]),
            a["reason"],
            cell(a["response_excerpt"]),
            style=None if a["reason"] == "ok" else "red",
        )
    if not attempts_of:
        attempts.caption = empty
    return attempts


# events


def events_table(items: list[Json], title: str | None = None) -> Table:
    grid = table(["id", "type", "state", "recipient", "actor", "created", "pub"], title=title)
    for e in items:
        grid.add_row(
            e["id"],
            e["type"],
            e["state"],
            e["recipient"],
            e["actor"],
            ago(e["created_at"]),
            str(e["publish_count"]),
            style=ROW_STYLES.get(e["state"]),
        )
    if not items:
        grid.caption = "no events"
    return grid


def event_view(e: Json) -> Group:
    summary = fields(
        [
            ("id", e["id"]),
            ("type", e["type"]),
            ("state", styled_state(e["state"])),
            ("recipient", e["recipient"]),
            ("actor", e["actor"]),
            ("thread", e["thread_id"]),
            ("message", e["message_id"]),
            ("delivery", e["delivery_id"]),
            ("outcome", e["outcome"]),
            ("note", e["note"]),
            ("created", when(e["created_at"])),
            ("shown", when(e["shown_at"])),
            ("notified", when(e["notified_at"])),
            ("failed", when(e["failed_at"])),
            ("failure reason", e["failure_reason"]),
            ("publishes", e["publish_count"]),
            ("next attempt", when(e["next_attempt_at"])),
        ]
    )
    empty = "no webhook attempts (no webhook receives it, or none was made yet)"
    return Group(summary, _attempts_table(e["attempts"], empty))


def redelivered(d: Json) -> Text:
    return Text(f"Redelivery of {d['id']} published (state: {d['state']}).")


# ---------------------------------------------------------------------------------------------
# operator tokens


def tokens_table(items: list[Json]) -> Table:
    grid = table(["id", "label", "created", "last used", "revoked", ""])
    for t in items:
        grid.add_row(
            t["id"],
            cell(t["label"]),
            when(t["created_at"]),
            ago(t["last_used_at"]),
            when(t["revoked_at"]),
            "(this one)" if t["current"] else "",
            style="dim" if t["revoked_at"] else None,
        )
    return grid


def token_created(t: Json) -> Group:
    return Group(
        Text(f"Created operator token {t['id']}" + (f" ({t['label']})." if t["label"] else ".")),
        *shown_once("Token", t["token"]),
    )


# ---------------------------------------------------------------------------------------------
# stats and the watch view


def stats_view(s: Json) -> Table:
    counts = Text("  ").join(
        Text(f"{state} {n}", style=STATE_STYLES.get(state, "") if n else "dim")
        for state, n in s["deliveries"].items()
    )
    agents, threads = s["agents"], s["threads"]
    sweep = s.get("last_sweep_age_seconds")
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
            ("last sweep", "never" if sweep is None else f"{seconds(sweep)} ago"),
            ("broker", s.get("broker", "—")),
            ("queue", queue_line(s.get("queue"))),
        ]
    )


def queue_line(queue: Json | None) -> Text:
    """The jobs waiting for a worker: how many, the oldest's wait, and each queue's share."""
    if queue is None:
        return Text("unknown (the broker does not answer)", style="yellow")
    if not queue["depth"]:
        return Text("empty", style="dim")
    lanes = ", ".join(f"{name} {n}" for name, n in queue["queues"].items() if n)
    oldest = queue["oldest_age_seconds"]
    waited = "" if oldest is None else f", oldest waiting {seconds(oldest)}"
    return Text(f"{queue['depth']} waiting ({lanes}){waited}")


def watch_frame(
    page: Json, counters: Json, state: str | None, recipient: str | None = None
) -> Group:
    """One frame of ``inbots watch``: the counters, then the most recent deliveries."""
    which = ", ".join(x for x in (state, f"for {recipient}" if recipient else None) if x)
    title = f"Recent deliveries{f' ({which})' if which else ''} at {when(counters['generated_at'])}"
    return Group(stats_view(counters), deliveries_table(page["items"], title=title))


# ---------------------------------------------------------------------------------------------
# enrolment tokens, agent keys and sessions


def enrollments_table(items: list[Json]) -> Table:
    grid = table(["id", "label", "state", "uses left", "expires", "last used"])
    for e in items:
        grid.add_row(
            e["id"],
            cell(e["label"]),
            e["state"],
            f"{e['uses_left']}/{e['uses']}",
            when(e["expires_at"]),
            ago(e["last_used_at"]),
            style=None if e["state"] == "active" else "dim",
        )
    return grid


def enrollment_created(e: Json) -> Group:
    return Group(
        Text(
            f"Created enrolment token {e['id']}"
            + (f" ({e['label']})" if e["label"] else "")
            + f": {e['uses']} use{'s' if e['uses'] != 1 else ''}, until {when(e['expires_at'])}."
        ),
        *shown_once("Token", e["token"]),
        Text("An agent registers with it: inbots mcp --enroll <token> --name NAME"),
    )


def keys_table(items: list[Json]) -> Table:
    grid = table(["id", "label", "key", "created", "last used"])
    for k in items:
        grid.add_row(
            k["id"],
            cell(k["label"]),
            f"{k['hint']}…",
            when(k["created_at"]),
            ago(k["last_used_at"]),
        )
    return grid


def key_created(k: Json) -> Group:
    return Group(
        Text(f"Issued key {k['id']}" + (f" ({k['label']})." if k["label"] else ".")),
        *shown_once("API key", k["api_key"]),
    )


def sessions_table(items: list[Json]) -> Table:
    grid = table(["id", "label", "client", "active", "first seen", "last seen"])
    for s in items:
        grid.add_row(
            s["id"],
            cell(s["label"]),
            cell(s["client"]),
            "yes" if s["active"] else "no",
            when(s["first_seen_at"]),
            ago(s["last_seen_at"]),
            style=None if s["active"] else "dim",
        )
    return grid
