"""The Celery app: broker from settings, JSON only, late acknowledgement.

The delivery tasks (``delivery.notify``, ``delivery.renotify``) arrive with the webhook engine;
until then the worker starts and serves nothing but its own health.
"""

from __future__ import annotations

from celery import Celery

from inbots.config import get_settings

settings = get_settings()
app = Celery("inbots", broker=settings.broker_url or "redis://127.0.0.1:6379/0")
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    result_serializer="json",
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_ignore_result=True,
    broker_connection_retry_on_startup=True,
)
