"""The Flask app factory: REST blueprint and the WebSocket endpoint."""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from typing import get_args

import redis
from flask import Blueprint, Flask, Response, current_app, g, jsonify, request, send_file
from flask_sock import Sock
from simple_websocket import Server
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from vancetope_brain.engines import ENGINES, shown_process
from vancetope_brain.errors import (
    REDIS_DOWN,
    InvalidInput,
    RuntimeFailure,
    StoreError,
    Unauthorized,
    VancetopeError,
)
from vancetope_brain.events import EventListener
from vancetope_brain.events.presence import Presence
from vancetope_brain.identity import Principal
from vancetope_brain.identity.service import hash_token
from vancetope_brain.inbox.attachments import AttachmentStore
from vancetope_brain.lanes import consumers
from vancetope_brain.models import ProcessStatus
from vancetope_brain.observability import metrics, tracing
from vancetope_gateway.frames import NotifyMode
from vancetope_gateway.hub import Hub, NoThread
from vancetope_gateway.limits import ConnectionSlots, Slot
from vancetope_gateway.logs import redact_access_logs
from vancetope_gateway.observe import add_metrics_route
from vancetope_gateway.parts import Gateway
from vancetope_gateway.protocol import Connection
from vancetope_gateway.tokens import TokenWatch
from vancetope_gateway.webapp import add_web_client
from workers.celery_app import lane_queue

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 256 * 1024
"""The largest request body any route may read (``MAX_CONTENT_LENGTH``); today no route
reads one, so ``_refuse_bodies`` also refuses any body on a GET."""

rest = Blueprint("rest", __name__)


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


@rest.get("/healthz")
def healthz() -> Response:
    """Liveness: answers without touching any dependency."""
    return jsonify(status="ok")


@rest.get("/readyz")
def readyz() -> tuple[Response, int]:
    """Readiness: can this gateway enqueue a lane turn, and does a worker take it? The
    store, Redis and the broker answer, and a live worker consumes every lane queue
    (``vancetope_brain.lanes.consumers``); else 503 naming each failure and what to do."""
    gateway: Gateway = current_app.extensions["vancetope"]
    failures: dict[str, str] = {}
    try:
        gateway.store.ping()
    except StoreError as e:
        failures["store"] = str(e)
    try:
        gateway.redis.ping()
        workers = consumers.live(gateway.redis)
    except Exception as e:
        failures["redis"] = type(e).__name__
        workers = {}
    ping_broker = current_app.extensions["vancetope.ping_broker"]
    if ping_broker is not None:
        try:
            ping_broker()
        except Exception as e:
            failures["broker"] = f"the Celery broker does not answer ({type(e).__name__}); " \
                "check VANCETOPE_BROKER_URL (default: VANCETOPE_REDIS_URL)"
    if "redis" not in failures:
        lanes = [lane_queue(shard) for shard in range(gateway.config.lane_shards)]
        if missing := consumers.uncovered(workers, lanes):
            which = "any lane queue" if len(missing) == len(lanes) else ", ".join(missing)
            failures["workers"] = (
                f"no worker consumes {which} (no worker heartbeat in the last "
                f"{consumers.HEARTBEAT_TTL:g} s): start a worker (the Procfile's `worker`) "
                f"with the same VANCETOPE_REDIS_URL and VANCETOPE_LANE_SHARDS")
    if failures:
        return jsonify(status="unavailable", failures=failures, workers=sorted(workers)), 503
    return jsonify(status="ready", workers=sorted(workers)), 200


@rest.get("/think-engines")
def think_engines() -> Response:
    authenticate()
    return jsonify(engines=[e.describe() for e in ENGINES])


NOTIFY_MODES = get_args(NotifyMode)


PING_INTERVAL = 25.0
"""Seconds between the gateway's pings of a client; one unanswered by the next is closed
with 1008."""

GOING_AWAY = 1001
"""The close code of every socket of a gateway process that is stopping (SIGTERM): 1001
"going away" (RFC 6455); the client resumes on another gateway."""


