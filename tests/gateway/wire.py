"""Driving a real ``Connection`` through the real socket hub without HTTP: a socket pair
whose server end the hub serves (and ``serve_in_thread`` for tests that want the real
server).

Shared by the protocol, frame and isolation tests. ``Client.ok`` checks that a
request got its reply (same type, data valid against ``frames.REPLIES``) and
``Client.refused`` that it got an ``error`` frame with the expected stable code.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError

from tests.helpers import wait_for
from vancetope_brain.events import EventListener
from vancetope_brain.identity import Principal
from vancetope_brain.models import ProcessStatus, SessionStatus
from vancetope_brain.store import SessionStore
from vancetope_gateway import frames
from vancetope_gateway.app import close_app, create_app
from vancetope_gateway.hub import Hub
from vancetope_gateway.protocol import Connection
from vancetope_gateway.serving import listen, make_embedded_server

SUCCESS, REFUSAL = "success", "refusal"
COVERED: dict[str, set[str]] = {}


def covers(frame_type: str, *kinds: str):
    """Declare that the decorated test exercises ``frame_type`` (success and/or refusal);
    ``test_frames.test_every_request_type_is_covered`` checks every request type has both."""
    assert frame_type in frames.REQUESTS, f"no request type {frame_type!r}"

    def mark(fn):
        COVERED.setdefault(frame_type, set()).update(kinds)
        return fn
    return mark


class ClientEnd:
    """The client's end of a socket pair whose other end a real ``Hub`` serves: a wsproto
    client reading on a thread of its own. ``sent`` holds the frames the gateway sent (in
    order), ``closed_with`` its close frame's (code, reason) — (1006, "") if the socket
    ended without one."""

    def __init__(self, sock: socket.socket, ws: WSConnection) -> None:
        self._sock = sock
        self._ws = ws
        self._lock = threading.Lock()  # guards ``sent`` and writes to the socket
        self.sent: list[dict] = []
        self.closed_with: tuple[int, str] | None = None
        self.ended = threading.Event()  # the gateway let go of the socket
        self._reader = threading.Thread(target=self._read, name="test-client-end", daemon=True)
        self._reader.start()

    def send(self, raw: str | bytes) -> None:
        self._put(TextMessage(data=raw) if isinstance(raw, str) else BytesMessage(data=raw))

    def leave(self, timeout: float = 5.0) -> None:
        """Close as a client does (1000); wait until the gateway let go of the socket."""
        with contextlib.suppress(LocalProtocolError, OSError):
            self._put(CloseConnection(1000, "bye"))
        self._reader.join(timeout)
        self._sock.close()

    def frames(self, type: str | None = None, reply_to: str | None = None) -> list[dict]:
        with self._lock:
            return [f for f in self.sent if (type is None or f["type"] == type)
                    and (reply_to is None or f.get("replyTo") == reply_to)]

    def _put(self, event) -> None:
        with self._lock:
            if self._ws.state is ConnectionState.OPEN or isinstance(event, CloseConnection):
                self._sock.sendall(self._ws.send(event))

    def _read(self) -> None:
        parts: list[str] = []
        while True:
            try:
                data = self._sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            self._ws.receive_data(data)
            for event in self._ws.events():
                if isinstance(event, TextMessage):
                    parts.append(event.data)
                    if event.message_finished:
                        frame = json.loads("".join(parts))
                        parts = []
                        with self._lock:
                            self.sent.append(frame)
                elif isinstance(event, Ping):
                    with contextlib.suppress(LocalProtocolError, OSError):
                        self._put(event.response())
                elif isinstance(event, CloseConnection):
                    self.closed_with = (event.code, event.reason)
                    with contextlib.suppress(LocalProtocolError, OSError), self._lock:
                        if self._ws.state is ConnectionState.REMOTE_CLOSING:
                            self._sock.sendall(self._ws.send(event.response()))
        if self.closed_with is None:
            self.closed_with = (1006, "")
        self.ended.set()


def _upgraded_pair() -> tuple[socket.socket, WSConnection, socket.socket, WSConnection]:
    """A connected socket pair with its WebSocket handshake done (in memory, by wsproto):
    the server's end and its wsproto connection, as ``socket_adapter.hand_off`` gives
    them to the hub, and the client's."""
    server_sock, client_sock = socket.socketpair()
    server, client = WSConnection(ConnectionType.SERVER), WSConnection(ConnectionType.CLIENT)
    server.receive_data(client.send(Request(host="gateway.test", target="/ws")))
    assert isinstance(next(server.events()), Request)
    client.receive_data(server.send(AcceptConnection()))
    assert isinstance(next(client.events()), AcceptConnection)
    return server_sock, server, client_sock, client


class _Connection(Connection):
    """A ``Connection`` that remembers the thread serving its frames."""

    serving_thread: threading.Thread | None = None

    def handle(self, raw: str | bytes) -> None:
        self.serving_thread = threading.current_thread()
        super().handle(raw)


