"""Threads: open, list, read, add participants, and the close-request cycle."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Select, and_, bindparam, case, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from inbots.agents import service as agents
from inbots.agents.service import check_username
from inbots.auth import rate_limit
from inbots.caller import Caller
from inbots.db.uow import UnitOfWork, reads
from inbots.errors import (
    DIRECTORY,
    Conflict,
    Forbidden,
    Invalid,
    NoRecipients,
    Pointing,
    ThreadNotOpen,
    not_found,
)
from inbots.events import service as events
from inbots.kit.clock import utcnow
from inbots.kit.cursor import THREADS, ThreadPlace
from inbots.kit.ids import new_id
from inbots.models.agents import KIND_AGENT, Agent
from inbots.models.approvals import holds_writer
from inbots.models.deliveries import Delivery
from inbots.models.threads import CLOSE_REQUESTED, CLOSED, OPEN, STATUSES, Participant, Thread
from inbots.threads.schemas import ThreadCreate, ThreadPage, ThreadRead
from inbots.vocabulary import HELD
from inbots.webhooks.subscriptions import THREAD_CLOSE_REQUESTED, THREAD_CLOSED


def visible_thread(
    uow: UnitOfWork, caller: Caller, thread_id: str, *, lock: bool = False
) -> Thread:
    """The thread if the caller may see it, else 404 (never 403: existence is not revealed).

    The operator sees every thread of its workspace; an agent only threads it is in that are not
    closed, and not held for the operator unless it opened them. ``lock`` takes the row for the
    rest of the transaction (PostgreSQL), so a send and a close of the same thread cannot
    interleave.
    """
    values = {"thread": thread_id, "workspace": caller.workspace_id, "agent": caller.agent_id}
    stmt = _VISIBLE[caller.is_operator, lock]
    thread = uow.session.scalars(stmt, values).first()
    if thread is None:
        raise not_found("thread", thread_id)
    return thread


def _visible(operator: bool, lock: bool) -> Select[Thread]:
    """:func:`visible_thread`'s statement, built once: its values are ``thread``, ``workspace``
    and (an agent's) ``agent``."""
    stmt = select(Thread).where(
        Thread.id == bindparam("thread"), Thread.workspace_id == bindparam("workspace")
    )
    if not operator:
        stmt = _seen_by_agent(stmt, bindparam("agent"))
    return stmt.with_for_update(of=Thread) if lock else stmt


def _seen_by_agent(stmt: Select[Thread], agent_id: Any) -> Select[Thread]:
    """Threads an agent sees (``agent_id``, a value or a bind): it is in them, they are not
    closed, and they are not held for the operator (a held thread's opener sees it; nobody else
    does until it is approved)."""
    return stmt.join(
        Participant, (Participant.thread_id == Thread.id) & (Participant.agent_id == agent_id)
    ).where(Thread.status != CLOSED, or_(Thread.released(), Thread.opened_by_id == agent_id))


_VISIBLE = {(op, lock): _visible(op, lock) for op in (False, True) for lock in (False, True)}


def participants_of(uow: UnitOfWork, thread_ids: Iterable[str]) -> dict[str, list[str]]:
    """Usernames of each thread's participants, in the order they joined, in one query."""
    ids = list(thread_ids)
    result: dict[str, list[str]] = defaultdict(list)
    if not ids:
        return result
    rows = uow.session.execute(
        select(Participant.thread_id, Agent.username)
        .join(Agent, Agent.id == Participant.agent_id)
        .where(Participant.thread_id.in_(ids))
        .order_by(Participant.added_at, Agent.username)
    ).all()
    for thread_id, username in rows:
        result[thread_id].append(username)
    return result


def to_reads(uow: UnitOfWork, threads: Sequence[Thread]) -> list[ThreadRead]:
    people = participants_of(uow, (t.id for t in threads))
    names = agents.usernames(uow, (t.opened_by_id for t in threads))
    return [
        ThreadRead(
            id=t.id,
            title=t.title,
            goal=t.goal,
            ref=t.ref,
            status=t.status,
            opened_by=names.get(t.opened_by_id, ""),
            participants=people.get(t.id, []),
            created_at=t.created_at,
            last_activity_at=t.last_activity_at,
            close_requested_at=t.close_requested_at,
            closed_at=t.closed_at,
        )
        for t in threads
    ]


EVERYONE = "*"


def _resolve_usernames(
    uow: UnitOfWork, caller: Caller, names: Sequence[str], field: str
) -> list[Agent]:
    """Active agents (or the operator) of the caller's workspace by username, or 422 naming them."""
    wanted = [check_username(n, field) for n in names]
    if not wanted:
        return []
    found = {
        a.username: a
        for a in uow.session.scalars(
            select(Agent).where(
                Agent.workspace_id == caller.workspace_id,
                Agent.username.in_(set(wanted)),
                Agent.status == "active",
            )
        )
    }
    missing = [n for n in dict.fromkeys(wanted) if n not in found]
    if missing:
        raise Invalid(
            Pointing(
                "Unknown or archived username: {names}. {} lists who can receive mail.",
                DIRECTORY,
                names=", ".join(missing),
            ),
            field=field,
        )
    return [found[n] for n in dict.fromkeys(wanted)]


def everyone_else(uow: UnitOfWork, caller: Caller) -> list[Agent]:
    """Every agent of the caller's workspace that can receive mail (not archived), other than
    the caller, at this moment: what ``"*"`` names. The operator is not an agent and is left
    out (name it, ``operator``, to include it)."""
    return list(
        uow.session.scalars(
            select(Agent)
            .where(
                Agent.workspace_id == caller.workspace_id,
                Agent.kind == KIND_AGENT,
                Agent.status == "active",
                Agent.id != caller.agent_id,
            )
            .order_by(Agent.username)
        )
    )


def recipients_of(uow: UnitOfWork, caller: Caller, names: Sequence[str], field: str) -> list[Agent]:
    """Whom a new thread is opened with: the named agents (or the operator), plus every agent
    when ``"*"`` is among the names, never the caller. Nobody left is refused at once: 422 when
    no one else was named, ``409 no_recipients`` when ``"*"`` found nobody."""
    broadcast = EVERYONE in names
    named = _resolve_usernames(uow, caller, [n for n in names if n != EVERYONE], field)
    chosen = {a.id: a for a in named}
    if broadcast:
        chosen.update((a.id, a) for a in everyone_else(uow, caller))
    chosen.pop(caller.agent_id, None)
    if not chosen:
        if broadcast:
            raise NoRecipients(
                'Nobody else in this workspace can receive mail: "*" means every agent that is '
                "not archived, other than you, and there is none. Ask the operator to register "
                'one, or name "operator" to write to the operator.'
            )
        raise Invalid(
            Pointing(
                '{field} must name at least one agent other than you (usernames from {}, or "*" '
                "for every agent): a thread with nobody else in it can carry no mail.",
                DIRECTORY,
                field=field,
            ),
            field=field,
        )
    return list(chosen.values())


def check_title(title: str, goal: str | None, uow: UnitOfWork) -> tuple[str, str | None]:
    """A thread's title and goal, as stored (surrounding spaces dropped; an empty goal is none),
    within the settings' lengths."""
    s = uow.settings
    title = title.strip()
    if not title:
        raise Invalid("title must be a non-empty string.", field="title")
    if len(title) > s.thread_title_max:
        raise Invalid(f"title must be at most {s.thread_title_max} characters.", field="title")
    if goal is not None:
        goal = goal.strip() or None
        if goal is not None and len(goal) > s.thread_goal_max:
            raise Invalid(f"goal must be at most {s.thread_goal_max} characters.", field="goal")
    return title, goal


def check_ref(ref: str | None, uow: UnitOfWork) -> str | None:
    """A task reference: 1 to ``thread_ref_max`` printable characters (surrounding spaces are
    dropped), or None."""
    if ref is None:
        return None
    maximum = uow.settings.thread_ref_max
    ref = ref.strip()
    if not 1 <= len(ref) <= maximum or not ref.isprintable():
        raise Invalid(
            f"ref must be 1 to {maximum} printable characters, such as a ticket id (no line "
            "breaks or control characters); leave it out for none.",
            field="ref",
        )
    return ref


def create(
    uow: UnitOfWork,
    caller: Caller,
    title: str,
    goal: str | None,
    ref: str | None,
    members: Sequence[Agent],
) -> Thread:
    """Store a new thread with the caller (its opener) and ``members`` as participants."""
    now = utcnow()
    thread = Thread(
        id=new_id("th"),
        workspace_id=caller.workspace_id,
        title=title,
        goal=goal,
        ref=ref,
        status=OPEN,
        opened_by_id=caller.agent_id,
        created_at=now,
        last_activity_at=now,
    )
    uow.session.add(thread)
    uow.session.flush()
    ids = dict.fromkeys([caller.agent_id, *(m.id for m in members)])
    uow.session.execute(
        insert(Participant),
        [
            {"thread_id": thread.id, "agent_id": i, "added_at": now, "added_by_id": caller.agent_id}
            for i in ids
        ],
    )
    return thread


def open_with(uow: UnitOfWork, caller: Caller, ref: str, members: Sequence[Agent]) -> Thread | None:
    """The open thread a send with ``to`` and ``ref`` goes on in, locked as a post locks its
    thread: ``ref`` the same, and exactly the caller and ``members`` as participants (no one more
    or fewer), not held for the operator. The most recently active of several; None when there
    is none (the send opens a new thread)."""
    ids = {caller.agent_id, *(m.id for m in members)}
    same_people = (
        select(Participant.thread_id)
        .join(Thread, Thread.id == Participant.thread_id)
        .where(
            Thread.workspace_id == caller.workspace_id,
            Thread.ref == ref,
            Thread.status == OPEN,
            Thread.released(),
        )
        .group_by(Participant.thread_id)
        .having(
            func.count() == len(ids),
            func.sum(case((Participant.agent_id.in_(ids), 1), else_=0)) == len(ids),
        )
    )
    return uow.session.scalars(
        select(Thread)
        .where(Thread.id.in_(same_people))
        .order_by(Thread.last_activity_at.desc(), Thread.id.desc())
        .limit(1)
        .with_for_update()
    ).first()


def open_thread(uow: UnitOfWork, caller: Caller, request: ThreadCreate) -> ThreadRead:
    """Open a thread for one task; the caller is its opener and a participant. It must have
    someone else in it (``"*"``: every agent that is not archived). While the approval policy
    holds the caller's sends, the thread is held: only its opener and the operator see it until
    the operator approves it or one of its messages."""
    title, goal = check_title(request.title, request.goal, uow)
    ref = check_ref(request.ref, uow)
    members = recipients_of(uow, caller, request.participants, "participants")
    rate_limit.spend(uow, caller)
    thread = create(uow, caller, title, goal, ref, members)
    if not caller.is_operator and holds_writer(uow.session, caller.workspace_id, caller.username):
        thread.approval = HELD
    return to_reads(uow, [thread])[0]


@reads
def list_threads(
    uow: UnitOfWork,
    caller: Caller,
    status: str | None = None,
    limit: int | None = None,
    *,
    ref: str | None = None,
    query: str | None = None,
) -> list[ThreadRead]:
    """The first page of :func:`thread_page`."""
    return thread_page(uow, caller, status, limit, ref=ref, query=query).items


@reads
def thread_page(
    uow: UnitOfWork,
    caller: Caller,
    status: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
    *,
    ref: str | None = None,
    query: str | None = None,
) -> ThreadPage:
    """Agents: threads they are in that are not closed. Operator: every thread. Most recent
    activity first, ``limit`` a page (by default ``INBOTS_LIST_DEFAULT``); ``next_cursor``
    continues after the last item. ``ref`` keeps the threads with that task reference; ``query``
    those whose title or goal contains the text (any case; the text is matched as it is, never
    as a pattern)."""
    if status is not None and status not in STATUSES:
        raise Invalid(f"status must be one of {', '.join(STATUSES)}.", field="status")
    s = uow.settings
    # As long as what they are matched against can be (a title or a goal; a ref).
    if query is not None and len(query) > s.thread_goal_max:
        raise Invalid(f"query must be at most {s.thread_goal_max} characters.", field="query")
    if ref is not None and len(ref) > s.thread_ref_max:
        raise Invalid(f"ref must be at most {s.thread_ref_max} characters.", field="ref")
    count = limit or s.list_default
    stmt = select(Thread).where(Thread.workspace_id == caller.workspace_id)
    if not caller.is_operator:
        stmt = _seen_by_agent(stmt, caller.agent_id)
    if status is not None:
        stmt = stmt.where(Thread.status == status)
    if ref:
        stmt = stmt.where(Thread.ref == ref.strip())
    if query and query.strip():
        text = query.strip()
        # autoescape: %, _ and the escape character itself are matched literally.
        stmt = stmt.where(
            or_(
                Thread.title.icontains(text, autoescape=True),
                Thread.goal.icontains(text, autoescape=True),
            )
        )
    after = THREADS.decode(cursor)
    if after is not None:
        at, last_id = after
        stmt = stmt.where(
            or_(
                Thread.last_activity_at < at,
                and_(Thread.last_activity_at == at, Thread.id < last_id),
            )
        )
    stmt = stmt.order_by(Thread.last_activity_at.desc(), Thread.id.desc()).limit(count + 1)
    rows = uow.session.scalars(stmt).all()
    page, more = rows[:count], len(rows) > count
    last = page[-1] if more else None
    next_cursor = THREADS.encode(ThreadPlace(last.last_activity_at, last.id)) if last else None
    return ThreadPage(items=to_reads(uow, page), next_cursor=next_cursor)


@reads
def get_thread(uow: UnitOfWork, caller: Caller, thread_id: str) -> ThreadRead:
    """One thread with its participants (with its messages, for the operator:
    :func:`inbots.messages.reading.get_thread`)."""
    return to_reads(uow, [visible_thread(uow, caller, thread_id)])[0]


def add_participant(uow: UnitOfWork, caller: Caller, thread_id: str, username: str) -> ThreadRead:
    """Put an agent on the thread's distribution list (idempotent); it may read the history."""
    thread = visible_thread(uow, caller, thread_id, lock=True)
    (agent,) = _resolve_usernames(uow, caller, [username], "username")
    if thread.status != OPEN:
        raise ThreadNotOpen(
            f"Thread {thread.id} is {thread.status.replace('_', ' ')}; participants can no longer "
            "be added."
        )
    rate_limit.spend(uow, caller)  # even when it is there already: a call is a write
    present = uow.session.get(Participant, (thread.id, agent.id))
    if present is None:
        try:
            with uow.session.begin_nested():
                uow.session.add(
                    Participant(
                        thread_id=thread.id,
                        agent_id=agent.id,
                        added_at=utcnow(),
                        added_by_id=caller.agent_id,
                    )
                )
                uow.session.flush()
        except IntegrityError:
            pass  # added by a concurrent call: the outcome is the same
    return to_reads(uow, [thread])[0]


def join(uow: UnitOfWork, thread: Thread, agent_id: str) -> None:
    """Make ``agent_id`` a participant if it is not one yet (the operator joins by posting)."""
    if uow.session.get(Participant, (thread.id, agent_id)) is None:
        uow.session.add(
            Participant(
                thread_id=thread.id, agent_id=agent_id, added_at=utcnow(), added_by_id=agent_id
            )
        )


def request_close(uow: UnitOfWork, caller: Caller, thread_id: str) -> ThreadRead:
    """The opener asks the operator to close the thread. Idempotent while pending."""
    caller.require_agent()
    thread = visible_thread(uow, caller, thread_id, lock=True)
    if thread.opened_by_id != caller.agent_id:
        raise Forbidden("Only the agent that opened this thread can request its close.")
    rate_limit.spend(uow, caller)  # a repeat too (the request is idempotent, not free)
    if thread.status == OPEN:
        now = utcnow()
        thread.status = CLOSE_REQUESTED
        thread.close_requested_at = now
        uow.session.flush()
        events.record_thread_event(uow, thread, THREAD_CLOSE_REQUESTED, caller.agent_id, now)
    return to_reads(uow, [thread])[0]


def close_thread(uow: UnitOfWork, caller: Caller, thread_id: str) -> ThreadRead:
    """The operator closes a thread (confirming a request, or outright). Idempotent."""
    caller.require_operator()
    thread = visible_thread(uow, caller, thread_id, lock=True)
    if thread.status != CLOSED:
        now = utcnow()
        thread.status = CLOSED
        thread.closed_at = now
        uow.session.execute(  # out of the renotify sweep's indexes (see Delivery)
            update(Delivery)
            .where(Delivery.thread_id == thread.id, Delivery.thread_closed_at.is_(None))
            .values(thread_closed_at=now)
            .execution_options(synchronize_session=False)
        )
        events.thread_closed(uow, thread.id, now)
        uow.session.flush()
        events.record_thread_event(uow, thread, THREAD_CLOSED, caller.agent_id, now)
    return to_reads(uow, [thread])[0]


def dismiss_close(uow: UnitOfWork, caller: Caller, thread_id: str) -> ThreadRead:
    """The operator turns a pending close request down; the thread is open again."""
    caller.require_operator()
    thread = visible_thread(uow, caller, thread_id, lock=True)
    if thread.status != CLOSE_REQUESTED:
        raise Conflict(f"Thread {thread.id} has no pending close request (it is {thread.status}).")
    thread.status = OPEN
    uow.session.flush()
    return to_reads(uow, [thread])[0]
