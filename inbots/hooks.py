"""What the edges do after a commit: wake long-polls (and, later, publish notifications).

Services never reach for these directly; they register ``uow.after_commit`` callbacks that call
the app's ``Hooks``, so nothing leaves the process before the data is durable.
"""

from __future__ import annotations

from collections.abc import Iterable

from inbots.wakeups import WakeupHub


class Hooks:
    def __init__(self) -> None:
        self.wakeups = WakeupHub()

    def inbox_changed(self, agent_ids: Iterable[str]) -> None:
        self.wakeups.notify(agent_ids)
