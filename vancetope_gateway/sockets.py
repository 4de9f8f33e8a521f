"""The gateway's ``/ws`` endpoint and the parts of one process that serve its sockets.

``SocketParts`` holds them — the socket hub (``hub.py``), the event listener, the presence
renewer, the token watch and the connection slots — each running its own thread(s) but
the slots; ``SocketParts.close`` stops every one of them (a gateway shutting down:
``app.close_app``). ``add_websocket_route`` mounts ``/ws``: authenticate and take a slot
before the upgrade, then hand the upgraded socket to the hub (``socket_adapter``).
"""

from __future__ import annotations

import functools
import logging
import threading
import uuid
import weakref
from dataclasses import dataclass
from typing import get_args

from flask import Flask, Response, g, jsonify, request
from flask_sock import Sock
from simple_websocket import Server

from vancetope_brain.errors import Unauthorized
from vancetope_brain.events import EventListener
from vancetope_brain.events.presence import Presence
from vancetope_brain.identity.service import hash_token
from vancetope_brain.observability import metrics
from vancetope_gateway.auth import SUBPROTOCOL, authenticate, bearer_token, offered_subprotocols
from vancetope_gateway.frames import NotifyMode
from vancetope_gateway.hub import Hub
from vancetope_gateway.limits import ConnectionSlots, Slot
from vancetope_gateway.parts import Gateway
from vancetope_gateway.protocol import Connection
from vancetope_gateway.socket_adapter import hand_off, server_options
from vancetope_gateway.tokens import TokenWatch

log = logging.getLogger(__name__)

NOTIFY_MODES = get_args(NotifyMode)

PING_INTERVAL = 25.0
"""Seconds between the gateway's pings of a client; one unanswered by the next is closed
with 1008."""

GOING_AWAY = 1001
"""The close code of every socket of a gateway process that is stopping (SIGTERM): 1001
"going away" (RFC 6455); the client resumes on another gateway."""

CLOSE_TIMEOUT = 5.0
"""Seconds ``SocketParts.close`` waits for each thread to end."""


class PresenceRenewer:
    """The open connections of one gateway process, and one thread keeping them counted as
    present: every ``interval`` seconds, all of them in pipelines of ``BATCH``."""

    BATCH = 500

    def __init__(self, presence: Presence, interval: float) -> None:
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._presence = presence
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vt-presence", daemon=True)
        self._thread.start()

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

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Stop renewing (a round under way finishes first, within ``timeout``)."""
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
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


@dataclass(frozen=True)
class SocketParts:
    """What one gateway process needs for its WebSockets."""

    hub: Hub
    listener: EventListener
    renewer: PresenceRenewer
    tokens: TokenWatch
    slots: ConnectionSlots

    @classmethod
    def build(cls, gateway: Gateway) -> SocketParts:
        config = gateway.config
        return cls(hub=Hub(frame_threads=config.frame_threads, max_sockets=config.max_sockets,
                           max_message_bytes=config.max_frame_bytes,
                           ping_interval=PING_INTERVAL),
                   listener=EventListener(gateway.redis),
                   renewer=PresenceRenewer(gateway.presence, config.presence_ttl / 3),
                   tokens=TokenWatch(gateway.identity, config.token_recheck),
                   slots=ConnectionSlots(gateway.presence,
                                         per_user=config.max_connections_per_user,
                                         per_address=config.max_connections_per_ip))

    def close(self) -> None:
        """Stop every thread of these parts (each waited for at most ``CLOSE_TIMEOUT``):
        first those that close connections, then the hub (which cuts the sockets still
        open), then the listener, which feeds the connections."""
        self.renewer.close()
        self.tokens.close(CLOSE_TIMEOUT)
        self.hub.close(CLOSE_TIMEOUT)
        self.listener.close()


def going_away(app: Flask) -> int:
    """The gateway process is stopping: close its WebSockets with 1001 "going away" so that
    their clients resume on another gateway; returns how many."""
    parts: SocketParts = app.extensions["vancetope.sockets"]
    closed = parts.renewer.close_all(GOING_AWAY, "going away")
    if closed:
        log.info("stopping: closed %d WebSocket(s) with %d going away", closed, GOING_AWAY)
    return closed


def add_websocket_route(app: Flask, gateway: Gateway, parts: SocketParts, *,
                        llm_description: str) -> None:
    """``/ws``: authenticated and given a connection slot before the upgrade (a refused
    client never gets a socket), then served by the hub until it ends."""
    hub, slots, tokens, renewer = parts.hub, parts.slots, parts.tokens, parts.renewer
    app.config["SOCK_SERVER_OPTIONS"] = server_options([SUBPROTOCOL])
    sock = Sock(app)

    @app.before_request
    def _authenticate_websocket() -> tuple[Response, int] | None:
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
        upgraded = hand_off(ws)
        entry = hub.take(upgraded.sock, upgraded.ws, owned=upgraded.owned)
        slot = g.pop("connection_slot")
        connection = Connection(entry, g.principal, gateway, parts.listener,
                                llm=llm_description,
                                max_frame_bytes=gateway.config.max_frame_bytes,
                                notify_mode=g.notify_mode,
                                frame_rate=gateway.config.frame_rate,
                                frame_burst=gateway.config.frame_burst,
                                connection_id=slot.connection_id,
                                authorized=functools.partial(tokens.valid, g.token_hash))
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
        if not upgraded.owned or not app.extensions.get("vancetope.detach"):
            # werkzeug (and gunicorn's own workers) write a response and close the socket
            # once this returns; ``GatewayWorker`` leaves it to the hub.
            entry.gone.wait()
