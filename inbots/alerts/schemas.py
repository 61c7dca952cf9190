from __future__ import annotations

from pydantic import Field

from inbots.kit.schema import Model, Request, Timestamp
from inbots.webhooks.subscriptions import ALERT_TYPES


class AlertWebhookSet(Request):
    """The operator's alert webhook URL, and which alert types it receives."""

    url: str = Field(description="The http(s) URL Inbots POSTs signed alerts to.")
    events: list[str] | None = Field(
        default=None,
        description="The alert types this webhook receives, from: "
        + ", ".join(ALERT_TYPES)
        + ". Omitted: unchanged (a new webhook receives all of them); [] receives none.",
    )


class AlertWebhookRead(Model):
    """The operator's alert webhook. ``signing_secret`` is shown once: in the answer that minted
    it (the first PUT, and each rotate); null otherwise."""

    url: str
    events: list[str]
    signing_secret: str | None = None
    previous_secret_expires_at: Timestamp | None = None
