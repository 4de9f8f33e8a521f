"""The web client's routes on the gateway app (the one both shapes serve): the app at `/`
without a token under a strict Content-Security-Policy, hashed assets cached for good."""

from __future__ import annotations

import http.client
import re

from vancetope_gateway.webapp import ASSET_MAX_AGE, WEB_DIR


def _get(host: str, path: str, body: bytes | None = None) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection(host, timeout=10)
    connection.request("GET", path, body=body)
    return connection.getresponse()


def test_the_app_needs_no_token_and_allows_no_inline_script(served):
    answer = _get(served, "/")
    html = answer.read().decode()
    assert answer.status == 200 and answer.getheader("Cache-Control") == "no-cache"
    policy = answer.getheader("Content-Security-Policy")
    assert "script-src 'self';" in policy and "'unsafe-eval'" not in policy
    assert "connect-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert answer.getheader("X-Content-Type-Options") == "nosniff"
    assert answer.getheader("Referrer-Policy") == "no-referrer"
    assert not re.search(r"<script(?![^>]*\bsrc=)", html)  # every script is a file


def test_hashed_assets_are_immutable_and_nothing_else_is_served(served):
    asset = next((WEB_DIR / "assets").glob("*.js")).name
    answer = _get(served, f"/assets/{asset}")
    answer.read()
    assert answer.status == 200
    assert answer.getheader("Cache-Control") == f"public, max-age={ASSET_MAX_AGE}, immutable"
    assert answer.getheader("Content-Type").startswith("text/javascript")
    for path in ("/assets/missing.js", "/assets/../webapp.py", "/assets/%2e%2e/webapp.py",
                 "/index.html/../app.py"):
        answer = _get(served, path)
        answer.read()
        assert answer.status == 404, path


def test_a_get_of_the_app_with_a_body_is_refused(served):
    answer = _get(served, "/", body=b"x" * 10)
    answer.read()
    assert answer.status == 413
