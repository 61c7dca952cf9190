"""The operator dashboard: server-rendered pages at ``/`` (see docs/dashboard.md).

:func:`install` mounts it on the app: the routes, the static files and the two exception
handlers (sign-in needed, CSRF rejected). The package:

- ``auth.py``: sign-in and sign-out, and the checks every request makes first (the session and
  its operator token, the CSRF token and Origin of a POST);
- ``views.py``: the pages (the GETs), each a template and the function building its data, from
  ``pages.py`` (what each page shows) and ``queries.py`` (the reads only the dashboard needs);
- ``files.py``: attachments, downloaded or shown as thumbnails (raster images only);
- ``forms.py``: the operator's POSTs, buttons and forms, each one service call of the API or one
  of ``actions.py`` (a form that is several calls, in one unit of work);
- ``render.py``: the templates' environment and filters, and drawing an answer;
- ``session.py``: the signed cookie.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from inbots.dashboard import auth, files, forms, views
from inbots.dashboard.auth import CsrfRejected, LoginRequired, on_csrf_rejected, on_login_required
from inbots.dashboard.forms import too_large_page
from inbots.dashboard.render import STATIC, STATIC_PATH
from inbots.dashboard.session import Sessions, signing_key

__all__ = ["install", "too_large_page"]

log = logging.getLogger(__name__)


def install(app: FastAPI) -> None:
    """Mount the dashboard on ``app`` (whose ``state.settings`` is already set)."""
    if not app.state.settings.session_secret and not app.state.settings.embedded:
        log.warning(
            "INBOTS_SESSION_SECRET is not set: dashboard sessions are signed with a key of this"
            " process only, so they end on restart and fail on the other web processes"
        )
    settings = app.state.settings
    app.state.dashboard_sessions = Sessions(
        signing_key(settings), settings.session_max_age_seconds, settings.session_cookie_secure
    )
    app.include_router(auth.router)  # /login, /logout
    app.include_router(views.router)  # the pages
    app.include_router(forms.router)  # the POSTs
    app.include_router(files.router)  # attachments: downloads and thumbnails
    app.mount(STATIC_PATH, StaticFiles(directory=STATIC), name="dashboard-static")
    app.add_exception_handler(LoginRequired, on_login_required)
    app.add_exception_handler(CsrfRejected, on_csrf_rejected)
