"""Driving a real ``Connection`` without a network: a fake socket and a client on a thread
(and ``serve_in_thread`` for tests that want the real server).

Shared by the protocol, frame and isolation tests. ``Client.ok`` checks that a
request got its reply (same type, data valid against ``frames.REPLIES``) and
``Client.refused`` that it got an ``error`` frame with the expected stable code.
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from tests.helpers import wait_for
from vancetope_brain.events import EventListener
from vancetope_brain.identity import Principal
from vancetope_brain.models import ProcessStatus, SessionStatus
from vancetope_brain.store import SessionStore
from vancetope_gateway import frames
from vancetope_gateway.app import create_app
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


class FakeSocket:
    def __init__(self) -> None:
        self.inbox: queue.Queue[str | bytes | None] = queue.Queue()
        self.sent: list[dict] = []
        self._lock = threading.Lock()
        self.closed_with: tuple[int, str] | None = None

    def receive(self, timeout=None):
        return self.inbox.get(timeout=timeout)

    def close(self, reason: int, message: str) -> None:
        self.closed_with = (reason, message)

    def abort(self) -> None:
        self.closed_with = (1006, "aborted")

    def send(self, data: str) -> None:
        with self._lock:
            self.sent.append(json.loads(data))

    def frames(self, type: str | None = None, reply_to: str | None = None) -> list[dict]:
        with self._lock:
            return [f for f in self.sent if (type is None or f["type"] == type)
                    and (reply_to is None or f.get("replyTo") == reply_to)]


class Client:
    """Drives a Connection on a thread, like a socket would."""

    def __init__(self, emb, who: Principal, max_frame_bytes: int = 65536,
                 notify_mode: str = "all") -> None:
        self.who = who
        self.sock = FakeSocket()
        self.listener = EventListener(emb.brain.redis, block_ms=20)
        self.conn = Connection(self.sock, who, emb.brain, self.listener, llm="test model",
                               max_frame_bytes=max_frame_bytes, notify_mode=notify_mode)
        self.thread = threading.Thread(target=self.conn.run, daemon=True)
        self.thread.start()
        self._n = 0
        self.closed = False

    def send_raw(self, raw) -> None:
        self.sock.inbox.put(raw)

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
        self.sock.inbox.put(None)
        self.thread.join(5)
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
        app.extensions["vancetope.listener"].close()
