"""A client that stops reading delays nobody else (ARCHITECTURE §5): the real server in a
thread, real sockets. The stalled client is a bare TCP socket with a tiny receive buffer
and the server's send buffers are capped at 8 KiB, so once it stops reading the server's
sends to it really block after a few dozen frames (not after megabytes).
"""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
from simple_websocket import ConnectionClosed
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Request, TextMessage

from tests.gateway.wire import serve_in_thread, wait_session
from vancetope_brain.events import EventType
from vancetope_brain.models import SessionStatus
from vancetope_gateway.chat_client import WebSocketClient
from vancetope_gateway.protocol import Connection

EVENTS = 200     # published into the stalled client's session
TICKS = 40       # each tick publishes EVENTS / TICKS events there and one to the healthy client
INTERVAL = 0.25  # between two ticks: the healthy client's event interval, and its delay bound
QUEUE_MAX = 20   # so that EVENTS overflow the queue behind the (capped) socket buffers


class StalledClient:
    """A WebSocket client on a bare socket that reads only when asked to."""

    def __init__(self, host: str, token: str) -> None:
        hostname, port = host.split(":")
        self.sock = socket.socket()
        # Before connecting, so the window the server sees stays small.
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        self.sock.connect((hostname, int(port)))
        self.sock.settimeout(10)
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.sock.sendall(self.ws.send(Request(host=host, target=f"/ws?token={token}")))
        self._text = ""
        assert isinstance(self._next(), AcceptConnection)

    def send(self, frame: dict) -> None:
        self.sock.sendall(self.ws.send(TextMessage(data=json.dumps(frame))))

    def receive(self) -> dict:
        frame = self._next()
        assert isinstance(frame, dict), frame
        return frame

    def frames_until_closed(self) -> tuple[list[dict], CloseConnection | None]:
        """Everything still coming, and the close frame (None: the TCP connection ended
        without one)."""
        frames: list[dict] = []
        while isinstance(item := self._next(), dict):
            frames.append(item)
        assert not isinstance(item, AcceptConnection)
        return frames, item

    def _next(self) -> AcceptConnection | CloseConnection | dict | None:
        while True:
            for event in self.ws.events():
                if isinstance(event, TextMessage):
                    self._text += event.data
                    if event.message_finished:
                        frame, self._text = json.loads(self._text), ""
                        return frame
                elif isinstance(event, AcceptConnection | CloseConnection):
                    return event
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not data:
                return None
            self.ws.receive_data(data)

    def close(self) -> None:
        self.sock.close()


def _create_autonomous(send, receive) -> str:
    # AUTONOMOUS: no chat process, so the session's log holds only the test's events.
    send({"type": "session-create", "id": "c", "data": {"type": "AUTONOMOUS"}})
    while (frame := receive()).get("replyTo") != "c":
        pass
    assert frame["type"] == "session-create", frame
    return frame["data"]["session"]["id"]


@pytest.fixture(scope="module")
def small_buffers(embedded):
    with serve_in_thread(embedded.brain, send_buffer=8192) as host:
        yield host


@pytest.fixture
def gateway(small_buffers, embedded, monkeypatch):
    monkeypatch.setattr(Connection, "OUTBOUND_QUEUE_MAX", QUEUE_MAX)
    return small_buffers, embedded.brain.identity.issue_token("acme", "ada")


