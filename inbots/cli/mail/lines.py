"""What ``inbots mail`` prints for a reader that pays for every token: short plain lines, one per
item, ids whole (never wrapped or cut), and words that are true for every state — a rejected
message shows the operator's reason, a working one its note; nothing prints ``None``.

Each function takes the client's answer and returns the lines; the commands print them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from inbots.kit.text import cut

if TYPE_CHECKING:
    from inbots.client import (
        AckResult,
        Inbox,
        InboxItem,
        Message,
        OutboxItem,
        Page,
        ReadResult,
        Receipt,
        SendResult,
    )

SUMMARY_SHOWN = 120  # characters of a sent message's summary (or body) in inbots mail sent

# What a receipt's state means to the sender, for the states that need more than their name.
STATE_WORDS = {
    "accepted": "accepted, not yet seen",
    "notified": "notified, not yet seen",
    "delivered": "seen in its inbox, not yet read",
    "fetched": "read, not yet acknowledged",
    "stalled": "stalled: nothing moved for a while",
    "failed": "its webhook failed; the message waits in its inbox",
    "expired": "expired before it was acknowledged",
    "held": "held for the operator's approval",
}


def flat(text: str) -> str:
    """A value on one line: line breaks and tabs become spaces."""
    return " ".join(text.split())


def when(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M") + "Z"


def item(entry: InboxItem) -> str:
    """One inbox item: its delivery id, who sent what, and its thread when that says more."""
    urgent = " URGENT" if entry.priority == "urgent" else ""
    line = f"{entry.delivery_id}{urgent} {entry.kind} from {entry.sender}: {flat(entry.summary)}"
    if entry.thread_title and entry.thread_title != entry.summary:
        line += f" (thread: {flat(entry.thread_title)})"
    return line


def urgent_count(page: Inbox) -> str:
    """How many urgent items wait: exact unless the page is all urgent and more follows (urgent
    mail is listed first, so one normal item on the page means every urgent one is on it)."""
    urgent = sum(1 for entry in page.items if entry.priority == "urgent")
    if page.more and urgent == len(page.items):
        return f"at least {urgent}"
    return str(urgent)


def inbox(page: Inbox, *, bodies: bool = False) -> list[str]:
    """``inbots mail check``: a count line, then one line per item (and its body)."""
    if not page.items:
        return [f"No mail waiting ({page.waiting} unacknowledged)." if page.waiting else "No mail."]
    urgent = urgent_count(page)
    head = f"{page.waiting} waiting" + ("" if urgent == "0" else f", {urgent} urgent")
    shown = f"; the first {page.returned}:" if page.more else ":"
    lines = [head + shown]
    for entry in page.items:
        lines.append(item(entry))
        if bodies and entry.body is not None and entry.body != entry.summary:
            lines += ["    " + line for line in entry.body.splitlines() or [""]]
    if page.more:
        lines.append(
            f"{page.waiting - page.returned} more: acknowledge these, or check with a larger "
            "--limit."
        )
    return lines


def new_mail(page: Inbox) -> list[str]:
    """``inbots mail wait``: the mail not shown before, and receipts of mail you sent."""
    lines = [item(entry) for entry in page.items]
    for receipt_ in page.receipts:
        lines.append(f"receipt for {receipt_.message_id}: {receipt(receipt_)}")
    if not lines:
        return [f"Nothing new ({page.waiting} waiting)."]
    return lines


def receipt(entry: Receipt) -> str:
    """What became of a message for one recipient, in words, with its note or reason."""
    state = entry.state
    if state == "acknowledged":
        words = f"acknowledged {entry.outcome}" if entry.outcome else "acknowledged"
        detail = entry.note
    elif state == "working":
        words, detail = "working on it", entry.working_note
    elif state == "rejected":
        words = "rejected by the operator"
        detail = entry.rejection_reason or "no reason given"
    else:
        words, detail = STATE_WORDS.get(state, state), None
    return f"{entry.recipient} {words}" + (f": {flat(detail)}" if detail else "")


def message_head(message: Message) -> str:
    parts = [f"{message.id} from {message.sender}", message.kind]
    if message.priority == "urgent":
        parts.append("urgent")
    parts.append(f"thread {message.thread_id}")
    if message.reply_to:
        parts.append(f"reply to {message.reply_to}")
    parts.append(when(message.created_at))
    if message.expires_at:
        parts.append(f"expires {when(message.expires_at)}")
    return ", ".join(parts)


def reading(result: ReadResult) -> list[str]:
    """``inbots mail read``: the message, its body, then your copy's state or, for a message
    you sent, each recipient's receipt."""
    message = result.message
    lines = [message_head(message)]
    if message.summary and message.summary != message.body:
        lines.append(f"summary: {flat(message.summary)}")
    lines += ["", *message.body.splitlines(), ""]
    delivery = result.delivery
    if delivery is not None:
        lines.append(f"your copy {delivery.id}: {delivery.state}" + _ack_hint(delivery.state))
    for entry in result.receipts or message.receipts or []:
        lines.append(f"to {receipt(entry)}")
    return lines


def _ack_hint(state: str) -> str:
    if state in ("acknowledged", "expired"):
        return ""
    return " (when done: inbots mail ack ID, or reply with --ack done)"


def sent(result: SendResult) -> str:
    """``inbots mail send``: the new message, its thread and each recipient's state."""
    message = result.message
    to = ", ".join(f"{d.recipient} ({d.state})" for d in result.deliveries) or "nobody"
    line = f"Sent {message.id} in thread {message.thread_id} to {to}"
    if result.held:
        line += "; held for the operator's approval"
    if result.duplicate:
        line += " (a repeat: this is the message sent the first time)"
    if result.skipped:
        left = ", ".join(f"{s.recipient} ({s.reason.replace('_', ' ')})" for s in result.skipped)
        line += f"; not sent to {left}"
    return line + "."


def acked(result: AckResult) -> list[str]:
    """``inbots mail ack``: what was acknowledged now and what already was (what was not found
    or expired is the error line on stderr)."""
    lines = []
    if result.acknowledged:
        lines.append("Acknowledged: " + ", ".join(result.acknowledged))
    if result.already:
        lines.append("Already acknowledged: " + ", ".join(result.already))
    return lines


def outbox(page: Page[OutboxItem]) -> list[str]:
    """``inbots mail sent``: each message you sent with every recipient's receipt."""
    if not page.items:
        return ["You have sent nothing in threads that are open."]
    lines = []
    for entry in page.items:
        message = entry.message
        summary = cut(flat(message.summary or message.body), SUMMARY_SHOWN)
        receipts = "; ".join(receipt(r) for r in entry.receipts) or "no recipients"
        lines.append(f"{message.id} in {message.thread_id} \u201c{summary}\u201d: {receipts}")
    if page.next_cursor:
        lines.append("More sent mail: raise --limit.")
    return lines
