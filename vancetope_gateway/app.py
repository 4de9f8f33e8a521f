"""The Flask app factory: REST blueprint and the WebSocket endpoint."""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import get_args

from flask import Blueprint, Flask, Response, current_app, g, jsonify, request
from flask_sock import Sock
from werkzeug.exceptions import HTTPException

from vancetope_brain.errors import StoreError, Unauthorized, VancetopeError
from vancetope_brain.events import EventListener
from vancetope_brain.identity import Principal
from vancetope_brain.runtime import Brain
from vancetope_brain.sessions.presence import PRESENCE_TTL
from vancetope_gateway.frames import NotifyMode
from vancetope_gateway.protocol import Connection

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 256 * 1024

rest = Blueprint("rest", __name__)


def bearer_token() -> str | None:
    """``Authorization: Bearer …``, or ``?token=…`` (browsers cannot set WebSocket headers)."""
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        return header.removeprefix("Bearer ").strip()
    return request.args.get("token")


def authenticate() -> Principal:
    return current_app.extensions["vancetope"].identity.authenticate(bearer_token())


@rest.get("/healthz")
def healthz() -> Response:
    """Liveness: answers without touching any dependency."""
    return jsonify(status="ok")


@rest.get("/readyz")
def readyz() -> tuple[Response, int]:
    """Readiness: the store and Redis answer, else 503 naming what failed."""
    brain: Brain = current_app.extensions["vancetope"]
    failures = {}
    try:
        brain.store.ping()
    except StoreError as e:
        failures["store"] = str(e)
    try:
        brain.redis.ping()
    except Exception as e:
        failures["redis"] = type(e).__name__
    if failures:
        return jsonify(status="unavailable", failures=failures), 503
    return jsonify(status="ready"), 200


@rest.get("/think-engines")
def think_engines() -> Response:
    authenticate()
    from vancetope_brain.engines import ENGINES

    return jsonify(engines=[e.describe() for e in ENGINES])


NOTIFY_MODES = get_args(NotifyMode)


class PresenceRenewer:
    """One thread per gateway process keeping its bound connections counted as present."""

    def __init__(self, interval: float = PRESENCE_TTL / 3) -> None:
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._interval = interval
        threading.Thread(target=self._run, name="vt-presence", daemon=True).start()

    def add(self, connection: Connection) -> None:
        with self._lock:
            self._connections.add(connection)

    def discard(self, connection: Connection) -> None:
        with self._lock:
            self._connections.discard(connection)

    def _run(self) -> None:
        while True:
            time.sleep(self._interval)
            with self._lock:
                connections = list(self._connections)
            for connection in connections:
                try:
                    connection.renew()
                except Exception:
                    log.exception("presence renewal failed; retrying next round")


def create_app(brain: Brain, *, llm_description: str) -> Flask:
    """The gateway for one OS process. Starts the process's event listener thread."""
    app = Flask(__name__, static_folder=None)
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.config["SOCK_SERVER_OPTIONS"] = {"max_message_size": brain.config.max_frame_bytes,
                                         "ping_interval": 25}
    app.extensions["vancetope"] = brain
    listener = EventListener(brain.redis)
    app.extensions["vancetope.listener"] = listener
    app.register_blueprint(rest)
    sock = Sock(app)

    renewer = PresenceRenewer()
    app.extensions["vancetope.renewer"] = renewer

    @app.before_request
    def _authenticate_websocket() -> tuple[Response, int] | None:
        # Refuse before the upgrade so an unauthenticated client never gets a socket.
        if request.path == "/ws":
            try:
                g.principal = authenticate()
            except Unauthorized as e:
                return jsonify(code=e.code, message=str(e)), 401
            g.notify_mode = request.args.get("notifyMode", "all")
            if g.notify_mode not in NOTIFY_MODES:
                return jsonify(code="invalid_input", message="notifyMode must be one of "
                               + ", ".join(NOTIFY_MODES)), 400
        return None

    @sock.route("/ws")
    def ws(socket) -> None:  # type: ignore[no-untyped-def]
        connection = Connection(socket, g.principal, brain, listener, llm=llm_description,
                                max_frame_bytes=brain.config.max_frame_bytes,
                                notify_mode=g.notify_mode)
        renewer.add(connection)
        try:
            connection.run()
        finally:
            renewer.discard(connection)

    @app.errorhandler(VancetopeError)
    def _domain_error(e: VancetopeError) -> tuple[Response, int]:
        status = {"unauthorized": 401, "not_found": 404, "conflict": 409,
                  "rate_limited": 429}.get(e.code, 400 if e.code == "invalid_input" else 500)
        return jsonify(code=e.code, message=str(e)), status

    @app.errorhandler(HTTPException)
    def _http_error(e: HTTPException) -> tuple[Response, int]:
        return jsonify(code=(e.name or "error").lower().replace(" ", "_"),
                       message=e.description), e.code or 500

    return app
