"""The dashboard's session: a signed cookie holding the operator token row's id and a CSRF token.

The cookie never holds the token itself. It is signed (itsdangerous), HttpOnly, SameSite=Strict,
``Secure`` over https, and expires 12 hours after sign-in however often it is re-signed. Every
request re-reads the token row (:func:`inbots.auth.service.operator_by_token_id`), so revoking the
token ends the session at once.

The signing key is ``INBOTS_SESSION_SECRET``; without it, a random key is made once per process
(sessions then end on restart and do not cross processes).
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from fastapi import Request, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

from inbots.config import Settings

COOKIE = "inbots_session"
MAX_AGE_SECONDS = 12 * 3600
_SALT = "inbots.dashboard.session"
_PROCESS_KEY = secrets.token_urlsafe(32)  # used only when no INBOTS_SESSION_SECRET is set


def signing_key(settings: Settings) -> str:
    """``settings.session_secret`` when set, else this process's random key."""
    return settings.session_secret or _PROCESS_KEY


@dataclass
class Session:
    """One browser's session. ``token_id`` is None before sign-in (the login form still has a
    CSRF token)."""

    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    token_id: str | None = None
    issued_at: float = field(default_factory=time.time)
    flash: tuple[str, str] | None = None  # (level, text), shown once on the next page
    dirty: bool = field(default=True, compare=False)

    def say(self, level: str, text: str) -> None:
        self.flash = (level, text)
        self.dirty = True

    def take_flash(self) -> tuple[str, str] | None:
        flash, self.flash = self.flash, None
        if flash is not None:
            self.dirty = True
        return flash

    def csrf_ok(self, submitted: str) -> bool:
        """Constant-time comparison of the form's token with the session's."""
        return bool(submitted) and hmac.compare_digest(submitted.encode(), self.csrf.encode())


class Sessions:
    """Loads and stores :class:`Session` in the signed cookie."""

    def __init__(self, secret: str) -> None:
        self._serializer = URLSafeTimedSerializer(secret, salt=_SALT)

    def load(self, request: Request) -> Session | None:
        raw = request.cookies.get(COOKIE)
        if not raw:
            return None
        try:
            data = self._serializer.loads(raw, max_age=MAX_AGE_SECONDS)
        except BadSignature:  # also expired (SignatureExpired is a BadSignature)
            return None
        try:
            session = Session(
                csrf=str(data["c"]),
                token_id=data.get("t"),
                issued_at=float(data["i"]),
                flash=(str(data["f"][0]), str(data["f"][1])) if data.get("f") else None,
                dirty=False,
            )
        except (KeyError, TypeError, ValueError):
            return None
        if time.time() - session.issued_at > MAX_AGE_SECONDS:  # re-signing never extends it
            return None
        return session

    def store(self, request: Request, response: Response, session: Session) -> None:
        data: dict[str, Any] = {"c": session.csrf, "t": session.token_id, "i": session.issued_at}
        if session.flash:
            data["f"] = list(session.flash)
        remaining = int(MAX_AGE_SECONDS - (time.time() - session.issued_at))
        response.set_cookie(
            COOKIE,
            self._serializer.dumps(data),
            max_age=max(remaining, 1),
            path="/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        session.dirty = False

    @staticmethod
    def clear(request: Request, response: Response) -> None:
        response.delete_cookie(
            COOKIE,
            path="/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )


def same_origin(request: Request) -> bool:
    """Whether a POST comes from our own pages, judged by Origin (else Referer). A request with
    neither header passes here; the CSRF token still guards it."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if not source:
        return True
    if source == "null":
        return False
    parts = urlsplit(source)
    return parts.scheme in ("http", "https") and parts.netloc == request.url.netloc


def local_path(target: str | None, default: str = "/") -> str:
    """``target`` if it is a path on this site (no scheme, no host), else ``default``."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return default
    return target
