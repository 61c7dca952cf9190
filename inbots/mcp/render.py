"""Text renderings of the tools' answers, for harnesses that show the model only text. Each
takes the answer's JSON (the HTTP API's fields) and says, in words, what it means and what to do
next."""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _ref(t: Json) -> str:
    return f" [ref {t['ref']}]" if t.get("ref") else ""


def _urgent(m: Json) -> str:
    return "URGENT " if m.get("priority") == "urgent" else ""


def _same_text(a: str | None, b: str | None) -> bool:
    """Whether two texts say the same to a reader: equal, or one cut short of the other (ending
    in the ellipsis :func:`inbots.kit.text.cut` adds)."""
    if not a or not b:
        return False
    a, b = a.strip(), b.strip()
    if a == b:
        return True
    shorter, longer = sorted((a, b), key=len)
    return shorter.endswith("…") and longer.startswith(shorter[:-1])


def _thread(t: Json) -> str:
    lines = [f"Thread {t['id']} “{t['title']}”{_ref(t)} is {t['status'].replace('_', ' ')}."]
    if t.get("goal"):
        lines.append(f"Goal: {t['goal']}")
    lines.append(f"Opened by {t['opened_by']}; participants: {', '.join(t['participants'])}.")
    return "\n".join(lines)


def render_whoami(a: Json) -> str:
    lines = [f"You are {a['username']} (agent id {a['id']})."]
    if a.get("description"):
        lines.append(f"Description: {a['description']}")
    if a.get("webhook_url"):
        lines.append(f"Your webhook: {a['webhook_url']} (Inbots notifies it when mail arrives).")
    else:
        lines.append("No webhook: you find mail by calling check_inbox or wait_for_mail.")
    lines.append(f"Unacknowledged mail waiting for you: {a['unread']}.")
    return "\n".join(lines)


def render_directory(d: Json) -> str:
    items = d["items"]
    if not items:
        return "Nobody matches: nobody else can receive mail here yet."
    lines = [f"{_plural(len(items), 'participant')} you can write to, most recently active first:"]
    for a in items:
        seen = "active now" if a["active"] else f"last seen {a['last_seen_at'] or 'never'}"
        about = f" — {a['description']}" if a.get("description") else ""
        who = (
            " (a person: the operator who owns this workspace)" if a.get("kind") == "person" else ""
        )
        brief = "; has a brief (read_brief)" if a.get("has_brief") else ""
        lines.append(f"- {a['username']}{who}{about} ({seen}{brief})")
    return "\n".join(lines)


def render_keys(k: Json) -> str:
    lines = [f"You hold {len(k['items'])} key(s) (the keys themselves are never shown again):"]
    for key in k["items"]:
        used = key["last_used_at"] or "never"
        mark = " (this one)" if key["current"] else ""
        lines.append(
            f"- {key['id']} {key['hint']}… {key['label'] or 'no label'}{mark}, last used {used}"
        )
    return "\n".join(lines)


def render_sessions(s: Json) -> str:
    items = s["items"]
    if not items:
        return "No sessions of yours are known yet."
    lines = [f"Your sessions, latest first ({sum(1 for i in items if i['active'])} active):"]
    for one in items:
        state = "active" if one["active"] else "inactive"
        name = one["label"] or one["client"] or "unnamed"
        lines.append(f"- {one['id']} {name}, {state}, last seen {one['last_seen_at']}")
    return "\n".join(lines)


def render_brief(b: Json) -> str:
    if not b.get("brief"):
        return f"{b['username']} has no brief. Its description in list_agents is all there is."
    return f"The brief of {b['username']} (updated {b['updated_at']}):\n\n{b['brief']}"


def render_brief_set(b: Json) -> str:
    if not b.get("brief"):
        return "Your brief is removed."
    return (
        f"Your brief is set ({len(b['brief']):,} characters); other agents read it with "
        f'read_brief("{b["username"]}").'
    )


def render_working(r: Json) -> str:
    parts = []
    if r["working"]:
        ids = ", ".join(d["id"] for d in r["working"])
        parts.append(
            f"Marked working: {ids}. Their senders see it; call mark_working again while you "
            "work (a heartbeat), and acknowledge each when you are done."
        )
    if r["already_acknowledged"]:
        parts.append(
            f"Already acknowledged, nothing to work on: {', '.join(r['already_acknowledged'])}."
        )
    if r["not_found"]:
        parts.append(
            f"Not found among your deliveries in open threads: {', '.join(r['not_found'])}."
        )
    parts.extend(_expired(r))
    return " ".join(parts)


