"""Identifiers: a type prefix and a time-ordered, lowercase base32 body (like a ULID).

Ordering ids orders records by creation time, which keyset pagination relies on. Within one
process ids are strictly increasing; across processes they are ordered to the millisecond.
Ids never contain a ``.`` (the webhook signature joins on dots).
"""

from __future__ import annotations

import secrets
import threading
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lowercase
_RANDOM_BITS = 80
_lock = threading.Lock()
_last_ms = 0
_last_rand = 0


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id(prefix: str) -> str:
    global _last_ms, _last_rand
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms <= _last_ms:
            now_ms = _last_ms
            rand = _last_rand + 1
        else:
            rand = secrets.randbits(_RANDOM_BITS - 1)  # room to increment within one millisecond
        _last_ms, _last_rand = now_ms, rand
    return f"{prefix}_{_encode(now_ms, 10)}{_encode(rand, 16)}"


PREFIXES = {
    "workspace": "ws",
    "agent": "ag",
    "operator_token": "otk",
    "dashboard_session": "dss",
    "signin_failure": "sif",
    "thread": "th",
    "message": "msg",
    "delivery": "dlv",
    "event": "evt",
    "attempt": "att",
}


def kind_of(ident: str) -> str | None:
    """Which kind of record an id names, judged by its prefix; None for anything else."""
    prefix, sep, _ = ident.partition("_")
    if not sep:
        return None
    for kind, known in PREFIXES.items():
        if known == prefix:
            return kind
    return None
