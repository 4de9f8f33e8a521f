"""Half-sent requests cannot hold a gateway (issue 12, slowloris): both servers close a
connection whose request line and headers are not in within ``VANCETOPE_HEADER_TIMEOUT``,
while normal clients keep being served — and a WebSocket, once upgraded, is not cut. The
bound is on the request head as a whole: a client that trickles one header line at a time,
each well within the timeout, is closed all the same (issue 27 item 21).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Embedded
from tests.gateway.wire import http_get
from tests.helpers import wait_for
from vancetope_gateway.chat_client import WebSocketClient

HEADER_TIMEOUT = 1.0
SLOW_CLIENTS = 12
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    emb = Embedded(tmp_path_factory.mktemp("slowloris"),
                   VANCETOPE_HEADER_TIMEOUT=str(HEADER_TIMEOUT))
    yield emb
    emb.stop()


def _half_requests(port: int) -> list[socket.socket]:
    """Sockets that sent half a request line and then nothing."""
    socks = []
    for _ in range(SLOW_CLIENTS):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /healthz HT")
        socks.append(s)
    return socks


def _trickle(port: int, clients: int = 3) -> list[float]:
    """Clients that send a request line, then one header line every half header timeout and
    never the blank line that ends the head; seconds after the start until the server closed
    each (at most 5 header timeouts: then it never would)."""
    socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(clients)]
    started = time.monotonic()
    for s in socks:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    closed: dict[socket.socket, float] = {}
    for n in range(10):
        for s in [s for s in socks if s not in closed]:
            try:
                s.sendall(f"X-Trickle-{n}: 1\r\n".encode())
            except OSError:  # reset or broken pipe: closed
                closed[s] = time.monotonic() - started
        readable, _, _ = select.select([s for s in socks if s not in closed], [], [],
                                       HEADER_TIMEOUT / 2)
        for s in readable:
            with contextlib.suppress(OSError):
                data = s.recv(1024)
                assert data == b"" or data.startswith(b"HTTP/1."), data  # closed, maybe a 408
            closed[s] = time.monotonic() - started
        if len(closed) == len(socks):
            break
    for s in socks:
        s.close()
    assert len(closed) == len(socks), f"{len(socks) - len(closed)} trickling clients still open"
    return sorted(closed.values())


def _seconds_until_closed(socks: list[socket.socket], started: float) -> list[float]:
    """When the server closed each socket (recv gives b'' or a reset), seconds after start."""
    closed = []
    for s in socks:
        try:
            data = s.recv(1024)
            assert data == b"" or data.startswith(b"HTTP/1."), data  # closed, maybe a 408
            if data:
                while s.recv(1024):
                    pass
        except ConnectionResetError:
            pass
        closed.append(time.monotonic() - started)
        s.close()
    return closed


def test_the_embedded_server_closes_half_sent_requests_and_keeps_serving(embedded, served):
    port = int(served.rsplit(":", 1)[1])
    token = embedded.brain.identity.issue_token("acme", "ada")
    ws = WebSocketClient.connect(f"ws://{served}/ws", headers={"Authorization": f"Bearer {token}"})
    try:
        started = time.monotonic()
        socks = _half_requests(port)
        assert http_get(f"http://{served}/healthz") == (200, {"status": "ok"})
        closed = _seconds_until_closed(socks, started)
        print(f"\nembedded server, header timeout {HEADER_TIMEOUT}s: {SLOW_CLIENTS} half-sent "
              f"requests closed after {min(closed):.2f}–{max(closed):.2f} s")
        assert min(closed) >= HEADER_TIMEOUT * 0.9 and max(closed) < HEADER_TIMEOUT + 2
        # The WebSocket, idle for longer than the header timeout, still answers.
        time.sleep(HEADER_TIMEOUT / 2)
        ws.send(json.dumps({"type": "ping", "id": "p", "data": {}}))
        frames = [json.loads(ws.receive(timeout=5)) for _ in range(3)]
        assert frames[-1]["type"] == "ping", frames
    finally:
        ws.close()


def test_the_embedded_server_bounds_the_whole_head_of_a_trickled_request(embedded, served):
    port = int(served.rsplit(":", 1)[1])
    closed = _trickle(port)
    print(f"\nembedded server, header timeout {HEADER_TIMEOUT}s: trickling clients closed "
          f"after {closed[0]:.2f}–{closed[-1]:.2f} s")
    assert closed[-1] < HEADER_TIMEOUT + 2
    assert http_get(f"http://{served}/healthz") == (200, {"status": "ok"})


WSGI = '''
def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]
'''


def test_gunicorn_with_the_gateway_worker_closes_half_sent_requests(tmp_path):
    (tmp_path / "hello_app.py").write_text(WSGI)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VANCETOPE_")}
    env.update(VANCETOPE_HEADER_TIMEOUT=str(HEADER_TIMEOUT),
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    log = tmp_path / "gunicorn.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--worker-class",
             "vancetope_gateway.serving.GatewayWorker", "--workers", "1", "--threads",
             str(SLOW_CLIENTS + 4), "--bind", "127.0.0.1:0", "--timeout", "0",
             "--graceful-timeout", "1", "--no-control-socket", "hello_app:app"],
            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        port = int(wait_for(lambda: re.search(r"Listening at: http://127\.0\.0\.1:(\d+)",
                                              log.read_text()), timeout=30).group(1))
        wait_for(lambda: "Booting worker" in log.read_text(), timeout=30)
        started = time.monotonic()
        socks = _half_requests(port)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert s.recv(1024).startswith(b"HTTP/1.1 200")
        closed = _seconds_until_closed(socks, started)
        print(f"\ngunicorn GatewayWorker, header timeout {HEADER_TIMEOUT}s: {SLOW_CLIENTS} "
              f"half-sent requests closed after {min(closed):.2f}–{max(closed):.2f} s")
        # The worker's loop looks once a second.
        assert min(closed) >= HEADER_TIMEOUT * 0.9 and max(closed) < HEADER_TIMEOUT + 2.5
        trickled = _trickle(port)
        print(f"trickling clients closed after {trickled[0]:.2f}–{trickled[-1]:.2f} s")
        assert trickled[-1] < HEADER_TIMEOUT + 2.5
    finally:
        proc.terminate()
        proc.wait(10)
