"""The real Flask/flask-sock server in a thread: REST endpoints, authentication before the
upgrade, and the frame-size limit enforced by the socket (close 1009).
"""

from __future__ import annotations

import http.client
import json

import pytest
from simple_websocket import ConnectionClosed

from tests.gateway.wire import Client as FramesClient
from tests.gateway.wire import http_get
from tests.helpers import wait_for
from vancetope_brain.errors import StoreError
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.store import LaneStore, SessionStore
from vancetope_gateway.chat_client import WebSocketClient


@pytest.fixture(scope="module")
def server(embedded, served):
    return served, embedded.brain.identity.issue_token("acme", "ada")


def test_health_ready_and_engines(server, embedded, monkeypatch):
    host, token = server
    assert http_get(f"http://{host}/healthz") == (200, {"status": "ok"})
    # The embedded worker consumes every lane queue (its heartbeat: lanes/consumers.py).
    assert http_get(f"http://{host}/readyz") == (200, {"status": "ready",
                                                       "workers": ["embedded@localhost"]})
    status, body = http_get(f"http://{host}/think-engines")
    assert (status, body["code"]) == (401, "unauthorized")
    status, body = http_get(f"http://{host}/think-engines", token)
    assert status == 200 and "ford" in [e["name"] for e in body["engines"]]

    def broken() -> None:
        raise StoreError("disk on fire")

    monkeypatch.setattr(embedded.brain.store, "ping", broken)
    status, body = http_get(f"http://{host}/readyz")
    assert status == 503 and body["failures"] == {"store": "disk on fire"}


@pytest.mark.parametrize("token", [None, "vt_wrong", "not-even-the-format"])
def test_websocket_refused_before_upgrade_without_a_valid_token(server, token):
    host, _ = server
    connection = http.client.HTTPConnection(host, timeout=5)
    headers = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        connection.request("GET", "/ws", headers=headers)
        response = connection.getresponse()
        assert response.status == 401
        assert json.loads(response.read())["code"] == "unauthorized"
    finally:
        connection.close()


def test_oversized_frame_closes_with_1009_and_stores_nothing(server, embedded):
    host, token = server
    embedded.model = FunctionModel(lambda m, t: "ok")
    ws = WebSocketClient.connect(f"ws://{host}/ws?token={token}")
    try:
        welcome = json.loads(ws.receive(timeout=5))
        limit = welcome["data"]["maxFrameBytes"]
        assert json.loads(ws.receive(timeout=5))["type"] == "inbox-pending-summary"
        # KEEP_OPEN: the socket closing must not suspend the chat process awaited below.
        ws.send(json.dumps({"type": "session-create", "id": "1",
                            "data": {"onDisconnect": "KEEP_OPEN"}}))
        reply = json.loads(ws.receive(timeout=5))
        pid = reply["data"]["chatProcessId"]
        with pytest.raises(ConnectionClosed) as closed:
            ws.send(json.dumps({"type": "process-steer", "id": "2", "data": {
                "targetThinkProcessId": pid, "content": "x" * (limit + 10)}}))
            while True:
                ws.receive(timeout=5)
        assert closed.value.reason == 1009
    finally:
        if ws.connected:
            ws.close()
    assert embedded.brain.store.port(LaneStore).pending_messages("acme", pid) == []
    wait_for(lambda: embedded.brain.store.port(SessionStore).get_process("acme", pid).status.value == "IDLE")
    assert [m.role.value for m in embedded.brain.store.port(LaneStore).chat_history("acme", pid)] == [
        "assistant"]  # Arthur's welcome only


def test_rest_read_endpoints(server, embedded):
    host, token = server
    embedded.model = FunctionModel(lambda m, t: "ok")
    session = embedded.brain.sessions.create_interactive(embedded.who, "rest")
    pid = session.chat_process_id
    embedded.brain.sessions.steer(embedded.who, pid, "hello")
    wait_for(lambda: len(embedded.brain.store.port(LaneStore).chat_history("acme", pid)) == 3)  # + welcome
    status, body = http_get(f"http://{host}/sessions", token)
    assert status == 200 and session.id in [s["id"] for s in body["sessions"]]
    status, body = http_get(f"http://{host}/sessions/{session.id}", token)
    assert status == 200 and body["session"]["chatProcessId"] == pid
    assert [p["id"] for p in body["processes"]] == [pid]
    status, body = http_get(f"http://{host}/sessions/{session.id}/processes", token)
    assert [p["id"] for p in body["processes"]] == [pid]
    status, body = http_get(f"http://{host}/processes/{pid}", token)
    assert body["process"]["engine"] == "arthur"
    status, body = http_get(f"http://{host}/processes/{pid}/chat?limit=1", token)
    assert [m["content"] for m in body["messages"]] == ["ok"]
    status, body = http_get(f"http://{host}/processes/{pid}/chat?beforeSeq=3", token)
    assert [m["content"] for m in body["messages"]][-1] == "hello"


def test_a_service_process_is_in_no_user_list_rest_or_frame(server, embedded):
    """A process of a ``service`` recipe never shows in a user's lists (think-engines §7b),
    even in the user's own session (written straight to the store: the spawner refuses it)."""
    host, token = server
    embedded.model = FunctionModel(lambda m, t: "ok")
    session = embedded.brain.sessions.create_interactive(embedded.who, "hidden")
    service = embedded.brain.store.port(SessionStore).get_process(
        "acme", session.chat_process_id).model_copy(update={
            "id": "proc_service_in_user_session", "name": "agrajag",
            "recipe": {"name": "agrajag", "engine": "agrajag", "category": "service",
                       "source": "bundled"}})
    embedded.brain.store.port(SessionStore).create_process(service)
    for path in (f"/sessions/{session.id}/processes?all=true", f"/sessions/{session.id}"):
        status, body = http_get(f"http://{host}{path}", token)
        assert status == 200 and [p["id"] for p in body["processes"]] == [
            session.chat_process_id]
    # The frames: process-list answers from the same SessionService.processes.
    client = FramesClient(embedded, embedded.who)
    try:
        assert [p["id"] for p in client.ok("process-list", sessionId=session.id, all=True)[
            "processes"]] == [session.chat_process_id]
    finally:
        client.close()


@pytest.mark.parametrize(("path", "status", "code"), [
    ("/sessions/ses_nope", 404, "not_found"),
    ("/processes/proc_nope/chat", 404, "not_found"),
    ("/processes/x/chat?limit=0", 400, "invalid_input"),
    ("/processes/x/chat?beforeSeq=abc", 400, "invalid_input"),
    ("/sessions?limit=201", 400, "invalid_input"),
    ("/sessions?status=ASLEEP", 400, "invalid_input"),
    ("/sessions?cursor=not-a-cursor", 400, "invalid_input"),
])
def test_rest_refusals(server, path, status, code):
    host, token = server
    assert http_get(f"http://{host}{path}", token)[0] == status
    assert http_get(f"http://{host}{path}", token)[1]["code"] == code
    assert http_get(f"http://{host}{path}")[0] == 401