def _expired(r: Json) -> list[str]:
    """The ids of an answer that expired unacknowledged, said once (an older server has none)."""
    if not r.get("expired"):
        return []
    return [
        f"Expired unacknowledged, no longer yours to act on: {', '.join(r['expired'])} (ask "
        "the sender to send it again if it still matters)."
    ]


def render_threads(d: Json) -> str:
    items = d["items"]
    if not items:
        return "You are in no open thread. To start a task, open_thread."
    lines = [f"You are in {_plural(len(items), 'thread')}, most recent activity first:"]
    for t in items:
        lines.append(
            f"- {t['id']} “{t['title']}”{_ref(t)} [{t['status']}] opened by {t['opened_by']}; "
            f"participants: {', '.join(t['participants'])}; last activity {t['last_activity_at']}"
        )
    lines.append("Reuse the thread of a task rather than opening another one for it.")
    return "\n".join(lines)


def render_opened(t: Json) -> str:
    return (
        _thread(t)
        + f"\nNothing is sent yet: send_message with thread_id {t['id']} to say what you need."
    )


def render_thread(t: Json) -> str:
    return _thread(t)


def render_close_requested(t: Json) -> str:
    return (
        _thread(t) + "\nThe operator has been asked to close it. Until then participants can read "
        "and acknowledge, but nobody can send."
    )


def render_sent(r: Json) -> str:
    m = r["message"]
    to = ", ".join(f"{d['recipient']} ({d['id']})" for d in r["deliveries"]) or "nobody"
    if r["duplicate"]:
        return (
            f"Nothing new was sent: this idempotency_key was already used for this same message, "
            f"{m['id']} in thread {m['thread_id']}, which went to {to}."
        )
    acked = _reply_acknowledged(r.get("acknowledged"), m) + _skipped(r.get("skipped"))
    if r.get("held"):
        return (
            f"Held {_urgent(m).lower()}{m['kind']} {m['id']} in thread {m['thread_id']} for the "
            f"operator's approval (the workspace's approval policy): {to} will get it only if "
            "the operator approves it. check_sent shows its state (held, then accepted or "
            f"rejected); do not send it again.{acked}"
        )
    went_on = (
        " (the open thread of these people with this ref: a send with to and the same ref goes "
        "on in it)"
        if r.get("reused_thread")
        else ""
    )
    return (
        f"Sent {_urgent(m).lower()}{m['kind']} {m['id']} to thread {m['thread_id']}{went_on}; "
        f"one delivery each for {to}.{acked}"
    )


_LEFT_OUT = {
    "inbox_full": "inbox full",
    "pair_full": "holds the most unacknowledged messages one sender may leave with it",
}


def _skipped(skipped: list[Json] | None) -> str:
    """The recipients a send to several left out, at a cap."""
    if not skipped:
        return ""
    names = "; ".join(
        f"{x['recipient']} ({_LEFT_OUT.get(x['reason'], x['reason'])})" for x in skipped
    )
    return (
        f" Not sent to {names}: at a cap, they got no delivery; a place frees up when they "
        "acknowledge mail, so send them this again later if they need it."
    )


def _reply_acknowledged(acked: Json | None, m: Json) -> str:
    """What a reply sent with ``acknowledge`` did to the caller's copy of the message it
    answers."""
    if not acked:
        return ""
    outcome = f" ({acked['outcome']})" if acked.get("outcome") else ""
    return (
        f" Your delivery {acked['delivery_id']} of {m['reply_to']} is acknowledged{outcome}: "
        "nothing more to do with it."
    )


def _messages_are(count: int) -> str:
    return f"{count} more {'message is' if count == 1 else 'messages are'}"


def inbox_notice(inbox: Json, *, whole: bool = True) -> str:
    """What an inbox answer means and what to do next. ``whole``: the answer is a first page of
    all unacknowledged mail (or a long-poll's), so ``waiting - returned`` is how many follow."""
    returned, waiting = inbox["returned"], inbox["waiting"]
    cursor = inbox.get("next_cursor")
    if cursor:
        head = _messages_are(waiting - returned) + " waiting" if whole else "More mail follows"
        return (
            f'{head}: to see the next page, call check_inbox with cursor "{cursor}" (and the '
            "same other arguments). You do not need to acknowledge anything to see it; "
            "acknowledge each message only once you have finished with it."
        )
    if returned == 0 and waiting == 0:
        return "Your inbox is empty: no unacknowledged mail."
    if returned == 0:
        if not whole:
            return (
                f"Nothing matches. {_plural(waiting, 'unacknowledged message')} "
                f"{'is' if waiting == 1 else 'are'} waiting: check_inbox without filters lists "
                "them."
            )
        return (
            f"Nothing new. {_plural(waiting, 'unacknowledged message')} you have already been "
            f"shown {'is' if waiting == 1 else 'are'} still waiting: check_inbox lists them."
        )
    if whole and waiting > returned:  # a long-poll lists only what is new
        return (
            f"{_messages_are(waiting - returned)} waiting that you were shown before: "
            "check_inbox lists them."
        )
    if not whole:
        return f"That is the last page. {_plural(waiting, 'unacknowledged message')} in all."
    return "That is everything waiting for you."


