"""Authentication holds on sockets already open (issue 12): a token revoked by
``vancetope admin token revoke`` — another OS process — closes every open socket of that
token within ``VANCETOPE_TOKEN_RECHECK`` seconds, and a frame it sends meanwhile is refused
with ``unauthorized``; browsers authenticate with the ``bearer.<token>`` subprotocol, and
the handshake reply never carries the token.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from simple_websocket import ConnectionClosed

from tests.conftest import Embedded
from tests.gateway.wire import Client, echo
from tests.helpers import wait_for
from vancetope_brain.errors import VancetopeError
from vancetope_brain.identity.service import hash_token
from vancetope_gateway.chat_client import ChatClient, WebSocketClient
from vancetope_gateway.protocol import REVOKED, REVOKED_MESSAGE
from vancetope_gateway.tokens import TokenWatch

RECHECK = 0.5
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    emb = Embedded(tmp_path_factory.mktemp("auth"), VANCETOPE_TOKEN_RECHECK=str(RECHECK))
    emb.model = echo()
    yield emb
    emb.stop()


def _connect(host: str, token: str, how: str) -> WebSocketClient:
    if how == "header":
        ws = WebSocketClient.connect(f"ws://{host}/ws",
                                     headers={"Authorization": f"Bearer {token}"})
    else:
        ws = WebSocketClient.connect(f"ws://{host}/ws",
                                     subprotocols=["vancetope", f"bearer.{token}"])
    assert json.loads(ws.receive(timeout=5))["type"] == "welcome"
    assert json.loads(ws.receive(timeout=5))["type"] == "inbox-pending-summary"
    return ws


def _request(ws: WebSocketClient, frame_type: str, rid: str, **data) -> dict:
    ws.send(json.dumps({"type": frame_type, "id": rid, "data": data}))
    while True:
        frame = json.loads(ws.receive(timeout=5))
        if frame.get("replyTo") == rid:
            return frame


def _closed_by_server(ws: WebSocketClient, timeout: float = 5) -> int:
    """Read until the server closes; the close code."""
    try:
        while True:
            ws.receive(timeout=timeout)
    except ConnectionClosed:
        return ws.close_reason


def _revoke_with_the_cli(emb: Embedded, token_id: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VANCETOPE_")}
    env.update(VANCETOPE_DATA_DIR=str(emb.brain.config.data_dir), PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "vancetope_gateway.cli", "admin", "token", "revoke",
                    "--tenant", "acme", "--quiet", token_id], env=env, check=True, timeout=60)


def test_a_revoked_token_closes_its_open_sockets_within_the_bound(embedded, served):
    identity = embedded.brain.identity
    token, secret = identity.create_token("acme", "ada", "doomed")
    other = identity.issue_token("acme", "ada", "kept")
    idle = _connect(served, secret, "header")
    busy = _connect(served, secret, "subprotocol")
    kept = _connect(served, other, "header")
    try:
        assert _request(busy, "session-create", "s1", onDisconnect="KEEP_OPEN")["type"] \
            == "session-create"

        # The busy socket keeps sending while the CLI runs and after.
        answers: list[tuple[float, dict]] = []

        def keep_sending() -> None:
            n = 0
            try:
                while True:
                    n += 1
                    reply = _request(busy, "session-list", f"l{n}")
                    answers.append((time.monotonic(), reply))
                    if reply["type"] == "error":
                        return
                    time.sleep(0.02)
            except ConnectionClosed:
                answers.append((time.monotonic(), {"type": "closed"}))
        sender = threading.Thread(target=keep_sending, daemon=True)
        sender.start()
        idle_end: list[tuple[int, float]] = []
        watcher = threading.Thread(target=lambda: idle_end.append(
            (_closed_by_server(idle, 30), time.monotonic())), daemon=True)
        watcher.start()
        # When the CLI's write lands (its start-up is no part of the delay): polled.
        seen: list[float] = []
        digest = hash_token(secret)

        def poll() -> None:
            while identity.holder(digest) is not None:
                time.sleep(0.005)
            seen.append(time.monotonic())
        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        _revoke_with_the_cli(embedded, token.id)
        poller.join(5)
        sender.join(5)
        watcher.join(5)
        revoked_at = seen[0]
        after = [(at - revoked_at, reply) for at, reply in answers if at > revoked_at]
        busy_closed = answers[-1][0] - revoked_at
        assert _closed_by_server(busy) == REVOKED
        idle_code, idle_closed = idle_end[0][0], idle_end[0][1] - revoked_at

        assert idle_code == REVOKED and idle.close_message == REVOKED_MESSAGE
        served_late = [at for at, reply in after if reply["type"] == "session-list"]
        assert all(at <= RECHECK + 0.2 for at in served_late)
        refused = [reply for _, reply in after if reply["type"] == "error"]
        assert refused == [] or refused[0]["data"] == {"code": "unauthorized",
                                                      "message": REVOKED_MESSAGE}
        bound = RECHECK + 0.5
        print(f"\nrevocation (recheck {RECHECK}s): busy socket closed after "
              f"{busy_closed * 1000:.0f} ms ({len(answers)} frames sent, {len(served_late)} "
              f"served after the revocation, {len(refused)} refused), idle socket after "
              f"{idle_closed * 1000:.0f} ms")
        assert busy_closed < bound and idle_closed < bound
        # Another token of the same user is untouched; a new upgrade is refused.
        assert _request(kept, "ping", "p")["type"] == "ping"
        assert _handshake(served, {"Authorization": f"Bearer {secret}"}) \
            .startswith(b"HTTP/1.1 401")
    finally:
        for ws in (idle, busy, kept):
            if ws.connected:
                ws.close()


def test_a_frame_after_the_recheck_sees_the_revocation_is_refused_and_closes(embedded):
    """The per-frame path alone (the background round is an hour away here)."""
    identity = embedded.brain.identity
    token, secret = identity.create_token("acme", "ada")
    now = [0.0]
    watch = TokenWatch(identity, 3600, clock=lambda: now[0])
    digest = hash_token(secret)
    client = Client(embedded, embedded.who, authorized=lambda: watch.valid(digest))
    watch.watch(client.conn, digest)
    try:
        assert client.request("ping")["type"] == "ping"
        identity.revoke_token("acme", token.id)
        assert client.request("ping")["type"] == "ping"  # cached
        now[0] += 3600  # the cached answer is now too old: the next frame re-reads
        refused = client.request("session-list")
        assert refused["data"] == {"code": "unauthorized", "message": REVOKED_MESSAGE}
        assert wait_for(lambda: client.sock.closed_with) == (REVOKED, REVOKED_MESSAGE)
    finally:
        client.close()


def _handshake(host: str, headers: dict[str, str]) -> bytes:
    """The raw reply to an upgrade request, up to the end of its headers."""
    h, port = host.split(":")
    with socket.create_connection((h, int(port)), timeout=5) as s:
        lines = ["GET /ws HTTP/1.1", f"Host: {host}", "Upgrade: websocket",
                 "Connection: Upgrade", "Sec-WebSocket-Version: 13",
                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
        return reply


def test_the_bearer_subprotocol_authenticates_and_the_reply_never_carries_the_token(
        embedded, served):
    secret = embedded.brain.identity.issue_token("acme", "ada")
    offer = f"vancetope, bearer.{secret}"
    reply = _handshake(served, {"Sec-WebSocket-Protocol": offer})
    head = reply.split(b"\r\n\r\n")[0].decode()
    print(f"\nhandshake reply:\n{head}")
    assert head.startswith("HTTP/1.1 101")
    assert "Sec-WebSocket-Protocol: vancetope\r\n" in head + "\r\n"
    assert secret not in reply.decode(errors="replace")
    assert secret.removeprefix("vt_") not in reply.decode(errors="replace")

    ws = _connect(served, secret, "subprotocol")
    try:
        assert ws.subprotocol == "vancetope"
        assert _request(ws, "ping", "p")["type"] == "ping"
    finally:
        ws.close()

    # A browser fails a handshake that selects none of its offers: say so instead.
    refused = _handshake(served, {"Sec-WebSocket-Protocol": f"bearer.{secret}"})
    assert refused.startswith(b"HTTP/1.1 400") and secret.encode() not in refused
    assert _handshake(served, {"Sec-WebSocket-Protocol": "vancetope, bearer.vt_nope"}) \
        .startswith(b"HTTP/1.1 401")
    # The header and the query string still work; the header wins over an offer.
    assert _handshake(served, {"Authorization": f"Bearer {secret}",
                               "Sec-WebSocket-Protocol": "vancetope"}).startswith(b"HTTP/1.1 101")
    ws = WebSocketClient.connect(f"ws://{served}/ws?token={secret}")
    try:
        assert json.loads(ws.receive(timeout=5))["type"] == "welcome"
    finally:
        ws.close()


class _Idle:
    """Stands for an open socket in the watch: only ``revoked`` is called."""

    def __init__(self) -> None:
        self.closed = False

    def revoked(self) -> None:
        self.closed = True


def test_store_reads_are_per_token_not_per_socket_or_frame(embedded):
    identity = embedded.brain.identity
    tokens = [identity.create_token("acme", "ada") for _ in range(10)]
    reads = []

    class Counting:
        def holder(self, token_hash):
            reads.append(token_hash)
            return identity.holder(token_hash)

    now = [0.0]
    watch = TokenWatch(Counting(), 3600, clock=lambda: now[0])
    sockets = [(_Idle(), hash_token(tokens[i % 10][1])) for i in range(1000)]
    for sock, digest in sockets:
        watch.watch(sock, digest)
    for _, digest in sockets:  # a frame on every socket, within the interval
        assert watch.valid(digest)
    frame_reads = len(reads)
    identity.revoke_token("acme", tokens[0][0].id)
    watch.sweep()
    print(f"\n1,000 sockets of 10 tokens: {frame_reads} store reads for 1,000 frames, "
          f"{len(reads) - frame_reads} for a background round")
    assert frame_reads == 0 and len(reads) == 10
    assert [s.closed for s, _ in sockets] == [i % 10 == 0 for i in range(1000)]


def test_the_terminal_client_says_its_socket_was_closed_for_a_revoked_token(embedded, served):
    token, secret = embedded.brain.identity.create_token("acme", "ada", "chat")
    client = ChatClient(f"ws://{served}/ws", secret)
    embedded.brain.identity.revoke_token("acme", token.id)
    assert wait_for(lambda: client.events.get(timeout=5)["type"] == "closed")
    with pytest.raises(VancetopeError, match="closed the connection .*token revoked"):
        client.request("session-list")
    client.close()  # nothing to close any more: no error
