"""The operator commands, one module per group; each is a thin adapter: its own options, one or
two API calls, and a view from :mod:`inbots.cli.views`. The shared options are
:mod:`inbots.cli.options`'s."""

from __future__ import annotations

import typer

from inbots.cli.commands import (
    agents,
    alerts,
    approvals,
    deliveries,
    enroll,
    events,
    inbox,
    reservations,
    stats,
    threads,
    tokens,
    watch,
    webhook,
)


def add_operator_commands(app: typer.Typer) -> None:
    """Mount the operator commands on the ``inbots`` app."""
    app.add_typer(agents.app, name="agents")
    app.add_typer(webhook.app, name="webhook")
    app.add_typer(alerts.app, name="alerts")
    app.add_typer(threads.app, name="threads")
    app.add_typer(deliveries.app, name="deliveries")
    app.add_typer(events.app, name="events")
    app.add_typer(tokens.app, name="tokens")
    app.add_typer(reservations.app, name="reservations")
    app.add_typer(reservations.guard_app, name="guard")
    app.command("enroll")(enroll.enroll_command)
    app.command("post")(threads.post)
    app.command("inbox")(inbox.inbox)
    app.command("reply")(inbox.reply)
    app.command("ack")(inbox.ack)
    app.command("pending")(approvals.pending)
    app.command("approve")(approvals.approve)
    app.command("reject")(approvals.reject)
    app.add_typer(approvals.policy_app, name="policy")
    app.command("stats")(stats.stats)
    app.command("watch")(watch.watch)
