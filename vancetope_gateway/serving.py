"""The two HTTP servers a gateway runs under, each with a bound on reading a request's line
and headers (``VANCETOPE_HEADER_TIMEOUT``), so half-sent requests (slowloris) cannot hold
the threads that serve everybody.

- ``vancetope serve``: werkzeug's threaded server, whose sockets otherwise have no timeout.
  Here a request's line and headers together must arrive within the timeout of its start
  (a deadline that every read of the head counts against: a client trickling a header
  line at a time is closed like one that sends nothing), which also bounds an idle
  keep-alive connection; each read of a body gets the timeout anew. The gateway lifts it
  once a ``/ws`` upgrade is authenticated (``app._authenticate_websocket``), so an idle
  WebSocket is never cut (its liveness is the 25 s ping).
- gunicorn (the Procfile's ``web``): the ``gthread`` worker waits a bounded time for a
  connection's first byte (then parks it, closing it after ``--keep-alive`` seconds) and
  closes idle keep-alive connections after ``--keep-alive``; but once a byte arrived it
  reads the line and headers with no bound, in one of its ``--threads``. ``GatewayWorker``
  adds that bound. (``--timeout 0`` only disables the arbiter's kill of a worker whose
  main loop stops beating, which gthread's loop never does while threads serve
  WebSockets; it bounds no socket.) On SIGTERM it closes every WebSocket with 1001
  "going away" (``app.going_away``) so that its clients resume on another gateway.
"""

from __future__ import annotations

import contextlib
import io
import socket
import threading
import time
from typing import Any

from flask import Flask
from gunicorn.workers.gthread import ThreadWorker
from werkzeug.serving import (
    LISTEN_QUEUE,
    BaseWSGIServer,
    WSGIRequestHandler,
    get_sockaddr,
    make_server,
    select_address_family,
)

from vancetope_brain.config import Config
from vancetope_brain.errors import ConfigError
from vancetope_gateway.app import close_app
from vancetope_gateway.sockets import SocketParts, going_away


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (0: any free port) and listening, as werkzeug's own
    would be; ``ConfigError`` saying why when it cannot be (a busy port, an address this
    machine does not have). ``vancetope serve`` binds first, before it makes anything."""
    family = select_address_family(host, port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(get_sockaddr(host, port, family))
        sock.listen(LISTEN_QUEUE)
    except OSError as e:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}; stop what uses "
                          f"it, or choose another port (--port or VANCETOPE_PORT; 0 picks a "
                          f"free one)") from e
    return sock


def make_embedded_server(app: Flask, listener: socket.socket,
                         header_timeout: float) -> BaseWSGIServer:
    """werkzeug's threaded server on ``listener`` (``listen``; the server takes it over) that
    closes a connection whose request head is not in within ``header_timeout`` of the
    request's start (and whose body reads stall as long)."""
    handler = type("TimedRequestHandler", (_HeadDeadlineHandler,), {"timeout": header_timeout})
    host, port = listener.getsockname()[:2]
    with listener:  # werkzeug serves a duplicate of its descriptor
        return make_server(host, port, app, threaded=True, request_handler=handler,
                           fd=listener.fileno())


class _HeadDeadlineHandler(WSGIRequestHandler):
    """werkzeug's handler, reading through ``_DeadlineReader``: from the start of each
    request until its headers are parsed, every read waits only for what is left of
    ``timeout``; after that (a body), each read waits ``timeout``."""

    head_deadline: float | None = None

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the socket's own reader; the socket stays open
        self.rfile = io.BufferedReader(_DeadlineReader(self))

    def handle_one_request(self) -> None:
        assert self.timeout is not None  # set by make_embedded_server
        self.head_deadline = time.monotonic() + self.timeout
        super().handle_one_request()

    def parse_request(self) -> bool:
        try:
            return super().parse_request()
        finally:
            self.head_deadline = None
            self.connection.settimeout(self.timeout)


