"""Issue 12: every cap on what one user can make the server hold — one over the limit is
refused with its stable code and stores nothing; at the limit it works (docs/protocol.md
"Limits"). The caps are configured small here; sockets are real (the gateway served from
threads, two of them on one brain: two gateways of one cluster).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections import Counter

import pytest
from simple_websocket import ConnectionClosed
from werkzeug.serving import make_server

from tests.conftest import Embedded
from tests.gateway.wire import Client
from tests.helpers import wait_for
from vancetope_brain.errors import LimitExceeded
from vancetope_brain.identity import Principal
from vancetope_brain.llm import LlmResponse, ToolCall
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ProcessStatus, SessionStatus
from vancetope_brain.models.inbox import ItemType, NewItem
from vancetope_brain.store import SessionStore
from vancetope_brain.store.sessions import every_session
from vancetope_gateway.app import MAX_BODY_BYTES, close_app, create_app
from vancetope_gateway.chat_client import WebSocketClient
from vancetope_gateway.protocol import MAX_NESTING

CAPS = {"VANCETOPE_MAX_CONNECTIONS_PER_USER": "3", "VANCETOPE_MAX_CONNECTIONS_PER_IP": "5",
        "VANCETOPE_MAX_SESSIONS_PER_USER": "3", "VANCETOPE_MAX_PROCESSES_PER_SESSION": "3",
        "VANCETOPE_MAX_PENDING_ITEMS_PER_PROCESS": "2"}


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    emb = Embedded(tmp_path_factory.mktemp("limits"), **CAPS)
    yield emb
    emb.stop()


@pytest.fixture(scope="module")
def gateways(embedded):
    """Two gateways (apps with their own listener, renewer and address counts) on one brain:
    ``[(host, app), (host, app)]``."""
    served = []
    for _ in range(2):
        app = create_app(embedded.brain, llm_description="test")
        srv = make_server("127.0.0.1", 0, app, threaded=True)
        thread = threading.Thread(target=srv.serve_forever, daemon=True)
        thread.start()
        served.append((srv, thread, app))
    yield [(f"127.0.0.1:{srv.port}", app) for srv, _, app in served]
    for srv, thread, app in served:
        srv.shutdown()
        thread.join(5)
        close_app(app)


_users = iter(range(1000))


def new_user(emb) -> tuple[Principal, str]:
    """A fresh user of tenant acme (every cap here is per user) and a token of theirs."""
    user = emb.brain.identity.create_user("acme", f"u{next(_users)}")
    return Principal("acme", user.id), emb.brain.identity.issue_token("acme", user.id)


def handshake(host: str, token: str, body: bytes | None = None) -> tuple[int, dict]:
    """A WebSocket upgrade request that must be refused: (status, JSON body)."""
    connection = http.client.HTTPConnection(host, timeout=5)
    headers = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
               "Authorization": f"Bearer {token}"}
    try:
        connection.request("GET", "/ws", body=body, headers=headers)
        response = connection.getresponse()
        assert response.status != 101, "the upgrade was accepted"
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def open_socket(host: str, token: str) -> WebSocketClient:
    ws = WebSocketClient.connect(f"ws://{host}/ws", headers={"Authorization": f"Bearer {token}"})
    assert json.loads(ws.receive(timeout=5))["type"] == "welcome"
    return ws


def held(app, address: str = "127.0.0.1") -> int:
    return app.extensions["vancetope.sockets"].slots.held(address)


def settled(gateways) -> None:
    """Every socket of earlier tests has been released by its gateway (its slot, and by the
    hub, which drains a closed socket for a moment after its close frame)."""
    wait_for(lambda: all(held(app) == 0 and app.extensions["vancetope.sockets"].hub.wait_empty(0)
                         for _, app in gateways), what="released sockets")


def freed(emb, who: Principal, left: int) -> float:
    """Seconds until the user counts only ``left`` connections (in presence, cluster-wide)."""
    started = time.monotonic()
    wait_for(lambda: len(emb.brain.presence.user_modes("acme", who.user_id)) == left,
             what="a freed slot")
    return time.monotonic() - started


# ── connections ──────────────────────────────────────────────────────────────

def test_connections_per_user_across_gateways_and_a_closed_one_frees_its_slot(
        embedded, gateways):
    settled(gateways)
    (a, _), (b, _) = gateways
    who, token = new_user(embedded)
    sockets = [open_socket(a, token), open_socket(a, token), open_socket(b, token)]  # at the cap
    try:
        status, body = handshake(b, token)  # one over, on the other gateway: cluster-wide
        assert (status, body["code"]) == (429, "limit_exceeded"), body
        assert "you have 3 connections open" in body["message"]
        assert handshake(a, token)[0] == 429
        # A normal close frees the slot ...
        sockets.pop(0).close()
        normal = freed(embedded, who, left=2)
        sockets.append(open_socket(a, token))
        # ... and so does an abnormal one: the TCP connection cut without a close frame.
        cut = sockets.pop(0)
        cut.sock.shutdown(socket.SHUT_RDWR)
        cut.sock.close()
        abnormal = freed(embedded, who, left=2)
        sockets.append(open_socket(b, token))
        assert handshake(a, token)[0] == 429  # still exactly three
        print(f"\nslot freed after a close in {normal * 1000:.0f} ms, after a cut TCP "
              f"connection in {abnormal * 1000:.0f} ms")
    finally:
        for ws in sockets:
            with contextlib.suppress(Exception):
                ws.close()
    settled(gateways)
    assert embedded.brain.presence.user_modes("acme", who.user_id) == []


def test_connections_per_address_per_gateway(embedded, gateways):
    settled(gateways)
    (a, app_a), (b, _) = gateways
    tokens = [new_user(embedded)[1] for _ in range(3)]
    # Five from 127.0.0.1 on gateway a (the cap), by three users each under their own cap.
    sockets = [open_socket(a, t) for t in (tokens[0], tokens[0], tokens[1], tokens[1],
                                            tokens[2])]
    try:
        assert held(app_a) == 5
        status, body = handshake(a, tokens[2])
        assert (status, body["code"]) == (429, "limit_exceeded"), body
        assert "5 connections from 127.0.0.1" in body["message"]
        sockets.append(open_socket(b, tokens[2]))  # per gateway: the other one still admits
    finally:
        for ws in sockets:
            ws.close()
    settled(gateways)


# ── request bodies ───────────────────────────────────────────────────────────

def _raw(host: str, method: str, path: str, headers: dict[str, str],
         body: bytes | None = None) -> tuple[int, dict]:
    connection = http.client.HTTPConnection(host, timeout=5)
    try:
        connection.putrequest(method, path)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        connection.close()


def test_request_bodies_are_capped_on_every_route(embedded, gateways):
    (host, _), _ = gateways
    token = embedded.brain.identity.issue_token("acme", "ada")
    auth = {"Authorization": f"Bearer {token}"}
    # Announced over the cap: refused before a byte of it is read, authenticated or not.
    for path in ("/healthz", "/sessions", "/ws"):
        status, body = _raw(host, "GET", path, {"Content-Length": str(MAX_BODY_BYTES + 1)})
        assert (status, body["code"]) == (413, "payload_too_large"), (path, body)
    status, body = _raw(host, "POST", "/sessions",
                        {**auth, "Content-Length": str(MAX_BODY_BYTES + 1)})
    assert (status, body["code"]) == (413, "payload_too_large")
    # At the cap a body is not refused for its size (no route takes a POST) ...
    status, body = _raw(host, "POST", "/sessions", {**auth, "Content-Length": str(MAX_BODY_BYTES)},
                        b"x" * MAX_BODY_BYTES)
    assert status == 405
    # ... but no GET route reads one, the WebSocket handshake included.
    status, body = _raw(host, "GET", "/sessions", {**auth, "Content-Length": "2"}, b"{}")
    assert (status, body["code"]) == (413, "payload_too_large")
    assert handshake(host, token, body=b"hello")[1]["code"] == "payload_too_large"
    status, body = _raw(host, "GET", "/sessions", {**auth, "Transfer-Encoding": "chunked"},
                        b"2\r\n{}\r\n0\r\n\r\n")
    assert (status, body["code"]) == (413, "payload_too_large")
    assert _raw(host, "GET", "/sessions", auth)[0] == 200


# ── frames ───────────────────────────────────────────────────────────────────

def test_frames_are_counted_before_they_are_parsed(embedded, gateways):
    """2,000 invalid frames as fast as the socket takes them: the burst (200) is answered
    ``bad_json``, the rest ``rate_limited`` unread, and a client that keeps on is closed 1008.
    The first 250 are read before the rest are sent (a close discards replies still queued)."""
    settled(gateways)
    (host, _), _ = gateways
    _, token = new_user(embedded)
    ws = open_socket(host, token)
    assert json.loads(ws.receive(timeout=5))["type"] == "inbox-pending-summary"
    started = time.monotonic()
    for _ in range(250):
        ws.send("{not json")
    codes: Counter[str] = Counter()
    for _ in range(250):
        frame = json.loads(ws.receive(timeout=5))
        assert frame["type"] == "error" and "replyTo" not in frame, frame
        codes[frame["data"]["code"]] += 1
    took = time.monotonic() - started
    refill = int(took * 50) + 1
    assert 200 <= codes["bad_json"] <= 200 + refill, codes
    assert codes["rate_limited"] == 250 - codes["bad_json"] >= 1, codes
    sent = 250
    with contextlib.suppress(ConnectionClosed, OSError):
        for _ in range(1750):
            ws.send("{not json")
            sent += 1
    with contextlib.suppress(ConnectionClosed):
        while (raw := ws.receive(timeout=5)) is not None:
            codes[json.loads(raw)["data"]["code"]] += 1
    took = time.monotonic() - started
    print(f"\n{sent} invalid frames sent in {took:.2f}s: {dict(codes)} answered (the first 250 "
          f"read before the rest were sent), then closed with {ws.close_reason}")
    assert ws.close_reason == 1008
    assert sum(codes.values()) < 2000 and codes["bad_json"] <= 200 + int(took * 50) + 1


def _nested(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize("frame", ["process-create", "process-command", "array"])
def test_frames_nested_900_deep_are_invalid_input(emb, frame):
    who, _ = new_user(emb)
    client = Client(emb, who)
    try:
        created = client.ok("session-create")
        pid = created["chatProcessId"]
        deep = _nested(900)
        if frame == "process-create":
            raw = {"type": frame, "id": "deep", "data": {"engine": "ford", "goal": "g",
                                                          "params": deep}}
        elif frame == "process-command":
            raw = {"type": frame, "id": "deep", "data": {"processId": pid, "command": "go",
                                                          "params": deep}}
        else:
            raw = json.loads("[" * 900 + "]" * 900)
        client.send_raw(json.dumps(raw))
        error = wait_for(lambda: client.sock.frames("error"))[0]
        assert error["data"]["code"] == "invalid_input", error
        assert f"nested more than {MAX_NESTING} deep" in error["data"]["message"]
        assert error.get("replyTo") == (None if frame == "array" else "deep")
        assert client.request("ping")["type"] == "ping"  # the connection stays usable
        processes = emb.brain.store.port(SessionStore).list_processes("acme",
                                                                       created["session"]["id"])
        assert [p.id for p in processes] == [pid]  # nothing stored
    finally:
        client.close()


def test_nesting_at_the_limit_works_one_deeper_is_refused(emb):
    who, _ = new_user(emb)
    client = Client(emb, who)
    try:
        pid = client.ok("session-create")["chatProcessId"]
        # The envelope is level 1, data 2, params 3 …: params nesting n levels make 2 + n.
        at_limit = client.request("process-command", processId=pid, command="noop",
                                  params=_nested(MAX_NESTING - 2))
        assert at_limit["type"] == "process-command", at_limit
        over = client.request("process-command", processId=pid, command="noop",
                              params=_nested(MAX_NESTING - 1))
        assert over["data"]["code"] == "invalid_input", over
    finally:
        client.close()


# ── sessions, processes, Inbox items (brain services: frames, REST and engines alike) ──

def _counts(emb, who: Principal) -> tuple[int, int]:
    store = emb.brain.store.port(SessionStore)
    sessions = list(every_session(store, "acme", who.user_id))
    return len(sessions), sum(len(store.list_processes("acme", s.id)) for s in sessions)


def test_sessions_per_user(emb):
    who, _ = new_user(emb)
    client = Client(emb, who)
    try:
        first = [client.ok("session-create", onDisconnect="KEEP_OPEN") for _ in range(3)]
        before = _counts(emb, who)
        message = client.refused("session-create", "limit_exceeded")
        assert "3 sessions that are not CLOSED" in message
        assert _counts(emb, who) == before == (3, 3)  # no session, no chat process
        # SUSPENDED ones count (they hold processes); a CLOSED one frees its place.
        client.ok("session-suspend", sessionId=first[0]["session"]["id"])
        client.refused("session-create", "limit_exceeded")
        client.ok("session-close", sessionId=first[1]["session"]["id"])
        wait_for(lambda: emb.brain.store.port(SessionStore).get_session(
            "acme", first[1]["session"]["id"]).status is SessionStatus.CLOSED)
        client.ok("session-create")
    finally:
        client.close()


def test_open_processes_per_session(emb):
    who, _ = new_user(emb)
    client = Client(emb, who)
    try:
        created = client.ok("session-create")  # its chat process is the first of three
        sid = created["session"]["id"]
        workers = [client.ok("process-create", engine="ford", goal=f"w{i}")["process"]["id"]
                   for i in range(2)]
        message = client.refused("process-create", "limit_exceeded", engine="ford", goal="w3")
        assert "3 open processes" in message
        assert len(emb.brain.store.port(SessionStore).list_processes("acme", sid)) == 3
        client.ok("process-stop", processId=workers[0])
        wait_for(lambda: emb.brain.store.port(SessionStore).get_process(
            "acme", workers[0]).status is ProcessStatus.CLOSED, what="the stop")
        client.ok("process-create", engine="ford", goal="w3")  # a CLOSED one frees its place
    finally:
        client.close()


def _call(tool: str, n: int, **args) -> ToolCall:
    return ToolCall(f"call_{tool}_{n}", tool, json.dumps(args))


def test_spawns_and_inbox_posts_over_the_cap_are_tool_errors_the_model_sees(emb):
    """Arthur (the chat process) asks for three workers in one turn and posts three Inbox
    items in the next: the session holds three open processes (chat + two), the process two
    PENDING items; each refusal is the call's error result, and the turns go on."""
    who, _ = new_user(emb)
    seen: list[str] = []  # every tool result Arthur's model was shown, once

    def model(messages, tools):
        if not any(t.name == "process_create" for t in tools):  # a worker
            return "done"
        seen.extend(m.content for m in messages if m.role == "tool" and m.content not in seen)
        last = messages[-1]
        if last.role == "tool":
            return LlmResponse("", (_call("respond", 9, message="noted"),))
        if last.content == "spawn":
            return LlmResponse("", tuple(_call("process_create", i, recipe="analyze",
                                               name=f"w{i}", goal="look") for i in range(3)))
        if last.content == "post":
            return LlmResponse("", tuple(_call("inbox_post", i, type="OUTPUT_TEXT",
                                               title=f"t{i}") for i in range(3)))
        return LlmResponse("", (_call("respond", 9, message="hi"),))

    emb.model = FunctionModel(model)
    session = emb.brain.sessions.create(who)
    store = emb.brain.store.port(SessionStore)
    wait_for(lambda: store.get_process("acme", session.chat_process_id).status
             is ProcessStatus.IDLE)
    emb.brain.sessions.steer(who, session.chat_process_id, "spawn")
    wait_for(lambda: len(seen) >= 3, timeout=15, what="three process_create results")
    emb.worker.join()
    workers = [p for p in store.list_processes("acme", session.id) if p.parent_process_id]
    assert sorted(p.name for p in workers) == ["w0", "w1"]
    refused = [r for r in seen if "open processes" in r]
    assert len(refused) == 1 and "error" in refused[0], seen
    emb.brain.sessions.steer(who, session.chat_process_id, "post")
    wait_for(lambda: len(seen) >= 6, timeout=15, what="three inbox_post results")
    posted = [r for r in seen[3:] if "PENDING Inbox items" in r]
    assert len(posted) == 1, seen[3:]
    chat = store.get_process("acme", session.chat_process_id)
    assert chat.status is not ProcessStatus.CLOSED


