"""The Redis transport the worker runs on: kombu's, with one guard so that a broker restart with
tasks in flight cannot end the worker process.

What happens without it (celery 5.7, kombu 5.7, redis-py 8): Redis goes away while the consumer
channel waits in ``BRPOP`` and acks-late tasks are running, so the channel holds unacknowledged
messages. Celery's ``Consumer.on_connection_error_after_connected`` calls
``connection.collect()``: closing the channel first drains the pending ``BRPOP``
(kombu#1733), which raises ``ConnectionError`` *before* the channel is marked closed, and
``collect()`` then drops the transport's ``client``. Celery next calls ``connection.close()``,
which closes that half-closed channel again; this time it gets as far as restoring the unacked
messages, which builds a new Redis pool from ``self.connection.client.hostname`` - ``None`` by
now - and raises ``AttributeError``. ``ignore_errors`` lets only connection and channel errors
through, so the ``AttributeError`` leaves the consumer as "Unrecoverable error" and the worker
exits. An idle worker has nothing to restore and survives, which is why only busy workers died.

The same ``_connparams`` dereference on a closed transport is kombu#582 and kombu#970; the
close-after-collect is celery's fix for celery#9705 (see celery#10570):
https://github.com/celery/kombu/issues/582
https://github.com/celery/kombu/issues/970
https://github.com/celery/kombu/pull/1733
https://github.com/celery/celery/issues/9705
https://github.com/celery/celery/pull/10570

The guard: a channel whose transport has been closed cannot reach Redis, so it says so with
redis-py's ``ConnectionError`` (one of the transport's connection errors) instead of an
``AttributeError``. Celery then ignores it like any other error while tearing a dead
connection down, reconnects, and the sweep or the visibility timeout brings back whatever the
dead connection could not restore. Remove this module when kombu handles it (the test
``tests/test_production_shape.py`` shows whether it does).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import redis.exceptions
from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> Any:
        transport = self.connection
        if transport is None or transport.client is None:
            raise redis.exceptions.ConnectionError(
                "the broker connection of this channel was closed"
            )
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel


def transport_for(broker_url: str) -> str | None:
    """The ``broker_transport`` setting for ``broker_url``: this module's transport for Redis
    URLs, Celery's own choice (``None``) for anything else.

    A ``rediss://`` URL gets it only when it names its ``ssl_cert_reqs``: without them kombu
    picks TLS options from the *scheme* (``rediss`` alone means "TLS, unverified"), which an
    explicit transport would lose."""
    url = urlsplit(broker_url)
    if url.scheme == "redis" or (url.scheme == "rediss" and "ssl_cert_reqs=" in url.query):
        return f"{__name__}:Transport"
    return None
