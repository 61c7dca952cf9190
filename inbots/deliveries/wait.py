"""The long-poll, once for every edge (``GET /v1/inbox/wait`` and the MCP ``wait_for_mail``): new
mail, and with ``receipts`` the acknowledgements of the caller's own mail (events).

Waiting holds neither a database connection nor a thread: each check is one short unit of work
run off the event loop, and in between the caller sleeps on the wake-up hub until a committed
send wakes it (or the timeout passes).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Concatenate, ParamSpec, Protocol, TypeVar

import anyio

from inbots.caller import Caller
from inbots.config import Settings
from inbots.db.uow import UnitOfWork
from inbots.deliveries import service
from inbots.deliveries.receipts import has_unshown_receipts, show_receipts
from inbots.deliveries.schemas import Waited
from inbots.dispatch.wakeups import WakeupHub
from inbots.errors import Invalid

P = ParamSpec("P")
T = TypeVar("T")


class AsyncRun(Protocol):
    """Runs one service call in its own unit of work, off the event loop, as the caller."""

    def __call__(
        self,
        fn: Callable[Concatenate[UnitOfWork, Caller, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> Awaitable[T]: ...


def wait_seconds(timeout: float | None, settings: Settings) -> float:
    """The long-poll rule, for every edge: none or NaN means the default (over HTTP, text that
    is no number is refused before: ``422``, field ``timeout``); at least 1 s; a larger value is
    capped at ``INBOTS_WAIT_MAX_SECONDS``, not an error."""
    default, maximum = settings.wait_default_seconds, settings.wait_max_seconds
    if timeout is None or math.isnan(timeout):
        return default
    return min(max(float(timeout), 1.0), maximum)


def wants_receipts(events: str | None) -> bool:
    """``events=receipts``: the long-poll also answers with receipts of the caller's own mail.
    Nothing else is an event the long-poll knows."""
    if events is None or events == "":
        return False
    names = {name.strip() for name in events.split(",") if name.strip()}
    unknown = names - {"receipts"}
    if unknown:
        raise Invalid(
            f"events may only be 'receipts' (got {', '.join(sorted(map(repr, unknown)))}); "
            "leave it out to wait for mail only.",
            field="events",
        )
    return bool(names)


async def wait_for_mail(
    run: AsyncRun, hub: WakeupHub, caller: Caller, seconds: float, *, receipts: bool = False
) -> Waited:
    """Answer as soon as the caller has unacknowledged mail it has not been shown yet (listing it
    as the inbox does, and stamping it delivered) or, with ``receipts``, a recipient's
    acknowledgement of its own mail it has not been shown (stamping it shown), or at the timeout
    with ``items`` and ``receipts`` empty."""
    deadline = anyio.current_time() + seconds

    async def news() -> bool:
        if await run(service.has_unshown):
            return True
        return receipts and await run(has_unshown_receipts)

    with hub.listen(caller.agent_id) as woken:
        while not await news():
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                waiting = await run(service.waiting_count)
                return Waited(items=[], returned=0, waiting=waiting, more=waiting > 0)
            with anyio.move_on_after(remaining):
                await woken.wait()
            woken.clear()
    inbox = await run(service.inbox, None, unshown_only=True)
    shown = await run(show_receipts) if receipts else []
    return Waited(**dict(inbox), receipts=shown)