def test_a_stalled_client_delays_no_other_session_and_resumes_after_its_drop(
        gateway, embedded, monkeypatch):
    # The stalled client reads only after everything is published: within the grace.
    monkeypatch.setattr(Connection, "STALL_GRACE_SEC", 60.0)
    host, token = gateway
    brain = embedded.brain
    healthy = WebSocketClient.connect(f"ws://{host}/ws?token={token}")
    stalled = StalledClient(host, token)
    try:
        healthy_sid = _create_autonomous(lambda f: healthy.send(json.dumps(f)),
                                         lambda: json.loads(healthy.receive(timeout=5)))
        stalled_sid = _create_autonomous(stalled.send, stalled.receive)
        # From here on the stalled client reads nothing until every event is published.
        received: list[tuple[int, float]] = []

        def receive_healthy() -> None:
            while len(received) < TICKS:
                try:
                    raw = healthy.receive(timeout=INTERVAL * TICKS)
                except ConnectionClosed:
                    return
                if raw is None:
                    return
                frame = json.loads(raw)
                if frame["type"] == "event":
                    received.append((frame["data"]["seq"], time.monotonic()))

        reader = threading.Thread(target=receive_healthy, daemon=True)
        reader.start()
        time.sleep(0.3)  # the listener takes up newly followed sessions within 100 ms
        published: list[tuple[int, float]] = []
        stalled_seqs: list[int] = []
        start = time.monotonic()
        for tick in range(TICKS):
            time.sleep(max(0.0, start + tick * INTERVAL - time.monotonic()))
            for _ in range(EVENTS // TICKS):
                stalled_seqs.append(brain.events.publish(
                    stalled_sid, "proc_t", EventType.TOKEN, {"text": str(len(stalled_seqs))}))
            at = time.monotonic()
            published.append((brain.events.publish(healthy_sid, "proc_t", EventType.TOKEN,
                                                   {"text": str(tick)}), at))
        reader.join(INTERVAL * 20)

        assert [seq for seq, _ in received] == [seq for seq, _ in published]
        delays = [got - sent for (_, sent), (_, got) in zip(published, received, strict=True)]
        assert max(delays) < INTERVAL, f"healthy client delayed: {sorted(delays)[-5:]}"

        # Dropped: what it gets now is a prefix of its events, then the close frame 1013.
        frames, close = stalled.frames_until_closed()
        assert close is not None and close.code == 1013, close
        assert close.reason == "client too slow; resume with your last seq"
        seen = [f["data"]["seq"] for f in frames if f["type"] == "event"]
        assert seen == stalled_seqs[:len(seen)] and len(seen) < EVENTS
        # The usual close path ran: onDisconnect (SUSPEND) applied.
        wait_session(embedded, embedded.who, stalled_sid, SessionStatus.SUSPENDED)
        assert healthy.connected

        back = WebSocketClient.connect(f"ws://{host}/ws?token={token}")
        try:
            back.send(json.dumps({"type": "session-resume", "id": "r", "data": {
                "sessionId": stalled_sid, "lastSeq": seen[-1] if seen else 0}}))
            frames = []
            while len([f for f in frames if f["type"] == "event"]) < EVENTS - len(seen):
                frames.append(json.loads(back.receive(timeout=5)))
            reply = next(f for f in frames if f.get("replyTo") == "r")
            assert reply["type"] == "session-resume", reply
            missed = [f["data"] for f in frames if f["type"] == "event"]
            assert [e["seq"] for e in missed] == stalled_seqs[len(seen):]
            assert [e["data"]["text"] for e in missed] == [
                str(i) for i in range(len(seen), EVENTS)]
        finally:
            back.close()
    finally:
        healthy.close()
        stalled.close()


def test_a_client_that_never_reads_again_is_cut_after_the_grace(gateway, embedded,
                                                                 monkeypatch):
    monkeypatch.setattr(Connection, "STALL_GRACE_SEC", 0.5)
    host, token = gateway
    stalled = StalledClient(host, token)
    try:
        sid = _create_autonomous(stalled.send, stalled.receive)
        # Slowly enough for the hub to keep up until the socket buffers are full: the
        # queue overflows while the socket takes nothing.
        for i in range(EVENTS):
            embedded.brain.events.publish(sid, "proc_t", EventType.TOKEN, {"text": str(i)})
            time.sleep(0.02)
        # Dropped, its close frame stuck behind frames the client does not read, then cut
        # after the grace: the connection ends all the same (its onDisconnect applied).
        wait_session(embedded, embedded.who, sid, SessionStatus.SUSPENDED)
        frames, close = stalled.frames_until_closed()
        assert close is None and 0 < len(frames) < EVENTS
    finally:
        stalled.close()
