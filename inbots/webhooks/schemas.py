from __future__ import annotations

from pydantic import Field

from inbots.kit.schema import Model, Request, Timestamp
from inbots.webhooks.subscriptions import DEFAULT, EVENT_TYPES


class WebhookSet(Request):
    """A webhook URL to set, and which notification types it receives."""

    url: str = Field(description="The http(s) URL Inbots POSTs signed notifications to.")
    webhook_events: list[str] | None = Field(
        default=None,
        description="The notification types this webhook receives, from: "
        + ", ".join(EVENT_TYPES)
        + ". Omitted: unchanged (a new webhook receives "
        + ", ".join(DEFAULT)
        + "); [] receives none.",
    )


class WebhookRead(Model):
    url: str
    signing_secret: str
    previous_secret_expires_at: Timestamp | None = None
    webhook_events: list[str] = Field(default_factory=lambda: list(DEFAULT))