class _DeadlineReader(io.RawIOBase):
    """A socket's reads, each bounded by what is left of its handler's ``head_deadline``."""

    def __init__(self, handler: _HeadDeadlineHandler) -> None:
        super().__init__()
        self._handler = handler

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        sock = self._handler.connection
        if (deadline := self._handler.head_deadline) is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request's line and headers took too long")
            sock.settimeout(left)
        return sock.recv_into(buffer)


class GatewayWorker(ThreadWorker):
    """gunicorn's gthread worker, closing a connection whose request line and headers are
    not in ``VANCETOPE_HEADER_TIMEOUT`` seconds after a thread took it.

    The worker's main loop (once a second) shuts such a socket down; the thread's blocked
    read then ends as an ordinary client disconnect and the thread is free.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timeout = Config.from_env().header_timeout
        self._reading: dict[Any, float] = {}  # connection → deadline of its headers
        self._reading_lock = threading.Lock()

    def handle_exit(self, sig: int, frame: Any) -> None:
        """SIGTERM: stop accepting (gunicorn), and close every WebSocket with 1001 "going
        away", so that gunicorn's graceful wait ends once they are closed and their clients
        resume on another gateway instead of being cut at ``--graceful-timeout``."""
        if self.alive:
            # Not in the signal handler: closing takes the connections' locks.
            threading.Thread(target=going_away, args=(self.wsgi,), daemon=True).start()
        super().handle_exit(sig, frame)

    def handle_quit(self, sig: int, frame: Any) -> None:
        """SIGINT/SIGQUIT (Ctrl-C in a terminal): gunicorn exits at once, but its threads
        serving WebSockets would hold the process until the arbiter SIGKILLs it; closing
        the sockets first ends them."""
        going_away(self.wsgi)
        time.sleep(0.5)  # the hub sends the close frames
        super().handle_quit(sig, frame)

    def load_wsgi(self) -> None:
        """The app's WebSocket route may hand its socket to the hub and return: this
        worker does not close it then (``finish_request``); gunicorn's own would."""
        super().load_wsgi()
        if (extensions := getattr(self.wsgi, "extensions", None)) is not None:
            extensions["vancetope.detach"] = True

    def run(self) -> None:
        """gunicorn's loop, then (stopping) the wait for the hub's sockets to close: they
        are not gunicorn's connections any more, so its graceful wait does not count them;
        then the app's threads are stopped (``app.close_app``)."""
        super().run()
        if (parts := self._sockets()) is not None:
            parts.hub.wait_empty(self.cfg.graceful_timeout)
            close_app(self.wsgi)

    def finish_request(self, conn: Any, fs: Any) -> None:
        """A WebSocket's request ended with its socket handed to the hub: the connection is
        no longer gunicorn's to close (or to count against ``--worker-connections``)."""
        if (parts := self._sockets()) is not None and parts.hub.owns(conn.sock):
            self.nr_conns -= 1
            return
        super().finish_request(conn, fs)

    def _sockets(self) -> SocketParts | None:
        """The gateway app's socket parts (None: another WSGI app, e.g. in a test)."""
        return getattr(self.wsgi, "extensions", {}).get("vancetope.sockets")

    def handle(self, conn: Any) -> Any:
        with self._reading_lock:
            self._reading[conn] = time.monotonic() + self._header_timeout
        try:
            return super().handle(conn)
        finally:
            self._done_reading(conn)

    def handle_request(self, req: Any, conn: Any) -> Any:
        self._done_reading(conn)  # the headers are parsed; the app runs unbounded
        return super().handle_request(req, conn)

    def murder_keepalived(self, force: bool = False) -> None:
        super().murder_keepalived(force)
        now = time.monotonic()
        with self._reading_lock:
            late = [conn for conn, deadline in self._reading.items() if deadline <= now]
            for conn in late:
                del self._reading[conn]
        for conn in late:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)

    def _done_reading(self, conn: Any) -> None:
        with self._reading_lock:
            self._reading.pop(conn, None)
