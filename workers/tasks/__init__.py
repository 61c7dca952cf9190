"""Thin task wrappers over ``inbots.deliveries``: they take ids and hold no logic."""

from workers.tasks.notify import notify_batch_task, notify_task
from workers.tasks.renotify import renotify_task

__all__ = ["notify_batch_task", "notify_task", "renotify_task"]
