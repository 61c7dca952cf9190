"""A cap on webhook requests in flight per URL, so one slow or dead receiver cannot occupy every
worker.

Each slot is a **lease**: held from :meth:`Limiter.acquire` until :meth:`Limiter.release`, or
until it expires by itself ``ttl`` seconds after it was taken (``Settings.inflight_lease_seconds``:
the attempt timeout plus a small margin), whichever comes first. A worker killed mid-attempt never
releases, and its slots come back when their own leases run out; nothing another caller does
(acquiring, being refused) extends them.

``acquire`` never blocks: when the URL is at its cap the caller parks its delivery
(:mod:`inbots.deliveries.parking`) and the worker goes on to other work. ``free`` tells whoever
might wake a parked delivery whether a slot is there for it.

The Redis version is shared by every worker process: one sorted set per URL, member = lease id,
score = expiry in Redis's own clock (so the workers' clocks do not matter); acquiring drops the
expired leases, counts and adds in one script. The local version, for the embedded default, keeps
the same leases in memory.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any, Protocol


class Limiter(Protocol):
    def acquire(self, key: str) -> str | None:
        """A lease on one of ``key``'s slots (its id), or ``None`` when all are taken."""

    def acquire_all(self, keys: Sequence[str]) -> list[str | None]:
        """:meth:`acquire` for each of ``keys`` in turn (a key may repeat), in one round trip
        where the limiter is remote."""

    def release(self, key: str, lease: str) -> None:
        """Give the lease back (nothing happens if it already expired)."""

    def free(self, key: str) -> int:
        """How many of ``key``'s slots are free now."""


def url_key(url: str, alert: bool = False) -> str:
    """The in-flight slots' key of a webhook URL. The operator's alerts have slots of their own,
    even at a URL that agents' webhooks share: a backlog of mail never holds up its alert."""
    return hashlib.sha256((f"alert {url}" if alert else url).encode()).hexdigest()[:32]


def new_lease() -> str:
    return uuid.uuid4().hex


class LocalLimiter:
    """Leases in this process's memory (the embedded default: one process sends everything)."""

    def __init__(self, cap: int, ttl_seconds: float) -> None:
        self.cap = cap
        self.ttl = ttl_seconds
        self._lock = threading.Lock()
        self._leases: dict[str, dict[str, float]] = {}  # key -> lease -> expiry (monotonic)

    def _live(self, key: str, now: float) -> dict[str, float]:
        leases = self._leases.get(key, {})
        for lease in [lease for lease, until in leases.items() if until <= now]:
            del leases[lease]
        return leases

    def acquire(self, key: str) -> str | None:
        with self._lock:
            now = time.monotonic()
            leases = self._live(key, now)
            if len(leases) >= self.cap:
                return None
            lease = new_lease()
            leases[lease] = now + self.ttl
            self._leases[key] = leases
            return lease

    def acquire_all(self, keys: Sequence[str]) -> list[str | None]:
        return [self.acquire(key) for key in keys]

    def release(self, key: str, lease: str) -> None:
        with self._lock:
            leases = self._leases.get(key)
            if leases is not None:
                leases.pop(lease, None)
                if not leases:
                    del self._leases[key]

    def free(self, key: str) -> int:
        with self._lock:
            return max(0, self.cap - len(self._live(key, time.monotonic())))


# KEYS[1]: the URL's leases; ARGV: cap, lease milliseconds, lease id. The key itself expires
# with its newest lease, so an idle URL leaves nothing behind.
_NOW_AND_PRUNE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
"""
_ACQUIRE = (
    _NOW_AND_PRUNE
    + """
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
)
_FREE = (
    _NOW_AND_PRUNE
    + """
return tonumber(ARGV[1]) - redis.call('ZCARD', KEYS[1])
"""
)


class RedisLimiter:
    """Leases in Redis, shared by every worker process (Redis 5 or newer: the scripts read the
    server's clock before they write)."""

    def __init__(self, client: Any, cap: int, ttl_seconds: float) -> None:
        self.client = client
        self.cap = cap
        self.ttl_ms = max(1, int(ttl_seconds * 1000))
        self._acquire = client.register_script(_ACQUIRE)
        self._free = client.register_script(_FREE)

    @staticmethod
    def name(key: str) -> str:
        return f"inbots:leases:{key}"

    def acquire(self, key: str) -> str | None:
        lease = new_lease()
        got = self._acquire(keys=[self.name(key)], args=[self.cap, self.ttl_ms, lease])
        return lease if got else None

    def acquire_all(self, keys: Sequence[str]) -> list[str | None]:
        """The script for each of ``keys`` in one pipeline, one round trip (not a transaction:
        each script is atomic on its own, and they run in order). By its digest: a Redis that
        lost its scripts (a restart) answers NOSCRIPT to all, and they are loaded and sent
        again. If any other fails, the leases the others took are given back and the error
        raised, as one :meth:`acquire` would."""
        from redis.exceptions import NoScriptError  # here: the embedded default never loads it

        if len(keys) < 2:
            return [self.acquire(key) for key in keys]
        leases = [new_lease() for _ in keys]
        got = self._evaluate_all(keys, leases)
        if all(isinstance(one, NoScriptError) for one in got):
            self._acquire.sha = self.client.script_load(_ACQUIRE)
            got = self._evaluate_all(keys, leases)
        taken = [(key, lease) for key, lease, ok in zip(keys, leases, got, strict=True) if ok == 1]
        failed = next((one for one in got if isinstance(one, Exception)), None)
        if failed is not None:
            for key, lease in taken:
                self.release(key, lease)
            raise failed
        return [lease if ok == 1 else None for lease, ok in zip(leases, got, strict=True)]

    def _evaluate_all(self, keys: Sequence[str], leases: Sequence[str]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for key, lease in zip(keys, leases, strict=True):
            pipe.evalsha(self._acquire.sha, 1, self.name(key), self.cap, self.ttl_ms, lease)
        return list(pipe.execute(raise_on_error=False))

    def release(self, key: str, lease: str) -> None:
        self.client.zrem(self.name(key), lease)

    def free(self, key: str) -> int:
        return max(0, int(self._free(keys=[self.name(key)], args=[self.cap])))
