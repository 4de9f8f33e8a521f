"""Gateway processes and WebSocket clients for the multi-process tests.

``Gateway`` is the distributed shape's web process exactly as the Procfile starts it
(gunicorn, gthread as ``GatewayWorker``, ``vancetope_gateway.wsgi:app``); ``Client`` is
``vancetope_gateway.chat_client.ChatClient`` plus the event frames it received;
``Stack`` puts gateways on top of a ``Cluster`` (its Redis, SQLite file and workers).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from simple_websocket import ConnectionClosed

from tests.helpers import http_get, wait_for
from tests.integration.conftest import REPO, Cluster, stop_process, tail
from vancetope_brain.store import SessionStore
from vancetope_gateway.chat_client import ChatClient

Events = list[dict[str, Any]]


class Proc:
    """A child process with its output in a file, ended at teardown."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], tmp: Path) -> None:
        self.name = name
        self.output_path = tmp / f"{name}.txt"
        self._output: IO[bytes] = open(self.output_path, "wb")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(argv, cwd=REPO, env=env, stdout=self._output,
                                      stderr=subprocess.STDOUT, start_new_session=True)

    def alive(self) -> bool:
        if self.popen.poll() is not None:
            raise AssertionError(f"{self.name} exited with {self.popen.returncode}:\n"
                                 f"{tail(self.output_path)}")
        return True

    def kill(self) -> None:
        """SIGKILL the process group now (no goodbye to anyone) and reap it."""
        os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=30)

    def stop(self) -> None:
        try:
            stop_process(self.popen, graceful=True)
        finally:
            self._output.close()


class Gateway(Proc):
    def __init__(self, name: str, env: dict[str, str], tmp: Path) -> None:
        super().__init__(name, [
            sys.executable, "-m", "gunicorn", "--worker-class",
            "vancetope_gateway.serving.GatewayWorker", "--workers", "1",
            "--threads", "16", "--bind", "127.0.0.1:0", "--timeout", "0",
            "--graceful-timeout", "2", "--no-control-socket", "vancetope_gateway.wsgi:app",
        ], env, tmp)
        self.port = 0

    def wait_ready(self) -> None:
        def listening() -> int | None:
            self.alive()
            found = re.search(r"Listening at: http://127\.0\.0\.1:(\d+)",
                              self.output_path.read_text(errors="replace"))
            return int(found.group(1)) if found else None

        self.port = wait_for(listening, timeout=60, interval=0.05, what=f"{self.name} to listen")
        # /healthz, not /readyz: a test may start its workers after its gateways.
        wait_for(lambda: self.alive() and self.get("/healthz")[0] == 200, timeout=60,
                 interval=0.05, what=f"{self.name} /healthz")

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        return http_get(self.port, path, headers=headers)


class Client:
    """ChatClient plus the event frames it has received so far."""

    def __init__(self, url: str, token: str) -> None:
        self.chat = ChatClient(url, token)
        self.events: Events = []
        self.gaps: list[dict[str, Any]] = []
        self.closed = False

    def request(self, type: str, **data: Any) -> dict[str, Any]:
        return self.chat.request(type, **data)

    def until(self, done: Callable[[Events], bool], timeout: float = 30) -> Events:
        """Collect event data until ``done(events)``; the connection closing ends it too."""
        deadline = time.monotonic() + timeout
        while not done(self.events):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.closed:
                raise AssertionError(f"no such events within {timeout}s (closed={self.closed}); "
                                     f"got {[(e['seq'], e['type']) for e in self.events]}")
            try:
                frame = self.chat.events.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            if frame["type"] == "closed":
                self.closed = True
            elif frame["type"] == "event":
                self.events.append(frame["data"])
            elif frame["type"] == "events-gap":
                self.gaps.append(frame["data"])
        return self.events

    def drain(self) -> Events:
        """Take every frame already received, without waiting."""
        return self.until(lambda _: self.chat.events.empty() or self.closed)

    def drop(self) -> None:
        """Lose the connection the way a network does: no close frame, the TCP socket just
        goes. Frames that were in flight are lost with it."""
        ws = self.chat._ws
        with contextlib.suppress(OSError):
            ws.sock.shutdown(socket.SHUT_RDWR)
        ws.thread.join(timeout=10)  # its reader sees EOF and closes the socket
        self._finish()

    def close(self) -> None:
        with contextlib.suppress(ConnectionClosed):  # the server closed it first
            self.chat.close()
        self._finish()

    def _finish(self) -> None:
        self.chat._ws.thread.join(timeout=10)
        self.chat._reader.join(timeout=10)


