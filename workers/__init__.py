"""Celery workers. ``celery -A workers worker`` finds the app here."""

from inbots.kit.startup import starting, without_httpx_cli

without_httpx_cli()  # before anything imports httpx (inbots/kit/startup.py)
starting()  # the collector rests until the worker or beat is ready (inbots/kit/startup.py)

from workers.app import app  # noqa: E402

__all__ = ["app"]