class Client:
    """A real ``Connection`` served by a real socket hub (``Hub``: its pump, pool and
    socket handling, one frame thread) over a socket pair, without HTTP: a client end
    that sends raw frames and records what the gateway sent."""

    def __init__(self, emb, who: Principal, max_frame_bytes: int = 65536,
                 notify_mode: str = "all", authorized=lambda: True) -> None:
        self.who = who
        self.hub = Hub(frame_threads=1, max_sockets=10, max_message_bytes=max_frame_bytes)
        server_sock, server_ws, client_sock, client_ws = _upgraded_pair()
        self.entry = self.hub.take(server_sock, server_ws, owned=True)
        self.sock = ClientEnd(client_sock, client_ws)
        self.listener = EventListener(emb.brain.redis, block_ms=20)
        self.conn = _Connection(self.entry, who, emb.brain, self.listener, llm="test model",
                                max_frame_bytes=max_frame_bytes, notify_mode=notify_mode,
                                authorized=authorized)
        self.conn.open()
        self.hub.start(self.entry, self.conn, lambda: None)
        self._n = 0
        self.closed = False

    @property
    def thread(self) -> threading.Thread:
        """The thread that served the last frame (the hub's one frame thread)."""
        assert self.conn.serving_thread is not None, "no frame served yet"
        return self.conn.serving_thread

    def ended(self, timeout: float = 5.0) -> bool:
        """Wait until the connection finished (its close went out, ``_release`` ran)."""
        return self.entry.done.wait(timeout)

    def send_raw(self, raw: str | bytes) -> None:
        self.sock.send(raw)

    def request(self, frame_type: str, /, **data) -> dict:
        self._n += 1
        rid = f"r{self._n}"
        self.send_raw(json.dumps({"type": frame_type, "id": rid, "data": data}))
        return wait_for(lambda: (f := self.sock.frames(reply_to=rid)) and f[0],
                        what=f"reply to {frame_type}")

    def ok(self, frame_type: str, /, **data) -> dict[str, Any]:
        """Send a request that must succeed; returns the reply's data (validated)."""
        reply = self.request(frame_type, **data)
        assert reply["type"] == frame_type, f"{frame_type} {data} was refused: {reply}"
        frames.REPLIES[frame_type].model_validate(reply["data"])
        return reply["data"]

    def refused(self, frame_type: str, code: str, /, **data) -> str:
        """Send a request that must be refused with ``code``; returns the error message."""
        reply = self.request(frame_type, **data)
        assert reply["type"] == "error", f"{frame_type} {data} was not refused: {reply}"
        assert reply["data"]["code"] == code, reply
        return reply["data"]["message"]

    def events(self) -> list[dict]:
        return [f["data"] for f in self.sock.frames("event")]

    def turn_ended(self, after_seq: int = 0) -> list[dict]:
        """The events so far, once the last one is a turn ending (a change to IDLE) that
        came after ``after_seq``."""
        return wait_for(lambda: (ev := self.events()) and ev[-1]["data"].get("to") == "IDLE"
                        and ev[-1]["seq"] > after_seq and ev, what="the turn to end")

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.sock.leave()
        self.entry.gone.wait(5)
        self.hub.close()
        self.listener.close()


def process_status(emb, who: Principal, process_id: str) -> ProcessStatus:
    return emb.brain.store.port(SessionStore).get_process(who.tenant_id, process_id).status


def wait_process(emb, who: Principal, process_id: str, status: ProcessStatus,
                 timeout: float = 10.0):
    """Wait until the process is in ``status`` with no lifecycle call pending; return it."""
    def settled():
        process = emb.brain.store.port(SessionStore).get_process(who.tenant_id, process_id)
        return process.status is status and process.pending_control is None and process
    return wait_for(settled, timeout=timeout, what=f"{process_id} {status.value}")


def wait_session(emb, who: Principal, session_id: str, status: SessionStatus):
    return wait_for(lambda: (s := emb.brain.store.port(SessionStore).get_session(who.tenant_id, session_id))
                    .status is status and s, what=f"session {session_id} {status.value}")


def stays(condition, seconds: float = 0.6, interval: float = 0.02, *, state=None) -> None:
    """Assert ``condition()`` holds for ``seconds`` (longer than a sweeper round);
    ``state()``, if given, describes what was seen when it stopped holding."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert condition(), f"condition stopped holding: {state() if state else ''}"
        time.sleep(interval)


def echo():
    """A model answering ``echo: <last message>``."""
    from vancetope_brain.llm.testing import FunctionModel

    return FunctionModel(lambda m, t: f"echo: {m[-1].content}")


def http_get(url: str, token: str | None = None) -> tuple[int, dict]:
    """GET a JSON endpoint: (status, body), for errors too."""
    import json
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read())


@contextlib.contextmanager
def serve_in_thread(brain, send_buffer: int | None = None) -> Iterator[str]:
    """The brain's gateway served from a thread: its ``host:port``. ``send_buffer`` caps
    the kernel's send buffer of every accepted socket (they inherit the listener's)."""
    app = create_app(brain, llm_description="test")
    srv = make_embedded_server(app, listen("127.0.0.1", 0), brain.config.header_timeout)
    if send_buffer is not None:
        srv.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{srv.port}"
    finally:
        srv.shutdown()
        thread.join(5)
        close_app(app)
