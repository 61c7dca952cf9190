"""A cap on webhook requests in flight per URL, so one dead receiver cannot occupy every worker.

``acquire`` never blocks: when the cap is reached the caller re-schedules its job a moment later
and the worker slot goes to someone else. The Redis version is shared by every worker process;
its counters expire, so a killed worker cannot hold a slot for long.
"""

from __future__ import annotations

import hashlib
import threading
from collections import defaultdict
from typing import Any, Protocol


class Limiter(Protocol):
    def acquire(self, key: str) -> bool: ...

    def release(self, key: str) -> None: ...


def url_key(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()[:32]


class LocalLimiter:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._lock = threading.Lock()
        self._counts: dict[str, int] = defaultdict(int)

    def acquire(self, key: str) -> bool:
        with self._lock:
            if self._counts[key] >= self.cap:
                return False
            self._counts[key] += 1
            return True

    def release(self, key: str) -> None:
        with self._lock:
            self._counts[key] = max(0, self._counts[key] - 1)
            if not self._counts[key]:
                del self._counts[key]


# The expiry is renewed only by a successful acquire: slots leaked by a killed worker then free
# themselves TTL seconds after the last success, however often refused callers come back.
_ACQUIRE = """
local n = redis.call('INCR', KEYS[1])
if n > tonumber(ARGV[1]) then
  redis.call('DECR', KEYS[1])
  return 0
end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""
_RELEASE = """
local n = redis.call('DECR', KEYS[1])
if n <= 0 then redis.call('DEL', KEYS[1]) end
return n
"""


class RedisLimiter:
    def __init__(self, client: Any, cap: int, ttl_seconds: int) -> None:
        self.client = client
        self.cap = cap
        self.ttl = max(1, ttl_seconds)
        self._acquire = client.register_script(_ACQUIRE)
        self._release = client.register_script(_RELEASE)

    def _name(self, key: str) -> str:
        return f"inbots:inflight:{key}"

    def acquire(self, key: str) -> bool:
        return bool(self._acquire(keys=[self._name(key)], args=[self.cap, self.ttl]))

    def release(self, key: str) -> None:
        self._release(keys=[self._name(key)])
