"""Standard Webhooks signatures: pure functions, no database, no HTTP, no settings.

A secret is ``whsec_`` + standard base64 of 32 random bytes. A signature is
``v1,`` + base64(HMAC-SHA256(key, f"{id}.{timestamp}.{body}")) keyed with the decoded secret; during
a rotation several are sent, separated by spaces, newest first.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
DEFAULT_TOLERANCE = 300


class VerificationError(Exception):
    """The notification could not be verified. Subclasses name the cause:

    ::

        VerificationError
        ├── MissingHeader      a webhook-* header is absent or empty
        ├── StaleTimestamp     signed longer ago than the tolerance
        ├── FutureTimestamp    signed further ahead than the tolerance
        └── BadSignature       no signature matches this secret
    """


class MissingHeader(VerificationError):
    pass


class StaleTimestamp(VerificationError):
    pass


class FutureTimestamp(VerificationError):
    pass


class BadSignature(VerificationError):
    pass


# After a rotation the previous secret keeps signing (a second signature) this long: 24 h.
ROTATION_OVERLAP_SECONDS = 86_400


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def _key(secret: str) -> bytes:
    raw = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(raw + "=" * (-len(raw) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a signing secret is 'whsec_' followed by standard base64") from None
    if not key:
        raise ValueError("the signing secret is empty")
    return key


def _as_bytes(body: bytes | str) -> bytes:
    return body.encode("utf-8") if isinstance(body, str) else body


def sign(secret: str, msg_id: str, timestamp: int, body: bytes | str) -> str:
    """One ``v1,<base64>`` signature of ``body`` for this id and Unix timestamp."""
    payload = f"{msg_id}.{timestamp}.".encode() + _as_bytes(body)
    digest = hmac.new(_key(secret), payload, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def signature_header(
    signing_secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes | str
) -> str:
    """The ``webhook-signature`` value: one signature per secret, newest secret first."""
    return " ".join(sign(s, msg_id, timestamp, body) for s in signing_secrets)


def headers_for(
    signing_secrets: Sequence[str], msg_id: str, body: bytes | str, timestamp: int | None = None
) -> dict[str, str]:
    """The three Standard Webhooks headers for one attempt, signed now (or at ``timestamp``)."""
    ts = int(time.time()) if timestamp is None else timestamp
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": signature_header(signing_secrets, msg_id, ts, body),
    }


def verify(
    raw_body: bytes | str,
    headers: Mapping[str, str],
    secret: str,
    tolerance: int = DEFAULT_TOLERANCE,
    *,
    now: float | None = None,
) -> Any:
    """Verify a notification on its raw bytes; return the parsed JSON body.

    Raises a :class:`VerificationError` subclass naming the cause. Headers are matched
    case-insensitively. Compare ``webhook-id`` against the ids you have already handled (for a
    limited time) to drop repeats.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    msg_id = lowered.get("webhook-id")
    timestamp = lowered.get("webhook-timestamp")
    signature = lowered.get("webhook-signature")
    for name, value in (
        ("webhook-id", msg_id),
        ("webhook-timestamp", timestamp),
        ("webhook-signature", signature),
    ):
        if not value:
            raise MissingHeader(f"missing header {name}")
    assert msg_id and timestamp and signature
    try:
        ts = int(timestamp)
    except ValueError:
        raise MissingHeader("webhook-timestamp is not a Unix time in seconds") from None
    current = time.time() if now is None else now
    if ts < current - tolerance:
        raise StaleTimestamp(f"timestamp is more than {tolerance} s old")
    if ts > current + tolerance:
        raise FutureTimestamp(f"timestamp is more than {tolerance} s in the future")
    expected = sign(secret, msg_id, ts, raw_body).split(",", 1)[1].encode()
    for candidate in signature.split():
        version, _, value = candidate.partition(",")
        if version == "v1" and hmac.compare_digest(value.encode(), expected):
            return json.loads(_as_bytes(raw_body))
    raise BadSignature("no signature matches this secret")
