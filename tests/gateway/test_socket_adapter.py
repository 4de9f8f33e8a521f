"""Pins what ``vancetope_gateway/socket_adapter.py`` relies on in simple-websocket and
flask-sock beyond their documented API, against the installed versions: a real werkzeug
server on loopback, flask-sock's route, and a real simple-websocket client.

A failure here after an upgrade means the library changed under the adapter: change
``socket_adapter.py`` (and only it), not this test.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import flask_sock
import pytest
import simple_websocket
from flask import Flask
from flask_sock import Sock
from simple_websocket import Server
from werkzeug.serving import make_server
from wsproto import ConnectionState
from wsproto.events import TextMessage

from vancetope_gateway.socket_adapter import (
    NoThread,
    Upgraded,
    WebSocketClient,
    close_unconnected,
    hand_off,
    server_options,
)

CHANGED = "simple-websocket/flask-sock changed under vancetope_gateway/socket_adapter.py: "


@contextlib.contextmanager
def _served(greeting: str) -> Iterator[tuple[str, list[Upgraded], list[object]]]:
    """A flask-sock route that hands its socket off and writes ``greeting`` on it (wsproto,
    at once after the 101: in the client's read of the handshake reply, where it can);
    yields the URL, the sockets handed off and the reader threads simple-websocket made."""
    app = Flask(__name__)
    app.config["SOCK_SERVER_OPTIONS"] = server_options(["vancetope"])
    upgraded: list[Upgraded] = []
    threads: list[object] = []
    released = threading.Event()

    @Sock(app).route("/ws")
    def ws(server: Server) -> None:
        threads.append(server.thread)
        handed = hand_off(server)
        upgraded.append(handed)
        handed.sock.sendall(handed.ws.send(TextMessage(data=greeting)))
        released.wait(10)  # werkzeug closes the socket once the route returns

    srv = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"ws://127.0.0.1:{srv.port}/ws", upgraded, threads
    finally:
        released.set()
        srv.shutdown()
        thread.join(5)


def test_the_server_hands_over_an_open_socket_and_starts_no_thread() -> None:
    with _served("hello") as (url, upgraded, threads):
        ws = WebSocketClient.connect(url, subprotocols=["bearer.secret", "vancetope"])
        try:
            assert ws.subprotocol == "vancetope", CHANGED + (
                "Server no longer selects the first offered subprotocol listed in "
                f"``subprotocols`` (selected {ws.subprotocol!r})")
            # The greeting came in the read of the 101 (or the next): WebSocketClient's
            # ``_handle_events`` after the handshake gives it either way.
            assert ws.receive(timeout=5) == "hello", CHANGED + "the client lost a frame"
            [handed] = upgraded
            assert isinstance(handed.sock, socket.socket), CHANGED + "Server.sock"
            assert handed.ws.state is ConnectionState.OPEN, CHANGED + (
                f"Server.ws is not an open wsproto connection ({handed.ws.state})")
            assert handed.owned is False, CHANGED + "Server.mode under werkzeug"
            assert [type(t) for t in threads] == [NoThread], CHANGED + (
                "Base.__init__ no longer makes its reader thread with ``thread_class``")
        finally:
            ws.sock.close()


def test_flask_sock_sends_no_close_frame_after_a_hand_off(monkeypatch) -> None:
    """Once the route returns, flask-sock calls ``ws.close()``: after ``hand_off`` that
    raises ``ConnectionClosed`` before writing anything (flask-sock swallows it), so the
    hub's socket gets no close frame it did not send."""
    calls: list[str] = []

    class Recorded(Server):
        def close(self, reason=None, message=None):
            try:
                super().close(reason, message)
            except simple_websocket.ConnectionClosed:
                calls.append("closed: raised, wrote nothing")
                raise
            calls.append("closed: wrote a close frame")

    monkeypatch.setattr(flask_sock, "Server", Recorded)
    with _served("hello") as (url, upgraded, _):
        ws = WebSocketClient.connect(url)
        try:
            assert ws.receive(timeout=5) == "hello"
        finally:
            ws.sock.close()
    assert calls == ["closed: raised, wrote nothing"], CHANGED + (
        f"flask-sock's close after the route: {calls or 'not called'}")


def test_a_refused_connect_leaves_its_socket_for_close_unconnected() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(OSError) as refused:
        WebSocketClient.connect(f"ws://127.0.0.1:{port}/ws")
    assert close_unconnected(refused.value) == 1, CHANGED + (
        "a refused connect's socket is no longer a local ``sock`` in the traceback "
        "(if the library closes it now, drop close_unconnected)")
