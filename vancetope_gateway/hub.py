"""The gateway's WebSocket transport: one selector thread per process for every socket.

flask-sock still mounts ``/ws`` and simple-websocket still answers the handshake, but
its reader thread is never started (``socket_adapter``, the one module that knows their
insides): once a socket is upgraded and its ``Connection`` greeted the client, the route
hands the socket to the ``Hub`` and (under gunicorn) returns, freeing gunicorn's thread. From then on an idle socket costs no
thread, only its memory and a ping every ``ping_interval`` seconds.

- One hub thread reads every socket (non-blocking, wsproto), answers pings, pings each
  client every ``ping_interval`` seconds (no pong by the next ping: closed 1008
  "Ping/Pong timeout", as simple-websocket did), and writes: it drains each
  connection's ``Outbound`` queue into the socket as the socket takes it, so a client
  that reads slowly fills its own queue (and is dropped, ``Connection._drop``) while
  nobody else waits.
- Frames are served by a pool of ``frame_threads`` threads, each socket's frames one at
  a time and in order (a frame's reply comes before the next frame is read by the
  protocol). A socket with ``INBOX_MAX`` frames waiting is not read until they are
  served: the client's sends back up in TCP.
- A connection's end (its close item, or the socket failing) is finished in the pool
  (``Outbound.finish`` → ``Connection._release``, then the route's ``on_done``), since
  it talks to Redis. After a close frame the hub half-closes and drains the socket
  until the client closes it (at most ``LINGER_SEC``), so the close frame is not lost
  to a reset.

The hub holds at most ``max_sockets`` sockets (``VANCETOPE_MAX_SOCKETS``); ``full()``
lets the gateway refuse the upgrade first. Under werkzeug (``vancetope serve``) the
route's thread waits until the hub is done with the socket, as werkzeug writes a
response and closes the socket once the route returns. ``close`` stops the hub's thread
and its pool (a gateway shutting down).
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from wsproto import ConnectionState, WSConnection
from wsproto.events import (
    BytesMessage,
    CloseConnection,
    Ping,
    Pong,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from vancetope_gateway.outbound import CloseItem

if TYPE_CHECKING:
    from vancetope_gateway.protocol import Connection

log = logging.getLogger(__name__)

MESSAGE_TOO_BIG = 1009
POLICY_VIOLATION = 1008
PROTOCOL_ERROR = 1002


class HubSocket:
    """One upgraded socket in the hub; the ``Socket`` of its ``Connection``.

    Only the hub thread touches ``ws``, ``out`` and the selector registration; the
    pool and the route touch ``inbox``/``serving`` under ``lock``."""

    def __init__(self, hub: Hub, sock: socket.socket, ws: WSConnection, *, owned: bool) -> None:
        self.hub = hub
        self.sock = sock
        self.ws = ws
        self.owned = owned  # the hub closes the socket (gunicorn); else its server does
        self.connection: Connection | None = None
        self.on_done: Callable[[], None] = lambda: None
        self.lock = threading.Lock()
        self.inbox: deque[str | bytes] = deque()
        self.serving = True  # until ``start`` (the greeting goes out before any reply)
        self.paused = False  # not read while its inbox is full
        self.reading = True  # False once the client closed or the connection is closing
        self.sock_closed = False
        self.ends = 2  # the socket closed, and the connection finished: then it is gone
        self.out = bytearray()
        self.mask = 0
        self.parts: list[str | bytes] = []
        self.size = 0
        self.closing: CloseItem | None = None  # the close item was taken
        self.linger_until: float | None = None  # half-closed, draining
        self.broken = False
        self.next_ping = time.monotonic() + hub.ping_interval
        self.pong_due = False
        self.done = threading.Event()  # the connection finished
        self.gone = threading.Event()  # and the hub let go of the socket

    # ``Socket`` (protocol.py)
    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.hub.wake(self)

    def pump(self) -> None:
        """Frames were queued (``Outbound``)."""
        self.hub.wake(self)


class Hub:
    INBOX_MAX = 64
    """Frames of one socket waiting to be served before the hub stops reading it."""
    BATCH = 16
    """Frames the hub takes from a connection's queue at once, once the socket took the
    last batch: what waits beyond the queue's bound (``Connection.OUTBOUND_QUEUE_MAX``)."""
    LINGER_SEC = 2.0

    def __init__(self, *, frame_threads: int, max_sockets: int, max_message_bytes: int,
                 ping_interval: float = 25.0) -> None:
        self.ping_interval = ping_interval
        self.max_sockets = max_sockets
        self._max_message = max_message_bytes
        self._pool = ThreadPoolExecutor(frame_threads, thread_name_prefix="vt-frames")
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        self._ready: dict[HubSocket, None] = {}  # woken sockets, in order
        self._woken = False
        self._sockets: dict[HubSocket, None] = {}
        self._owned: set[socket.socket] = set()
        self._empty = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vt-hub", daemon=True)
        self._thread.start()

    # ── from the route and the pool ─────────────────────────────────────
    def full(self) -> bool:
        with self._lock:
            return len(self._sockets) >= self.max_sockets

    def take(self, sock: socket.socket, ws: WSConnection, *, owned: bool) -> HubSocket:
        """A socket just upgraded; its connection's frames queue until ``start``."""
        entry = HubSocket(self, sock, ws, owned=owned)
        with self._lock:
            self._sockets[entry] = None
            if owned:
                self._owned.add(sock)
        sock.setblocking(False)
        self.wake(entry)
        return entry

    def start(self, entry: HubSocket, connection: Connection,
              on_done: Callable[[], None]) -> None:
        """The connection greeted its client: serve its frames from now on."""
        entry.on_done = on_done
        entry.connection = connection
        if entry.broken:  # the client left before
            connection.close()
        self._submit(self._serve, entry)
        self.wake(entry)

    def owns(self, sock: Any) -> bool:
        """Whether ``sock`` was handed to the hub, which closes it (gunicorn must not)."""
        with self._lock:
            return sock in self._owned

    def wait_empty(self, timeout: float) -> bool:
        """Wait until every socket is done (a stopping gateway); False on timeout."""
        with self._empty:
            return self._empty.wait_for(lambda: not self._sockets, timeout)

    def wake(self, entry: HubSocket) -> None:
        with self._lock:
            self._ready[entry] = None
            if self._woken or self._stop.is_set():
                return
            self._woken = True
        self._ring()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the hub: its thread and its frame pool end (each waited for at most
        ``timeout`` seconds: a frame being served finishes first). Meant for a gateway that
        stopped serving (``going_away``, then the server's shutdown): a socket still held
        is cut without a close frame, its connection closed and finished, its route let go.
        """
        self._stop.set()
        self._ring()
        self._thread.join(timeout)
        stopper = threading.Thread(target=self._pool.shutdown, name="vt-frames-stop",
                                   kwargs={"wait": True, "cancel_futures": True})
        stopper.start()
        stopper.join(timeout)
        if self._thread.is_alive() or stopper.is_alive():
            log.warning("hub: still busy %gs after close; leaving its threads", timeout)
            return
        with self._lock:
            entries = list(self._sockets)
        for entry in entries:
            self._cut(entry)
        self._selector.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _ring(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_w, b"x")

    def _cut(self, entry: HubSocket) -> None:
        """A socket still held when the hub stopped (its threads are gone): finish it here."""
        with contextlib.suppress(OSError):
            entry.sock.shutdown(socket.SHUT_RDWR)
        if entry.owned:
            entry.sock.close()
        try:
            if entry.connection is not None and not entry.done.is_set():
                entry.connection.close()
                entry.connection.outbound.finish()
                entry.on_done()
        except Exception:
            log.exception("hub: finishing a connection at close failed")
        finally:
            entry.done.set()
            with self._empty:
                self._sockets.pop(entry, None)
                self._owned.discard(entry.sock)
                self._empty.notify_all()
            entry.gone.set()

    # ── the pool ────────────────────────────────────────────────────────
    def _submit(self, fn: Callable[[HubSocket], None], entry: HubSocket) -> None:
        try:
            self._pool.submit(fn, entry)
        except RuntimeError:  # the interpreter is exiting: its threads are gone
            log.debug("hub: not serving %s at exit", fn.__name__)

    def _serve(self, entry: HubSocket) -> None:
        connection = entry.connection
        assert connection is not None
        while True:
            with entry.lock:
                if not entry.inbox:
                    entry.serving = False
                    resume = entry.paused
                    break
                raw = entry.inbox.popleft()
            connection.handle(raw)
        if resume:
            self.wake(entry)

    def _finish(self, entry: HubSocket) -> None:
        assert entry.connection is not None
        try:
            entry.connection.outbound.finish()
        finally:
            try:
                entry.on_done()
            finally:
                entry.done.set()
                self._end(entry)

    def _end(self, entry: HubSocket) -> None:
        with self._empty:
            entry.ends -= 1
            if entry.ends == 0:
                self._sockets.pop(entry, None)
                self._empty.notify_all()
                entry.gone.set()

    # ── the hub thread ──────────────────────────────────────────────────
    def _run(self) -> None:
        next_sweep = time.monotonic() + 1.0
        while not self._stop.is_set():
            try:
                events = self._selector.select(max(0.0, next_sweep - time.monotonic()))
            except OSError:
                log.exception("hub: select failed")
                time.sleep(0.1)
                continue
            for key, mask in events:
                entry = key.data
                if entry is None:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(self._wake_r, 4096):
                            pass
                    continue
                try:
                    if mask & selectors.EVENT_READ:
                        self._read(entry)
                    if mask & selectors.EVENT_WRITE:
                        self._write(entry)
                except Exception:
                    log.exception("hub: socket failed")
                    self._fail(entry)
            with self._lock:
                ready, self._ready, self._woken = self._ready, {}, False
            for entry in ready:
                try:
                    self._write(entry)
                except Exception:
                    log.exception("hub: socket failed")
                    self._fail(entry)
            if time.monotonic() >= next_sweep:
                next_sweep = time.monotonic() + 1.0
                self._sweep()

    def _register(self, entry: HubSocket) -> None:
        if entry.sock_closed:
            return
        lingering = entry.linger_until is not None
        mask = 0
        if lingering or (entry.reading and not entry.paused and entry.closing is None):
            mask |= selectors.EVENT_READ
        if entry.out and not lingering:
            mask |= selectors.EVENT_WRITE
        if mask == entry.mask:
            return
        if entry.mask == 0:
            self._selector.register(entry.sock, mask, entry)
        elif mask == 0:
            self._selector.unregister(entry.sock)
        else:
            self._selector.modify(entry.sock, mask, entry)
        entry.mask = mask

    def _read(self, entry: HubSocket) -> None:
        try:
            data = entry.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if entry.linger_until is not None:
            if not data:
                self._close_socket(entry)
            return
        if not data:
            self._gone(entry)
            return
        entry.ws.receive_data(data)
        self._events(entry)
        self._write(entry)

    def _events(self, entry: HubSocket) -> None:
        """Handle what wsproto parsed, until the inbox is full (the rest stays in wsproto's
        buffer until it has room)."""
        try:
            for event in entry.ws.events():
                if not self._on_event(entry, event):
                    break
        except (LocalProtocolError, RemoteProtocolError):
            self._close_connection(entry, PROTOCOL_ERROR, "protocol error")

    def _on_event(self, entry: HubSocket, event: Any) -> bool:
        """Handle one wsproto event; False: read no more of this socket."""
        if isinstance(event, TextMessage | BytesMessage):
            entry.size += len(event.data)
            if entry.size > self._max_message:
                self._close_connection(entry, MESSAGE_TOO_BIG, "Message is too big")
                return False
            entry.parts.append(event.data if isinstance(event.data, str) else bytes(event.data))
            if not event.message_finished:
                return True
            parts, entry.parts, entry.size = entry.parts, [], 0
            raw: str | bytes = parts[0] if len(parts) == 1 else \
                ("".join(parts) if isinstance(event, TextMessage) else b"".join(parts))  # type: ignore[arg-type]
            with entry.lock:
                entry.inbox.append(raw)
                start = not entry.serving
                entry.serving = True
                if len(entry.inbox) >= self.INBOX_MAX:
                    entry.paused = True
            if start:
                self._submit(self._serve, entry)
            if entry.paused:
                self._register(entry)
                return False
        elif isinstance(event, Ping):
            entry.out += entry.ws.send(event.response())
        elif isinstance(event, Pong):
            entry.pong_due = False
        elif isinstance(event, CloseConnection):
            with contextlib.suppress(LocalProtocolError):
                entry.out += entry.ws.send(event.response())
            self._gone(entry)
            return False
        return True

    def _write(self, entry: HubSocket) -> None:
        """Move queued frames into the socket buffer, and the buffer into the socket."""
        if entry.sock_closed or entry.linger_until is not None:
            return
        if entry.paused:
            with entry.lock:
                if not entry.inbox and not entry.serving:
                    entry.paused = False
            if not entry.paused and entry.reading:
                self._events(entry)
        connection = entry.connection
        while True:
            if not entry.out and connection is not None and entry.closing is None:
                self._take_batch(entry, connection)
            if not entry.out:
                break
            if entry.broken:
                entry.out.clear()
                continue
            try:
                sent = entry.sock.send(entry.out)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self._fail(entry)
                continue
            del entry.out[:sent]
            if entry.out:  # the socket is full: on, once it is writable
                break
        if entry.closing is not None and not entry.out:
            self._closed(entry)
            return
        self._register(entry)

    def _take_batch(self, entry: HubSocket, connection: Connection) -> None:
        for _ in range(self.BATCH):
            item = connection.outbound.take()
            if item is None:
                return
            if isinstance(item, CloseItem):
                entry.closing = item
                if item.code is not None and entry.ws.state is ConnectionState.OPEN \
                        and not entry.broken:
                    entry.out += entry.ws.send(CloseConnection(item.code, item.message))
                return
            if not entry.broken and entry.ws.state is ConnectionState.OPEN:
                entry.out += entry.ws.send(TextMessage(data=item))

    def _gone(self, entry: HubSocket) -> None:
        """The client closed (or its socket ended): end the connection, no close frame."""
        self._close_connection(entry, None, "")

    def _close_connection(self, entry: HubSocket, code: int | None, message: str) -> None:
        """Read no more and close the connection (with ``code``'s close frame, if any)."""
        entry.reading = False
        if entry.connection is not None:
            entry.connection.close(code, message)
        else:  # not started yet: its route finds the connection closed
            entry.broken = True

    def _fail(self, entry: HubSocket) -> None:
        """The socket failed: what is queued is dropped; the connection ends."""
        entry.broken = True
        entry.out.clear()
        if entry.connection is not None:
            entry.connection.close()
            self.wake(entry)

    def _closed(self, entry: HubSocket) -> None:
        """The close item went out: half-close, then drain until the client closes."""
        with contextlib.suppress(OSError):
            entry.sock.shutdown(socket.SHUT_WR)
        entry.linger_until = time.monotonic() + self.LINGER_SEC
        self._register(entry)
        self._submit(self._finish, entry)

    def _close_socket(self, entry: HubSocket) -> None:
        if entry.sock_closed:
            return
        entry.sock_closed = True
        if entry.mask:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(entry.sock)
            entry.mask = 0
        with contextlib.suppress(OSError):
            entry.sock.shutdown(socket.SHUT_RDWR)
        with self._lock:
            self._owned.discard(entry.sock)
        if entry.owned:
            entry.sock.close()
        self._end(entry)

    def _sweep(self) -> None:
        """Once a second: ping who is due, drop who did not answer the last ping, close
        sockets that lingered long enough."""
        now = time.monotonic()
        with self._lock:
            entries = list(self._sockets)
        for entry in entries:
            if entry.linger_until is not None:
                if now >= entry.linger_until:
                    self._close_socket(entry)
                continue
            if entry.closing is not None or entry.connection is None or now < entry.next_ping:
                continue
            entry.next_ping = now + self.ping_interval
            if entry.pong_due:
                self._close_connection(entry, POLICY_VIOLATION, "Ping/Pong timeout")
            else:
                entry.pong_due = True
                if entry.ws.state is ConnectionState.OPEN:
                    entry.out += entry.ws.send(Ping())
            self._write(entry)
