from __future__ import annotations

from inbots.kit.schema import Model, Request, Timestamp


class WebhookSet(Request):
    url: str


class WebhookRead(Model):
    url: str
    signing_secret: str
    previous_secret_expires_at: Timestamp | None = None
