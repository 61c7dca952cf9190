"""Standard Webhooks signatures: inbots signs the way the published libraries verify, and its own
``verify`` helper accepts what they sign. Pure functions: no server, no database."""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from datetime import UTC, datetime

import pytest
import standardwebhooks
from svix.webhooks import Webhook as SvixWebhook

from inbots.kit.ids import PREFIXES, new_id
from inbots.webhooks import (
    BadSignature,
    FutureTimestamp,
    MissingHeader,
    StaleTimestamp,
    VerificationError,
    signing,
    verify,
)

BODY = json.dumps(
    {"type": "message.created", "delivery_id": "dlv_0123456789abcdefghjkmnpqrs", "summary": "hi"},
    separators=(",", ":"),
).encode()
MSG_ID = "dlv_0123456789abcdefghjkmnpqrs"


def svix_headers(headers: dict[str, str]) -> dict[str, str]:
    """The same headers under the names the svix documentation uses."""
    return {k.replace("webhook-", "svix-"): v for k, v in headers.items()}


def verifies_everywhere(body: bytes, headers: dict[str, str], secret: str) -> None:
    """Verify with standardwebhooks, svix (both header spellings) and inbots' own helper."""
    expected = json.loads(body)
    assert standardwebhooks.Webhook(secret).verify(body, headers) == expected
    SvixWebhook(secret).verify(body, svix_headers(headers))  # raises when it does not verify
    SvixWebhook(secret).verify(body, headers)
    assert verify(body, headers, secret) == expected


# --- secrets -----------------------------------------------------------------------------------


def test_new_secret_is_whsec_and_standard_base64_of_32_bytes() -> None:
    minted = [signing.new_secret() for _ in range(300)]
    assert len(set(minted)) == len(minted)
    bodies = []
    for secret in minted:
        assert secret.startswith("whsec_")
        body = secret.removeprefix("whsec_")
        assert re.fullmatch(r"[A-Za-z0-9+/]{43}=", body), secret  # 32 bytes -> 44 chars, padded
        assert len(base64.b64decode(body, validate=True)) == 32
        bodies.append(body)
    joined = "".join(bodies)
    # The standard alphabet, not the URL-safe one: '+' and '/' occur, '-' and '_' never do.
    assert "+" in joined and "/" in joined
    assert "-" not in joined and "_" not in joined


def test_secret_that_is_not_standard_base64_is_refused() -> None:
    urlsafe = "whsec_" + base64.urlsafe_b64encode(b"\xfb\xff" * 16).decode()
    assert "-" in urlsafe or "_" in urlsafe.removeprefix("whsec_")
    with pytest.raises(ValueError):
        signing.sign(urlsafe, MSG_ID, int(time.time()), BODY)


# --- inbots signs, the libraries verify --------------------------------------------------------


def test_inbots_signature_verifies_with_standardwebhooks() -> None:
    secret = signing.new_secret()
    headers = signing.headers_for([secret], MSG_ID, BODY)
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert headers["webhook-id"] == MSG_ID
    assert abs(int(headers["webhook-timestamp"]) - time.time()) < 5
    assert re.fullmatch(r"v1,[A-Za-z0-9+/]{43}=", headers["webhook-signature"])
    assert standardwebhooks.Webhook(secret).verify(BODY, headers) == json.loads(BODY)


def test_inbots_signature_verifies_with_svix_under_svix_header_names() -> None:
    secret = signing.new_secret()
    headers = svix_headers(signing.headers_for([secret], MSG_ID, BODY))
    assert set(headers) == {"svix-id", "svix-timestamp", "svix-signature"}
    SvixWebhook(secret).verify(BODY, headers)
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        SvixWebhook(signing.new_secret()).verify(BODY, headers)


def test_inbots_signature_verifies_with_svix_under_webhook_header_names() -> None:
    secret = signing.new_secret()
    headers = signing.headers_for([secret], MSG_ID, BODY)
    SvixWebhook(secret).verify(BODY, headers)
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        SvixWebhook(signing.new_secret()).verify(BODY, headers)


def test_inbots_signature_matches_standardwebhooks_sign_exactly() -> None:
    secret = signing.new_secret()
    ts = 1_790_000_000
    ours = signing.sign(secret, MSG_ID, ts, BODY)
    theirs = standardwebhooks.Webhook(secret).sign(
        MSG_ID, datetime.fromtimestamp(ts, tz=UTC), BODY.decode()
    )
    assert ours == theirs


