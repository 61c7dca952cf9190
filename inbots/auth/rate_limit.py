"""An agent's rate limit (agents-and-governance.md §3): one token bucket per agent
(``send_buckets``) of ``rate_limit_burst`` tokens, refilled at ``rate_limit_per_minute``, that
every write the agent makes spends from:

- a send: one token, plus one for each recipient beyond the first :data:`FREE_RECIPIENTS`
  (:func:`send_cost`; the caps and the PostgreSQL send path are :mod:`inbots.messages.governance`);
- one token each: opening a thread, adding a participant, a close request, setting its brief, a
  new session (an ``X-Inbots-Session`` label or an MCP session the agent was not seen through
  before), issuing or revoking a key, setting, removing or rotating its webhook.

Reads, acknowledgements and ``working`` / ``received`` stamps spend nothing: they store no new
rows, a heartbeat is frequent by design, and an acknowledgement is how an inbox empties. The
operator is never limited.

A spend is one upsert that refills and spends at once, in the write's own transaction (the row
stays locked until it commits), so every web process shares the bucket; a refused write raises
:class:`~inbots.errors.RateLimited` (429 with ``Retry-After``) and its transaction rolls back, so
nothing of it is stored and no token is spent.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Float, bindparam, case
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from inbots.caller import Caller
from inbots.config import Settings
from inbots.db.uow import UnitOfWork
from inbots.errors import Invalid, RateLimited
from inbots.models.messages import SendBucket

# A send's one token covers this many recipients; each one more costs a token.
FREE_RECIPIENTS = 10


def applies(settings: Settings, caller: Caller) -> bool:
    """Whether the caller's writes spend tokens: an agent's, while the limit is on."""
    return bool(settings.rate_limit_per_minute and settings.rate_limit_burst) and (
        not caller.is_operator
    )


def send_cost(recipients: int) -> int:
    """What a send to ``recipients`` agents spends: one token, plus one per recipient beyond
    the first :data:`FREE_RECIPIENTS`."""
    return 1 + max(0, recipients - FREE_RECIPIENTS)


def check_send_cost(settings: Settings, recipients: int, field: str | None) -> int:
    """A send's cost, or 422 when it is more than the bucket can ever hold: no wait would let
    it through."""
    cost = send_cost(recipients)
    if cost > settings.rate_limit_burst:
        most = settings.rate_limit_burst - 1 + FREE_RECIPIENTS
        raise Invalid(
            f"This send goes to {recipients} recipients, which costs {cost} tokens of your rate "
            f"limit (one, plus one for each recipient beyond the first {FREE_RECIPIENTS}), and "
            f"your bucket holds at most {settings.rate_limit_burst} (INBOTS_RATE_LIMIT_BURST): "
            f"it can never go at once. Send to at most {most} recipients at a time, or ask the "
            "operator to raise INBOTS_RATE_LIMIT_BURST. Nothing was stored.",
            field=field,
        )
    return cost


def _spending(upsert: Callable[[type[SendBucket]], Any]) -> Any:
    """:func:`spend`'s upsert for one dialect, built once: it refills the bucket and spends at
    once, returning what is left. Its values: ``b_agent``, ``b_cost``, ``b_burst``,
    ``b_per_second`` and ``b_now`` (seconds since the epoch)."""
    now = bindparam("b_now", type_=Float)
    burst = bindparam("b_burst", type_=Float)
    cost = bindparam("b_cost", type_=Float)
    refilled = SendBucket.tokens + (now - SendBucket.stamp) * bindparam("b_per_second", Float)
    statement = upsert(SendBucket).values(
        agent_id=bindparam("b_agent"), tokens=burst - cost, stamp=now
    )
    return statement.on_conflict_do_update(
        index_elements=[SendBucket.agent_id],
        set_={"tokens": case((refilled > burst, burst), else_=refilled) - cost, "stamp": now},
    ).returning(SendBucket.tokens)


_SPEND = {"sqlite": _spending(sqlite_insert), "postgresql": _spending(postgresql_insert)}


def spend(uow: UnitOfWork, caller: Caller, tokens: int = 1, *, recipients: int = 0) -> None:
    """Spend ``tokens`` of the caller's bucket in this transaction, or refuse the write
    (``RateLimited``) if the bucket cannot cover them yet. Does nothing for the operator or
    with the limit off. ``recipients``: the send's, for the refusal's sentence."""
    s = uow.settings
    if not applies(s, caller):
        return
    connection = uow.session.connection()
    values = {
        "b_agent": caller.agent_id,
        "b_cost": float(tokens),
        "b_burst": float(s.rate_limit_burst),
        "b_per_second": s.rate_limit_per_minute / 60.0,
        "b_now": time.time(),
    }
    left = connection.execute(_SPEND[connection.dialect.name], values).scalar_one()
    if left < 0:
        raise refusal(s, left, tokens, recipients)


def refusal(settings: Settings, left: float, cost: int, recipients: int = 0) -> RateLimited:
    """The refusal of a write that would leave the bucket at ``left`` (below 0) tokens: 429
    with the seconds until the bucket holds ``cost`` again."""
    wait = max(1, math.ceil(-left / (settings.rate_limit_per_minute / 60.0)))
    rate = (
        f"more than {settings.rate_limit_per_minute} writes a minute (bursts of up to "
        f"{settings.rate_limit_burst}; every send, new thread and other change you make counts)"
    )
    if cost > 1:
        what = (
            f"This send to {recipients} recipients costs {cost} tokens of your rate limit (one, "
            f"plus one for each recipient beyond the first {FREE_RECIPIENTS}), and with it you "
            f"would make {rate}; it is allowed in {wait} s."
        )
    else:
        what = f"You made {rate}; your next one is allowed in {wait} s."
    return RateLimited(
        f"{what} Wait that long and try again; nothing of this one was stored.",
        retry_after=wait,
    )
