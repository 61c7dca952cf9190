"""Bearer tokens: minted with ``secrets``, stored only as SHA-256 hashes, compared in constant time.

Tokens carry 32 random bytes, so a fast hash is the right tool (a slow password hash buys nothing
against a 256-bit secret and would cost every request).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

AGENT_KEY_PREFIX = "agt_"
OPERATOR_TOKEN_PREFIX = "ops_"
_TOKEN_BYTES = 32


def mint(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(_TOKEN_BYTES)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def matches(token: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_token(token), stored_hash)


def looks_like(token: str, prefix: str) -> bool:
    """Cheap shape check before any lookup: right prefix, enough url-safe characters."""
    body = token[len(prefix) :]
    return (
        token.startswith(prefix)
        and 32 <= len(body) <= 256
        and all(c.isalnum() or c in "-_" for c in body)
    )