# --- the libraries sign, inbots verifies -------------------------------------------------------


def test_verify_accepts_what_standardwebhooks_signs() -> None:
    secret = signing.new_secret()
    now = datetime.now(tz=UTC)
    signature = standardwebhooks.Webhook(secret).sign(MSG_ID, now, BODY.decode())
    headers = {
        "webhook-id": MSG_ID,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
    }
    assert verify(BODY, headers, secret) == json.loads(BODY)


def test_verify_accepts_what_svix_signs() -> None:
    secret = signing.new_secret()
    now = datetime.now(tz=UTC)
    signature = SvixWebhook(secret).sign(MSG_ID, now, BODY.decode())
    headers = {
        "webhook-id": MSG_ID,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
    }
    assert verify(BODY, headers, secret) == json.loads(BODY)


# --- rotation: two signatures ------------------------------------------------------------------


def test_rotation_header_carries_two_signatures_new_first() -> None:
    new, old = signing.new_secret(), signing.new_secret()
    headers = signing.headers_for([new, old], MSG_ID, BODY)
    ts = int(headers["webhook-timestamp"])
    parts = headers["webhook-signature"].split(" ")
    assert parts == [signing.sign(new, MSG_ID, ts, BODY), signing.sign(old, MSG_ID, ts, BODY)]
    assert all(p.startswith("v1,") for p in parts)


def test_rotation_each_secret_verifies_alone_everywhere() -> None:
    new, old = signing.new_secret(), signing.new_secret()
    headers = signing.headers_for([new, old], MSG_ID, BODY)
    verifies_everywhere(BODY, headers, new)
    verifies_everywhere(BODY, headers, old)
    stranger = signing.new_secret()
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(stranger).verify(BODY, headers)
    with pytest.raises(BadSignature):
        verify(BODY, headers, stranger)


# --- inbots.verify: the causes -----------------------------------------------------------------


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_verify_missing_header_raises_missing_header(missing: str) -> None:
    secret = signing.new_secret()
    headers = signing.headers_for([secret], MSG_ID, BODY)
    del headers[missing]
    with pytest.raises(MissingHeader, match=missing):
        verify(BODY, headers, secret)