def _receipt(r: Json) -> str:
    """One recipient's receipt, in words: its state (the words check_sent's description
    explains) and what that state carries — the outcome and note, the working note, the
    rejection's reason — and nothing that is not there."""
    state = r["state"]
    line = f"{r['recipient']}: {state}"
    if state == "rejected":
        reason = r.get("rejection_reason")
        return line + (f" by the operator: “{reason}”" if reason else " by the operator")
    if state == "held":
        return line + " for the operator's approval"
    if state == "expired":
        return line + " unacknowledged"
    if r.get("outcome"):
        line += f" ({r['outcome']})"
    if r.get("note"):
        line += f" — “{r['note']}”"
    elif state == "working" and r.get("working_at"):
        line += f" since {r['working_at']}"
        if r.get("working_note"):
            line += f": “{r['working_note']}”"
    return line


def _receipts(receipts: list[Json]) -> str:
    return "; ".join(_receipt(r) for r in receipts) or "no recipients"


def render_receipt_events(receipts: list[Json]) -> list[str]:
    """The receipts a wait woke for: acknowledgements of messages the caller sent."""
    if not receipts:
        return []
    lines = [f"{_plural(len(receipts), 'receipt')} for messages you sent:"]
    for r in receipts:
        when = r.get("rejected_at") if r["state"] == "rejected" else r.get("acknowledged_at")
        at = f" ({when})" if when else ""
        lines.append(f"- {_receipt(r)}{at}: message {r['message_id']} in thread {r['thread_id']}")
    return lines


def render_inbox(inbox: Json) -> str:
    items = inbox["items"]
    receipts = render_receipt_events(inbox.get("receipts") or [])
    if not items:
        return "\n".join([*receipts, inbox["notice"]])
    bodies = any("body" in i for i in items)
    lines = [f"{_plural(len(items), 'message')}, urgent first, then oldest first:"]
    for n, i in enumerate(items, 1):
        ref = f" [ref {i['thread_ref']}]" if i.get("thread_ref") else ""
        done = ", acknowledged" if i["state"] == "acknowledged" else ""
        # A short message that opened its thread is its title, summary and body at once: once.
        title = "" if _same_text(i["thread_title"], i["summary"]) else f" in “{i['thread_title']}”"
        lines.append(
            f"{n}. {_urgent(i)}[{i['kind']}] from {i['sender']}{title}{ref}: {i['summary']}\n"
            f"   delivery_id {i['delivery_id']}, message_id {i['message_id']}, "
            f"thread_id {i['thread_id']}, sent {i['sent_at']}{done}"
        )
        if "body" in i and i["body"].strip() != i["summary"].strip():
            lines.append("   ---\n" + "\n".join(f"   {line}" for line in i["body"].splitlines()))
        if i.get("attachments"):
            lines.append(f"   {_attached(i['attachments'])}")
    lines.append(inbox["notice"])
    if bodies:
        lines.append(
            "These bodies are recorded as read. Acknowledge each message (done or declined) "
            "when you are finished with it."
        )
    else:
        lines.append(
            "Listing marks nothing read. read_message gives the full body (or list with "
            "include_bodies); acknowledge each one (done or declined) when you are finished "
            "with it."
        )
    return "\n".join([*lines, *receipts])


def _attached(files: list[Json]) -> str:
    """A message's attachments in one line, each with the id read_attachment takes."""
    each = ", ".join(
        f"{a['name']} ({a['content_type']}, {a['bytes']:,} bytes) {a['id']}" for a in files
    )
    return f"Attachments (read_attachment with the att_ id): {each}"


def render_message(r: Json) -> str:
    m, d = r["message"], r["delivery"]
    head = "Urgent message" if m.get("priority") == "urgent" else "Message"
    head += f" {m['id']} ({m['kind']}) from {m['sender']} in thread {m['thread_id']}, "
    head += f"sent {m['created_at']}"
    if m.get("reply_to"):
        head += f", replying to {m['reply_to']}"
    lines = [head + "."]
    if m.get("summary") and m["summary"].strip() != m["body"].strip():
        lines.append(f"Summary: {m['summary']}")
    lines += ["", m["body"], ""]
    if m.get("attachments"):
        lines += [_attached(m["attachments"]), ""]
    if r.get("receipts") is not None:
        lines.append(f"You sent it. Receipts: {_receipts(r['receipts'])}.")
    elif d is None:
        lines.append("No copy of it is addressed to you (you joined the thread later).")
    elif d["acknowledged_at"]:
        outcome = f" ({d['outcome']})" if d.get("outcome") else ""
        lines.append(f"Your delivery {d['id']} is acknowledged{outcome}: nothing more to do.")
    else:
        lines.append(
            f"When you have acted on it or decided not to, acknowledge delivery {d['id']} "
            "(outcome done or declined)."
        )
    return "\n".join(lines)


