"""``inbots stats``: the workspace's counters."""

from __future__ import annotations

from inbots.cli import views
from inbots.cli.options import Operator, operator_command


@operator_command()
def stats(op: Operator) -> None:
    """Deliveries by state, agents, threads, the oldest stalled delivery, recent failures and
    the jobs waiting for a worker."""
    op.show(op.api.stats(), views.stats_view)