class PresenceRenewer:
    """The open connections of one gateway process, and one thread keeping them counted as
    present: every ``interval`` seconds, all of them in pipelines of ``BATCH``."""

    BATCH = 500

    def __init__(self, presence: Presence, interval: float) -> None:
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._presence = presence
        self._interval = interval
        threading.Thread(target=self._run, name="vt-presence", daemon=True).start()

    def add(self, connection: Connection) -> None:
        with self._lock:
            self._connections.add(connection)

    def discard(self, connection: Connection) -> None:
        with self._lock:
            self._connections.discard(connection)

    def close_all(self, code: int, message: str) -> int:
        """Close every open connection (without blocking); returns how many."""
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            connection.close(code, message)
        return len(connections)

    def _run(self) -> None:
        while True:
            time.sleep(self._interval)
            with self._lock:
                connections = list(self._connections)
            for at in range(0, len(connections), self.BATCH):
                entries = [e for c in connections[at:at + self.BATCH]
                           if (e := c.presence()) is not None]
                try:
                    self._presence.renew_all([user for user, _ in entries],
                                             [bound for _, bound in entries if bound])
                except Exception:
                    log.exception("presence renewal failed; retrying next round")


def going_away(app: Flask) -> int:
    """The gateway process is stopping: close its WebSockets with 1001 "going away" so that
    their clients resume on another gateway; returns how many."""
    closed: int = app.extensions["vancetope.renewer"].close_all(GOING_AWAY, "going away")
    if closed:
        log.info("stopping: closed %d WebSocket(s) with %d going away", closed, GOING_AWAY)
    return closed


def _gateway() -> Gateway:
    return current_app.extensions["vancetope"]


def _int_arg(name: str, default: int | None, low: int, high: int) -> int | None:
    raw = request.args.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(f"query parameter {name} must be an integer") from None
    if not low <= value <= high:
        raise InvalidInput(f"query parameter {name} must be between {low} and {high}")
    return value


@rest.get("/sessions")
def sessions() -> Response:
    who = authenticate()
    return jsonify(sessions=[s.dump() for s in _gateway().sessions.list_sessions(who)])


@rest.get("/sessions/<session_id>")
def session(session_id: str) -> Response:
    who = authenticate()
    gateway = _gateway()
    found = gateway.sessions.get(who, session_id)
    return jsonify(session=found.dump(),
                   processes=[shown_process(p) for p in gateway.sessions.processes(who, session_id)])


@rest.get("/sessions/<session_id>/processes")
def session_processes(session_id: str) -> Response:
    who = authenticate()
    everything = request.args.get("all", "false").lower() in ("1", "true", "yes")
    processes = _gateway().sessions.processes(who, session_id)
    return jsonify(processes=[shown_process(p) for p in processes
                              if everything or p.status is not ProcessStatus.CLOSED])


@rest.get("/processes/<process_id>")
def process(process_id: str) -> Response:
    who = authenticate()
    return jsonify(process=shown_process(_gateway().sessions.process(who, process_id)))


@rest.get("/processes/<process_id>/chat")
def process_chat(process_id: str) -> Response:
    who = authenticate()
    lines = _gateway().sessions.chat_history(
        who, process_id, before_seq=_int_arg("beforeSeq", None, 1, 2**62),
        limit=_int_arg("limit", 100, 1, 500) or 100)
    return jsonify(messages=[line.dump() for line in lines])


@rest.get("/inbox")
def inbox() -> Response:
    """The caller's open Inbox (everything but ARCHIVED), newest first."""
    who = authenticate()
    gateway = _gateway()
    items = gateway.inbox.list(who, limit=_int_arg("limit", 50, 1, 200) or 50)
    return jsonify(items=[gateway.inbox.view(i) for i in items],
                   pending=gateway.inbox.pending_summary(who))


@rest.get("/inbox/<item_id>")
def inbox_item(item_id: str) -> Response:
    """One item: the target of notification deep links."""
    who = authenticate()
    gateway = _gateway()
    return jsonify(item=gateway.inbox.view(gateway.inbox.get(who, item_id)))


