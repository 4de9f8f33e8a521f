"""Who a request is: its bearer token, from a header, a WebSocket subprotocol or the query."""

from __future__ import annotations

from flask import current_app, request

from vancetope_brain.identity import Principal

SUBPROTOCOL = "vancetope"
"""The WebSocket subprotocol the gateway selects; a browser offers it beside
``bearer.<token>``, the one header a browser's WebSocket can set."""
BEARER_SUBPROTOCOL = "bearer."


def offered_subprotocols() -> list[str]:
    return [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")
            if p.strip()]


def bearer_token() -> str | None:
    """``Authorization: Bearer …``; else a ``bearer.<token>`` WebSocket subprotocol
    (browsers); else ``?token=…`` (kept for old clients; logs redact it)."""
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        return header.removeprefix("Bearer ").strip()
    for offered in offered_subprotocols():
        if offered.startswith(BEARER_SUBPROTOCOL):
            return offered.removeprefix(BEARER_SUBPROTOCOL)
    return request.args.get("token")


def authenticate() -> Principal:
    return current_app.extensions["vancetope"].identity.authenticate(bearer_token())