def test_pending_inbox_items_per_process(emb):
    who, _ = new_user(emb)
    session = emb.brain.sessions.create(who)
    inbox = emb.brain.inbox

    def post(key: str):
        return inbox.create("acme", who.user_id, NewItem(type=ItemType.APPROVAL, title=key,
                                                         idempotency_key=key),
                            origin_process_id=session.chat_process_id,
                            origin_session_id=session.id)

    first, _ = post("a")
    post("b")  # at the cap
    with pytest.raises(LimitExceeded, match="2 PENDING Inbox items"):
        post("c")
    again, created = post("a")  # a retry of a PENDING item is not one more
    assert (again.id, created) == (first.id, False)
    inbox.dismiss(who, first.id)
    post("c")  # a resolved item frees its place


def test_a_gateway_process_holding_its_most_sockets_refuses_the_upgrade(
        embedded, gateways, monkeypatch):
    """``VANCETOPE_MAX_SOCKETS``: one more upgrade is refused with 503 ``unavailable``
    before it becomes a socket; a socket that ends makes room again."""
    settled(gateways)
    (host, app), _ = gateways
    hub = app.extensions["vancetope.sockets"].hub
    monkeypatch.setattr(hub, "max_sockets", 1)
    _, token = new_user(embedded)
    ws = open_socket(host, token)
    try:
        status, body = handshake(host, token)
        assert (status, body["code"]) == (503, "unavailable"), body
        assert "VANCETOPE_MAX_SOCKETS" in body["message"]
    finally:
        ws.close()
    wait_for(lambda: not hub.full(), what="the hub to let go of the closed socket")
    open_socket(host, token).close()