def add_attachment_route(app: Flask, attachments: AttachmentStore) -> None:
    """GET /attachments/<tenant>/<id>?exp=&sig=: inbox attachments behind signed URLs.

    The signature is the authorization (no bearer token), so links work in
    ``<img src>`` and e-mails; a forged or expired one is 403 ``forbidden``. Images
    are served inline, everything else as a download; the sandbox CSP keeps an
    inline SVG or HTML from running script.
    """
    @app.get("/attachments/<tenant_id>/<attachment_id>")
    def attachment(tenant_id: str, attachment_id: str) -> Response:
        path, meta = attachments.open(tenant_id, attachment_id, request.args.get("exp", ""),
                                      request.args.get("sig", ""))
        response = send_file(path, mimetype=meta["mimeType"], download_name=meta["filename"],
                             as_attachment=not meta["mimeType"].startswith("image/"))
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Content-Security-Policy"] = "default-src 'none'; sandbox"
        return response


def create_app(gateway: Gateway, *, llm_description: str,
               ping_broker: Callable[[], None] | None = None) -> Flask:
    """The gateway for one OS process. Starts the process's event listener thread.
    ``ping_broker`` (raises when the Celery broker cannot be reached) is for ``/readyz``."""
    redact_access_logs()
    app = Flask(__name__, static_folder=None)
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    # simple_websocket selects the first subprotocol offered that is listed here, so a
    # ``bearer.<token>`` offered beside ``vancetope`` is never echoed in the reply. It only
    # answers the handshake: the hub reads, writes and pings the socket (``hub.py``).
    app.config["SOCK_SERVER_OPTIONS"] = {"subprotocols": [SUBPROTOCOL],
                                         "thread_class": NoThread}
    hub = Hub(frame_threads=gateway.config.frame_threads,
              max_sockets=gateway.config.max_sockets,
              max_message_bytes=gateway.config.max_frame_bytes, ping_interval=PING_INTERVAL)
    app.extensions["vancetope.hub"] = hub
    app.extensions["vancetope"] = gateway
    app.extensions["vancetope.ping_broker"] = ping_broker
    listener = EventListener(gateway.redis)
    app.extensions["vancetope.listener"] = listener
    app.register_blueprint(rest)
    add_attachment_route(app, gateway.attachments)
    add_metrics_route(app, gateway)
    tracing.instrument_flask(app)
    add_web_client(app)
    sock = Sock(app)

    renewer = PresenceRenewer(gateway.presence, gateway.config.presence_ttl / 3)
    app.extensions["vancetope.renewer"] = renewer
    tokens = TokenWatch(gateway.identity, gateway.config.token_recheck)
    app.extensions["vancetope.tokens"] = tokens

    slots = ConnectionSlots(gateway.presence,
                            per_user=gateway.config.max_connections_per_user,
                            per_address=gateway.config.max_connections_per_ip)
    app.extensions["vancetope.slots"] = slots

    @app.before_request
    def _refuse_bodies() -> None:
        # MAX_CONTENT_LENGTH applies only where a route reads the body, and none does: refuse
        # here, before authentication, what no route would read (the upgrade request too).
        length = request.content_length or 0
        chunked = "chunked" in request.headers.get("Transfer-Encoding", "").lower()
        if length > MAX_BODY_BYTES:
            raise RequestEntityTooLarge(f"request bodies are limited to {MAX_BODY_BYTES} bytes")
        if (length or chunked) and request.method in ("GET", "HEAD"):
            raise RequestEntityTooLarge(f"{request.method} {request.path} takes no body")

    @app.before_request
    def _authenticate_websocket() -> tuple[Response, int] | None:
        # Refuse before the upgrade so an unauthenticated client never gets a socket.
        if request.path == "/ws":
            try:
                g.principal = authenticate()
            except Unauthorized as e:
                return jsonify(code=e.code, message=str(e)), 401
            g.token_hash = hash_token(bearer_token() or "")
            g.notify_mode = request.args.get("notifyMode", "all")
            if g.notify_mode not in NOTIFY_MODES:
                return jsonify(code="invalid_input", message="notifyMode must be one of "
                               + ", ".join(NOTIFY_MODES)), 400
            offered = offered_subprotocols()
            if offered and SUBPROTOCOL not in offered:
                # A browser fails a handshake whose reply selects none of its offers.
                return jsonify(code="invalid_input", message=f"offer the subprotocol "
                               f"{SUBPROTOCOL!r} (beside bearer.<token>)"), 400
        return None

    @app.before_request
    def _take_connection_slot() -> tuple[Response, int] | None:
        # After authentication, before the upgrade: a refused client never gets a socket.
        if request.path == "/ws":
            if hub.full():
                return jsonify(code="unavailable", message=f"this gateway process holds "
                               f"{hub.max_sockets} WebSockets, its most "
                               f"(VANCETOPE_MAX_SOCKETS); try another"), 503
            g.connection_slot = slots.take(g.principal, request.remote_addr or "",
                                           uuid.uuid4().hex, g.notify_mode)
            # Admitted: the header timeout of ``vancetope serve`` must
            # not cut the socket that is about to become a WebSocket.
            upgraded = request.environ.get("werkzeug.socket")
            if upgraded is not None:
                upgraded.settimeout(None)
        return None

    def give_back(slot: Slot) -> None:
        try:
            slots.give_back(slot)
        except Exception:  # its presence entry expires on its own
            log.exception("freeing the connection slot of user %s failed", slot.who.user_id)

    @app.teardown_request
    def _give_back_connection_slot(_: BaseException | None) -> None:
        # After a handshake that failed; an upgraded socket's slot goes back when it ends.
        slot = g.pop("connection_slot", None)
        if slot is not None:
            give_back(slot)

    @sock.route("/ws")
    def ws(ws: Server) -> None:
        # The hub owns the socket from here: flask-sock's close after this route must not
        # send a close frame of its own.
        ws.connected = False
        entry = hub.take(ws.sock, ws.ws, owned=ws.mode == "gunicorn")
        slot = g.pop("connection_slot")
        connection = Connection(entry, g.principal, gateway, listener,
                                llm=llm_description,
                                max_frame_bytes=gateway.config.max_frame_bytes,
                                notify_mode=g.notify_mode,
                                frame_rate=gateway.config.frame_rate,
                                frame_burst=gateway.config.frame_burst,
                                connection_id=slot.connection_id,
                                authorized=functools.partial(tokens.valid, g.token_hash),
                                pump=entry.pump)
        renewer.add(connection)
        tokens.watch(connection, g.token_hash)
        metrics.OPEN_SOCKETS.inc()

        def done() -> None:
            metrics.OPEN_SOCKETS.dec()
            tokens.forget(connection)
            renewer.discard(connection)
            give_back(slot)

        try:
            connection.open()
        except Exception:
            log.exception("greeting a new connection failed; closing it")
            connection.close(1011, "internal error")
        hub.start(entry, connection, done)
        if ws.mode != "gunicorn" or not app.extensions.get("vancetope.detach"):
            # werkzeug (and gunicorn's own workers) write a response and close the socket
            # once this returns; ``GatewayWorker`` leaves it to the hub.
            entry.gone.wait()

    @app.errorhandler(VancetopeError)
    def _domain_error(e: VancetopeError) -> tuple[Response, int]:
        status = {"unauthorized": 401, "forbidden": 403, "not_found": 404, "conflict": 409,
                  "rate_limited": 429, "limit_exceeded": 429}.get(
            e.code, 400 if e.code == "invalid_input" else 500)
        return jsonify(code=e.code, message=str(e)), status

    @app.errorhandler(redis.RedisError)
    def _redis_down(e: redis.RedisError) -> tuple[Response, int]:
        log.warning("Redis failed handling %s: %s", request.path, e)
        return jsonify(code=RuntimeFailure.code, message=REDIS_DOWN), 503

    @app.errorhandler(HTTPException)
    def _http_error(e: HTTPException) -> tuple[Response, int]:
        code = "payload_too_large" if e.code == 413 else \
            (e.name or "error").lower().replace(" ", "_")
        return jsonify(code=code, message=e.description), e.code or 500

    return app
