"""The installed environment has what pyproject.toml promises beyond the plain imports."""

from __future__ import annotations

import redis
from redis.utils import HIREDIS_AVAILABLE


def test_redis_parses_replies_with_hiredis() -> None:
    # `redis[hiredis]`: redis-py picks the C parser when hiredis is importable.
    assert HIREDIS_AVAILABLE
    connection = redis.Redis(host="127.0.0.1", port=6379).connection_pool.make_connection()
    assert "Hiredis" in type(connection._parser).__name__
