"""The dashboard's cookie: signed, holding the session's random key (never the operator token)
and a CSRF token.

The key names a row in ``dashboard_sessions`` (:mod:`inbots.auth.sessions`), which every
request re-reads on whichever web process it lands: signing out revokes the row, revoking the
operator token revokes every row of it, and the row expires ``INBOTS_SESSION_MAX_AGE_SECONDS``
(12 hours) after sign-in however often the cookie is re-signed. The cookie is signed
(itsdangerous), HttpOnly, SameSite=Strict, and ``Secure`` over https (or always, with
``INBOTS_SESSION_COOKIE_SECURE``).

The signing key is ``INBOTS_SESSION_SECRET``; without it, a random key is made once per process
(sessions then end on restart and do not cross processes).
"""

from __future__ import annotations

import hmac
import math
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from fastapi import Request, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

from inbots.config import Settings

COOKIE = "inbots_session"
_SALT = "inbots.dashboard.session"
_PROCESS_KEY = secrets.token_urlsafe(32)  # used only when no INBOTS_SESSION_SECRET is set


def signing_key(settings: Settings) -> str:
    """``settings.session_secret`` when set, else this process's random key."""
    return settings.session_secret or _PROCESS_KEY


@dataclass
class Session:
    """One browser's session. ``key`` (the session row's key) is None before sign-in: the login
    form still has a CSRF token."""

    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    key: str | None = None
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

    def __init__(self, secret: str, max_age_seconds: float, always_secure: bool = False) -> None:
        self._serializer = URLSafeTimedSerializer(secret, salt=_SALT)
        self.max_age_seconds = max_age_seconds
        self.always_secure = always_secure

    def _secure(self, request: Request) -> bool:
        return self.always_secure or request.url.scheme == "https"

    def load(self, request: Request) -> Session | None:
        raw = request.cookies.get(COOKIE)
        if not raw:
            return None
        try:
            data = self._serializer.loads(raw, max_age=math.ceil(self.max_age_seconds))
        except BadSignature:  # also expired (SignatureExpired is a BadSignature)
            return None
        try:
            session = Session(
                csrf=str(data["c"]),
                key=data.get("k"),
                issued_at=float(data["i"]),
                flash=(str(data["f"][0]), str(data["f"][1])) if data.get("f") else None,
                dirty=False,
            )
        except (KeyError, TypeError, ValueError):
            return None
        if time.time() - session.issued_at > self.max_age_seconds:  # re-signing never extends it
            return None
        return session

    def store(self, request: Request, response: Response, session: Session) -> None:
        data: dict[str, Any] = {"c": session.csrf, "k": session.key, "i": session.issued_at}
        if session.flash:
            data["f"] = list(session.flash)
        remaining = int(self.max_age_seconds - (time.time() - session.issued_at))
        response.set_cookie(
            COOKIE,
            self._serializer.dumps(data),
            max_age=max(remaining, 1),
            path="/",
            httponly=True,
            samesite="strict",
            secure=self._secure(request),
        )
        session.dirty = False

    def clear(self, request: Request, response: Response) -> None:
        response.delete_cookie(
            COOKIE,
            path="/",
            httponly=True,
            samesite="strict",
            secure=self._secure(request),
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


def sessions_of(request: Request) -> Sessions:
    sessions: Sessions = request.app.state.dashboard_sessions
    return sessions
