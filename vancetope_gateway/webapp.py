"""The web client: the built app (``webclient/`` → ``vancetope_gateway/web/``) at ``/``.

It needs no authentication to load: it holds no data, and everything it shows comes over
the authenticated WebSocket. The token reaches it in the URL fragment (``#token=``), which
browsers never send, so it never reaches a log.
"""

from __future__ import annotations

from pathlib import Path

from flask import Flask, Response, send_from_directory
from werkzeug.exceptions import NotFound

WEB_DIR = Path(__file__).parent / "web"

CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",  # no inline script, no eval
    # Mantine sets its theme's CSS variables in a <style> element and React sets style
    # attributes; neither can run script.
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",  # attachments are served by this origin (signed URLs)
    "connect-src 'self'",  # the WebSocket at /ws and the REST probe of a refused token
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])

ASSET_MAX_AGE = 365 * 24 * 3600
"""Files under ``assets/`` carry a hash of their content in their name: cached for a year."""


def add_web_client(app: Flask) -> None:
    """GET / (index.html, revalidated on every load) and GET /assets/<file> (immutable)."""

    @app.get("/")
    def web_index() -> Response:
        if not (WEB_DIR / "index.html").is_file():
            raise NotFound("the web client is not built: run `npm ci && npm run build` "
                           "in webclient/")
        response = send_from_directory(WEB_DIR, "index.html", max_age=0)
        response.headers["Cache-Control"] = "no-cache"
        return _harden(response)

    @app.get("/assets/<path:name>")
    def web_asset(name: str) -> Response:
        response = send_from_directory(WEB_DIR / "assets", name, max_age=ASSET_MAX_AGE)
        response.headers["Cache-Control"] = f"public, max-age={ASSET_MAX_AGE}, immutable"
        return _harden(response)


def _harden(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response