def turn_done(pid: str, answer: str) -> Callable[[Events], bool]:
    """True once ``pid`` committed the assistant line ``answer`` and went back to IDLE."""
    def done(events: Events) -> bool:
        answered = [i for i, e in enumerate(events) if e["processId"] == pid
                    and e["type"] == "chat-message" and e["data"]["role"] == "assistant"
                    and e["data"]["content"] == answer]
        return bool(answered) and any(
            e["processId"] == pid and e["type"] == "status-changed" and e["data"]["to"] == "IDLE"
            for e in events[answered[0]:])
    return done


def transcript(events: Events) -> list[tuple[int, str, str, Any]]:
    """What a client saw, reduced to (seq, process, type, data) in arrival order."""
    return [(e["seq"], e["processId"], e["type"], e["data"]) for e in events]


class Stack:
    """Gateway processes (and their clients) on top of a ``Cluster``; all ended by ``stop``."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.gateways: list[Gateway] = []
        self.clients: list[Client] = []
        self.token = cluster.brain.identity.issue_token("acme", "ada", label="it")

    def start_gateways(self, count: int) -> list[Gateway]:
        started = []
        for _ in range(count):
            gateway = Gateway(f"web{len(self.gateways) + 1}", self.cluster.env, self.cluster.tmp)
            self.gateways.append(gateway)
            started.append(gateway)
        for gateway in started:
            gateway.wait_ready()
        return started

    def client(self, gateway: Gateway | str, token: str | None = None) -> Client:
        """A client of ``gateway`` (or of the WebSocket URL given, e.g. a load balancer's)."""
        client = Client(gateway if isinstance(gateway, str) else gateway.url,
                        token or self.token)
        self.clients.append(client)
        return client

    def stop(self) -> None:
        try:
            for client in self.clients:
                client.close()
        finally:
            for gateway in self.gateways:
                gateway.stop()
            for gateway in self.gateways:  # shown by pytest only when the test failed
                print(f"--- {gateway.name} output:\n{tail(gateway.output_path)}")

    # ── store-level views of a session ─────────────────────────────────
    def statuses(self, session_id: str) -> dict[str, tuple[str, str | None, bool]]:
        """Every process of the session: id → (status, closeReason, contextDrift)."""
        return {p.id: (p.status.value, p.close_reason and p.close_reason.value, p.context_drift)
                for p in self.cluster.brain.store.port(SessionStore).list_processes("acme", session_id)}


@contextlib.contextmanager
def running_stack(tmp_path: Path, redis_url: str, **env: str) -> Iterator[Stack]:
    """A ``Cluster`` (with ``env`` for every process) and a ``Stack`` on it, both ended after."""
    cluster = Cluster(tmp_path, redis_url, **env)
    try:
        stack = Stack(cluster)
        try:
            yield stack
        finally:
            stack.stop()
    finally:
        cluster.close()


class CoalescingProxy:
    """A TCP proxy to ``port`` that hands the client the server's 101 response and the frame
    that follows it in ONE send, as a busy network or a fast server sometimes does."""

    def __init__(self, port: int) -> None:
        self._target = port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = [self._listener]
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self._listener.accept()
                server = socket.create_connection(("127.0.0.1", self._target))
                self._sockets += [client, server]
                for job, args in ((self._pipe, (client, server)),
                                  (self._coalesce, (server, client))):
                    thread = threading.Thread(target=job, args=args, daemon=True)
                    self._threads.append(thread)
                    thread.start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def _coalesce(self, server: socket.socket, client: socket.socket) -> None:
        held = b""
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in held or held.endswith(b"\r\n\r\n"):
                chunk = server.recv(65536)
                if not chunk:
                    break
                held += chunk
            server.settimeout(0.2)  # the rest of that first frame, if it came in pieces
            with contextlib.suppress(TimeoutError):
                held += server.recv(65536)
            server.settimeout(None)
            client.sendall(held)
        self._pipe(server, client)

    def close(self) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(timeout=5)


def next_push(client: Any, kind: str, timeout: float = 30) -> dict[str, Any]:
    """The data of the next ``kind`` frame a ``ChatClient`` was pushed (others are skipped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            frame = client.chat.events.get(timeout=0.5)
        except queue.Empty:
            continue
        if frame["type"] == kind:
            data: dict[str, Any] = frame["data"]
            return data
    raise AssertionError(f"no {kind} frame within {timeout}s")
