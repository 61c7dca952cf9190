"""The interactive API reference, ``/docs`` (Swagger UI) and ``/redoc``, in development only.

FastAPI's own pages load floating versions of Swagger UI and ReDoc from a CDN, without
Subresource Integrity, on the dashboard's origin: whoever serves those files runs code beside
the operator's session. These pages load the copies that the ``fastapi-offline`` package
installs with Inbots instead (served under ``/docs/assets``), so they work offline, and a
Content-Security-Policy lets the browser run no script from anywhere else.

With ``INBOTS_ENVIRONMENT=production`` none of this is installed: the three paths answer 404,
and ``/openapi.json`` remains for tools and clients.
"""

from __future__ import annotations

import base64
import hashlib
import re

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_PATH = "/docs"
REDOC_PATH = "/redoc"
ASSETS_PATH = "/docs/assets"
# Swagger UI's and ReDoc's files as the fastapi-offline package ships them.
_ASSETS = ("fastapi_offline", "static")

_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def install(app: FastAPI) -> None:
    """Serve ``/docs`` and ``/redoc`` on ``app`` from the installed assets (development)."""
    assert app.openapi_url is not None  # the pages show it
    openapi_url = app.openapi_url
    app.mount(ASSETS_PATH, StaticFiles(packages=[_ASSETS]), name="api-docs-assets")
    swagger = _hardened(
        get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} API",
            swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_PATH}/favicon.png",
            oauth2_redirect_url=None,  # Inbots signs in with bearer tokens, never OAuth2
        )
    )
    redoc = _hardened(
        get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} API",
            redoc_js_url=f"{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_PATH}/favicon.png",
            with_google_fonts=False,
        )
    )

    @app.get(DOCS_PATH, include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return HTMLResponse(*swagger)

    @app.get(REDOC_PATH, include_in_schema=False)
    def redoc_page() -> HTMLResponse:
        return HTMLResponse(*redoc)


def _hardened(page: HTMLResponse) -> tuple[str, int, dict[str, str]]:
    """``page``'s HTML, status and headers: a policy that runs only this origin's scripts and
    the page's own inline one (by its hash), and never framed."""
    html = bytes(page.body).decode()
    scripts = " ".join(
        [
            "'self'",
            *(
                f"'sha256-{base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()}'"
                for script in _INLINE_SCRIPT.findall(html)
            ),
        ]
    )
    policy = (
        f"default-src 'self'; script-src {scripts}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    )
    headers = {
        "Content-Security-Policy": policy,
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
    }
    return html, 200, headers
