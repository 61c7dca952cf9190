"""Webhooks: URL policy, signing secrets and Standard Webhooks signatures.

Handler authors need one function::

    from inbots.webhooks import verify
    notification = verify(raw_body, request.headers, "whsec_…")
"""

from inbots.webhooks.signing import (
    BadSignature,
    FutureTimestamp,
    MissingHeader,
    StaleTimestamp,
    VerificationError,
    verify,
)

__all__ = [
    "BadSignature",
    "FutureTimestamp",
    "MissingHeader",
    "StaleTimestamp",
    "VerificationError",
    "verify",
]
