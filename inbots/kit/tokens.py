"""Bearer tokens: minted with ``secrets``, stored only as SHA-256 hashes, compared in constant time.

Tokens carry 32 random bytes, so a fast hash is the right tool (a slow password hash buys nothing
against a 256-bit secret and would cost every request).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import string
from collections import Counter
from itertools import pairwise

AGENT_KEY_PREFIX = "agt_"
OPERATOR_TOKEN_PREFIX = "ops_"
ENROLLMENT_TOKEN_PREFIX = "enr_"
HINT_CHARS = 4  # random characters of a key shown in listings after its prefix
_TOKEN_BYTES = 32
MIN_RANDOM_BITS = 128


def mint(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(_TOKEN_BYTES)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def matches(token: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_token(token), stored_hash)


def hint(token: str, prefix: str) -> str:
    """What listings show of a key: its prefix and first few random characters (``agt_AbCd``)."""
    return token[: len(prefix) + HINT_CHARS]


def looks_like(token: str, prefix: str) -> bool:
    """Cheap shape check before any lookup: right prefix, enough url-safe characters."""
    body = token[len(prefix) :]
    return (
        token.startswith(prefix)
        and 32 <= len(body) <= 256
        and all(c.isalnum() or c in "-_" for c in body)
    )


# The alphabets a token body can come from, smallest first: a body is judged by the smallest one
# that holds all of its characters (32 hex digits are 128 bits, 32 url-safe characters 192).
_ALPHABETS = (
    string.digits,
    string.hexdigits.lower(),
    string.hexdigits.upper(),
    string.ascii_lowercase,
    string.ascii_uppercase,
    string.ascii_lowercase + string.digits,
    string.ascii_uppercase + string.digits,
    string.ascii_letters,
    string.ascii_letters + string.digits,
    string.ascii_letters + string.digits + "-_",
)


def weakness(token: str, prefix: str) -> str | None:
    """Why a well-shaped token chosen by a person is too weak to trust, or None.

    A setting's token was not minted here, so its randomness can only be estimated: at most
    ``log2(alphabet)`` bits a character, which must reach :data:`MIN_RANDOM_BITS`, and none of
    the shapes people type instead of random text (few distinct characters, one character over
    and over, a repeated chunk, a run like ``abcdef`` or ``123456``), nor mostly words, names,
    dates and keyboard walks as zxcvbn's word lists and matchers find them
    (``PasswordPasswordPassword123456789``, ``qwertyuiopasdfghjkl…``).
    """
    body = token[len(prefix) :]
    if not body:
        return "it has nothing after the prefix"
    counts = Counter(body).values()
    spread = -sum(n / len(body) * math.log2(n / len(body)) for n in counts)
    if spread < 2.5 or max(counts) * 3 > len(body):
        return "it repeats a few characters over and over"
    if _periodic(body):
        return "it repeats the same chunk of characters"
    steps = sum(abs(ord(b) - ord(a)) == 1 for a, b in pairwise(body))
    if steps * 2 > len(body):
        return "it runs through neighbouring characters (like abcdef or 123456)"
    alphabet = next((a for a in _ALPHABETS if set(body) <= set(a)), _ALPHABETS[-1])
    bits = len(body) * math.log2(len(alphabet))
    if bits < MIN_RANDOM_BITS:
        return (
            f"{len(body)} characters from an alphabet of {len(alphabet)} carry at most "
            f"{bits:.0f} bits of randomness, fewer than {MIN_RANDOM_BITS}"
        )
    # Words and patterns: under 128 bits once they count as the few guesses they are, and they
    # take away at least half of what the characters seemed to carry. Random text matches a
    # short word or a date by chance: of 20,000 random 32-hex-digit tokens (exactly 128 bits)
    # none lost more than 38 %, while the phrases and walks people type lose 55 % and more.
    left = _bits_left_by_patterns(body, math.log2(len(alphabet)))
    if left < MIN_RANDOM_BITS and left < bits / 2:
        return (
            "it is made of words, names, dates or keyboard patterns (like Password or qwerty) "
            f"that guessing tries first, about {left:.0f} bits of randomness by zxcvbn's count"
        )
    return None


# Words of this product that a person may build a token from, beside zxcvbn's word lists.
_OWN_WORDS = ("inbots", "operator", "token", "ops", "secret", "admin", "production")
# zxcvbn's work grows faster than the length: a long body is judged in pieces of this size.
_PIECE = 64


def _bits_left_by_patterns(body: str, bits_per_character: float) -> float:
    """The randomness of ``body`` when the pieces zxcvbn recognises (dictionary words and names,
    keyboard walks, sequences, repeats, dates) count as zxcvbn's guesses for them, and the rest
    as random characters of the body's alphabet."""
    from zxcvbn import zxcvbn  # here: only a token chosen by a person is judged (60 ms)

    bits = 0.0
    for start in range(0, len(body), _PIECE):
        piece = body[start : start + _PIECE]
        found = zxcvbn(piece, user_inputs=list(_OWN_WORDS), max_length=_PIECE)
        for match in found["sequence"]:
            random_bits = len(match["token"]) * bits_per_character
            if match["pattern"] == "bruteforce":
                bits += random_bits
            else:
                bits += min(math.log2(max(float(match["guesses"]), 1.0)), random_bits)
    return bits


def _periodic(body: str) -> bool:
    """Whether ``body`` is (nearly) one short chunk written again and again."""
    for period in range(1, len(body) // 2 + 1):
        same = sum(body[i] == body[i + period] for i in range(len(body) - period))
        if same >= 0.8 * (len(body) - period):
            return True
    return False
