"""Celery workers. ``celery -A workers worker`` finds the app here."""

from workers.app import app

__all__ = ["app"]