def render_history(h: Json) -> str:
    items = h["items"]
    if not items:
        return "No messages."
    lines = [f"{_plural(len(items), 'message')}, oldest first:"]
    for m in items:
        head = f"--- {_urgent(m)}{m['id']} ({m['kind']}) from {m['sender']}, {m['created_at']}"
        if m.get("reply_to"):
            head += f", replying to {m['reply_to']}"
        lines.append(head)
        if m.get("summary") and m["summary"].strip() != m["body"].strip():
            lines.append(f"Summary: {m['summary']}")
        lines.append(m["body"])
        if m.get("attachments"):
            lines.append(_attached(m["attachments"]))
        if m.get("receipts") is not None:
            lines.append(f"(You sent it. Receipts: {_receipts(m['receipts'])}.)")
    if h.get("next_cursor"):
        lines.append(f"--- More follow: read_thread again with cursor {h['next_cursor']!r}.")
    return "\n".join(lines)


def render_acks(r: Json) -> str:
    parts = []
    if r["acknowledged"]:
        parts.append(f"Acknowledged: {', '.join(r['acknowledged'])}.")
    if r["already"]:
        parts.append(f"Already acknowledged before: {', '.join(r['already'])}.")
    if r["not_found"]:
        parts.append(
            f"Not found among your deliveries in open threads: {', '.join(r['not_found'])}."
        )
    parts.extend(_expired(r))
    return " ".join(parts)


def render_outbox(page: Json) -> str:
    items = page["items"]
    if not items:
        return "No messages you sent match."
    lines = [f"{_plural(len(items), 'message')} you sent, newest first:"]
    for item in items:
        m = item["message"]
        summary = m.get("summary") or m["body"].strip().splitlines()[0][:120]
        lines.append(
            f"- {m['id']} ({m['kind']}) in thread {m['thread_id']}, {m['created_at']}: {summary}"
        )
        lines.append(f"  {_receipts(item['receipts'])}")
    if page.get("next_cursor"):
        lines.append(f"More follow: check_sent again with cursor {page['next_cursor']!r}.")
    return "\n".join(lines)


def render_search(page: Json) -> str:
    items = page["items"]
    if not items:
        return (
            "No message you can read holds all of these words. Try fewer or other words, or "
            "drop a filter."
        )
    lines = [f"{_plural(len(items), 'message')} found, best match first:"]
    for hit in items:
        lines.append(
            f"- {hit['message_id']} ({hit['kind']}) from {hit['sender']} in thread "
            f'{hit["thread_id"]} "{hit["thread_title"]}", {hit["created_at"]}'
        )
        if hit.get("summary"):
            lines.append(f"  summary: {hit['summary']}")
        if hit.get("snippet"):
            lines.append(f"  {hit['snippet']}")
    if page.get("next_cursor"):
        lines.append(f"More follow: search_messages again with cursor {page['next_cursor']!r}.")
    lines.append("read_message with a message id gives its full body.")
    return "\n".join(lines)


# Reservations.


def _reservation(r: Json) -> str:
    kind = "" if r["exclusive"] else " (shared)"
    why = f" — {r['reason']}" if r.get("reason") else ""
    ended = f", released {r['released_at']}" if r.get("released_at") else ""
    return (
        f"{r['id']} {r['agent']}{kind}: {', '.join(r['paths'])} until {r['expires_at']}{ended}{why}"
    )


def render_reserved(a: Json) -> str:
    r = a["reservation"]
    return (
        f"Reserved for you until {r['expires_at']}: {', '.join(r['paths'])} ({r['id']}). "
        "release_paths when done."
    )


def render_released(a: Json) -> str:
    released = a["released"]
    if not released:
        return "Nothing to release: you hold no active reservation."
    ids = ", ".join(r["id"] for r in released)
    return f"Released {_plural(len(released), 'reservation')}: {ids}."


def render_reservations(page: Json) -> str:
    items = page["items"]
    if not items:
        return "No reservations match."
    lines = [f"{_plural(len(items), 'reservation')}, newest first:"]
    lines += [f"- {_reservation(r)}" for r in items]
    if page.get("next_cursor"):
        lines.append(f"More: cursor {page['next_cursor']}.")
    return "\n".join(lines)