@pytest.mark.parametrize("empty", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_verify_empty_header_raises_missing_header(empty: str) -> None:
    secret = signing.new_secret()
    headers = {**signing.headers_for([secret], MSG_ID, BODY), empty: ""}
    with pytest.raises(MissingHeader):
        verify(BODY, headers, secret)


def test_verify_timestamp_older_than_tolerance_raises_stale() -> None:
    secret = signing.new_secret()
    now = 1_790_000_000
    old = signing.headers_for([secret], MSG_ID, BODY, timestamp=now - 301)
    with pytest.raises(StaleTimestamp):
        verify(BODY, old, secret, now=now)
    inside = signing.headers_for([secret], MSG_ID, BODY, timestamp=now - 299)
    assert verify(BODY, inside, secret, now=now) == json.loads(BODY)


def test_verify_stale_uses_the_given_tolerance() -> None:
    secret = signing.new_secret()
    now = 1_790_000_000
    headers = signing.headers_for([secret], MSG_ID, BODY, timestamp=now - 60)
    assert verify(BODY, headers, secret, now=now) == json.loads(BODY)
    with pytest.raises(StaleTimestamp):
        verify(BODY, headers, secret, tolerance=30, now=now)
    with pytest.raises(StaleTimestamp):
        verify(BODY, headers, secret, 30, now=now)


def test_verify_stale_against_the_real_clock() -> None:
    secret = signing.new_secret()
    headers = signing.headers_for([secret], MSG_ID, BODY, timestamp=int(time.time()) - 3600)
    with pytest.raises(StaleTimestamp):
        verify(BODY, headers, secret)


def test_verify_timestamp_in_the_future_beyond_tolerance_raises_future() -> None:
    secret = signing.new_secret()
    now = 1_790_000_000
    ahead = signing.headers_for([secret], MSG_ID, BODY, timestamp=now + 301)
    with pytest.raises(FutureTimestamp):
        verify(BODY, ahead, secret, now=now)
    inside = signing.headers_for([secret], MSG_ID, BODY, timestamp=now + 299)
    assert verify(BODY, inside, secret, now=now) == json.loads(BODY)
    real = signing.headers_for([secret], MSG_ID, BODY, timestamp=int(time.time()) + 3600)
    with pytest.raises(FutureTimestamp):
        verify(BODY, real, secret)


def test_verify_wrong_secret_raises_bad_signature() -> None:
    headers = signing.headers_for([signing.new_secret()], MSG_ID, BODY)
    with pytest.raises(BadSignature):
        verify(BODY, headers, signing.new_secret())


def test_verify_tampered_body_raises_bad_signature() -> None:
    secret = signing.new_secret()
    headers = signing.headers_for([secret], MSG_ID, BODY)
    tampered = BODY.replace(b'"hi"', b'"ho"')
    assert tampered != BODY
    with pytest.raises(BadSignature):
        verify(tampered, headers, secret)


def test_verify_tampered_id_or_timestamp_raises_bad_signature() -> None:
    secret = signing.new_secret()
    headers = signing.headers_for([secret], MSG_ID, BODY)
    with pytest.raises(BadSignature):
        verify(BODY, {**headers, "webhook-id": MSG_ID + "x"}, secret)
    moved = str(int(headers["webhook-timestamp"]) - 1)
    with pytest.raises(BadSignature):
        verify(BODY, {**headers, "webhook-timestamp": moved}, secret)


def test_verify_ignores_signatures_of_other_versions() -> None:
    secret = signing.new_secret()
    headers = signing.headers_for([secret], MSG_ID, BODY)
    other_version = "v1a," + headers["webhook-signature"].removeprefix("v1,")
    with pytest.raises(BadSignature):
        verify(BODY, {**headers, "webhook-signature": other_version}, secret)


def test_verification_errors_share_a_base_class() -> None:
    for cls in (MissingHeader, StaleTimestamp, FutureTimestamp, BadSignature):
        assert issubclass(cls, VerificationError)
    assert len({MissingHeader, StaleTimestamp, FutureTimestamp, BadSignature}) == 4


# --- raw bytes, header case, ids ---------------------------------------------------------------


def test_verify_works_on_raw_bytes_with_non_ascii_characters() -> None:
    secret = signing.new_secret()
    payload = {"summary": "Grüße, señor — 日本語 ☃ 🚀", "sender": "zoë"}
    raw = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    assert not raw.isascii()
    headers = signing.headers_for([secret], MSG_ID, raw)
    assert verify(raw, headers, secret) == payload
    assert standardwebhooks.Webhook(secret).verify(raw, headers) == payload
    SvixWebhook(secret).verify(raw, svix_headers(headers))
    # The same JSON re-encoded (escaped) is different bytes: the signature is over the raw body.
    escaped = json.dumps(payload, ensure_ascii=True).encode()
    assert json.loads(escaped) == payload
    with pytest.raises(BadSignature):
        verify(escaped, headers, secret)


def test_verify_accepts_non_ascii_body_signed_by_standardwebhooks() -> None:
    secret = signing.new_secret()
    text = json.dumps({"summary": "Größe ✓ 中文"}, ensure_ascii=False)
    now = datetime.now(tz=UTC)
    headers = {
        "webhook-id": MSG_ID,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": standardwebhooks.Webhook(secret).sign(MSG_ID, now, text),
    }
    assert verify(text.encode("utf-8"), headers, secret) == json.loads(text)


def test_verify_header_names_are_case_insensitive() -> None:
    secret = signing.new_secret()
    headers = signing.headers_for([secret], MSG_ID, BODY)
    for spell in (str.upper, str.title, lambda s: s[0].upper() + s[1:]):
        mixed = {spell(k): v for k, v in headers.items()}
        assert set(mixed) != set(headers)
        assert verify(BODY, mixed, secret) == json.loads(BODY)


def test_ids_never_contain_a_dot() -> None:
    for prefix in PREFIXES.values():
        for _ in range(500):
            ident = new_id(prefix)
            assert "." not in ident, ident
            assert ident.startswith(prefix + "_")


def test_base64_signature_decodes_to_a_sha256_digest() -> None:
    secret = signing.new_secret()
    value = signing.sign(secret, MSG_ID, 1_790_000_000, BODY).removeprefix("v1,")
    try:
        digest = base64.b64decode(value, validate=True)
    except binascii.Error:  # pragma: no cover - the assertion below explains
        digest = b""
    assert len(digest) == 32
