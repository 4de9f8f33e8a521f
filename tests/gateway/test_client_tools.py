"""Client-side tools round-trip through a real WebSocket client: registration, the tool-call
frame, the tool-result frame, and clear errors when no client offers the tool.
"""

from __future__ import annotations

import json
import threading

import pytest

from tests.helpers import wait_for
from vancetope_brain.engines import ENGINES, ThinkEngine
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ChatRole
from vancetope_brain.store import LaneStore, SessionStore
from vancetope_gateway.chat_client import WebSocketClient


class ToolCaller(ThinkEngine):
    """Calls the tool named in each message and writes what came back into its chat."""

    name = "test-tool-caller"
    title = "Tool caller"
    description = "test engine"
    allowed_tools = frozenset({"local_*"})

    def steer(self, process, context):
        for m in context.drain_pending():
            outcome = context.tools().invoke(m.message.content, {"text": "ping"})
            context.chat().append(ChatRole.ASSISTANT,
                                  f"{outcome.status.value}: {outcome.result or outcome.error}",
                                  source=m)


if ENGINES.find(ToolCaller.name) is None:
    ENGINES.register(ToolCaller)


@pytest.fixture(scope="module")
def url(embedded, served):
    embedded.model = FunctionModel(lambda m, t: "unused")
    return f"ws://{served}/ws?token={embedded.brain.identity.issue_token('acme', 'ada')}"


class Peer:
    """A WebSocket client that answers tool calls with a function."""

    def __init__(self, url: str, answer) -> None:
        self.ws = WebSocketClient.connect(url)
        self.answer = answer
        self.replies: dict[str, dict] = {}
        self.calls: list[dict] = []
        self._n = 0
        json.loads(self.ws.receive(timeout=5))  # welcome
        json.loads(self.ws.receive(timeout=5))  # inbox-pending-summary
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def request(self, frame_type: str, **data) -> dict:
        self._n += 1
        rid = str(self._n)
        self.ws.send(json.dumps({"type": frame_type, "id": rid, "data": data}))
        return wait_for(lambda: self.replies.get(rid), what=f"reply to {frame_type}")

    def _read(self) -> None:
        try:
            while True:
                frame = json.loads(self.ws.receive())
                if frame.get("replyTo"):
                    self.replies[frame["replyTo"]] = frame
                elif frame["type"] == "tool-call":
                    self.calls.append(frame["data"])
                    status, result = self.answer(frame["data"])
                    self._n += 1
                    self.ws.send(json.dumps({"type": "tool-result", "id": f"t{self._n}", "data": {
                        "toolCallId": frame["data"]["toolCallId"], "status": status,
                        "result": result, "error": None if status == "success" else result}}))
        except Exception:
            return

    def close(self) -> None:
        self.ws.close()


def _last_line(emb, pid, n):
    return wait_for(lambda: (h := emb.brain.store.port(LaneStore).chat_history("acme", pid)) and len(h) >= n
                    and h[n - 1].content, what=f"{n} chat lines")


def test_a_client_tool_round_trips(embedded, url):
    peer = Peer(url, lambda call: ("success", {"echo": call["params"]["text"]}))
    try:
        peer.request("session-create", type="AUTONOMOUS", onDisconnect="KEEP_OPEN")
        registered = peer.request("client-tools-register", tools=[{
            "name": "local_echo", "description": "echo on the user's machine",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
            "safety": "SAFE_PROBE"}])
        assert registered["data"] == {"registered": 1}
        pid = peer.request("process-create", engine=ToolCaller.name)["data"]["process"]["id"]
        peer.request("process-steer", targetThinkProcessId=pid, content="local_echo")
        assert _last_line(embedded, pid, 1) == "success: {'echo': 'ping'}"
        assert [c["toolName"] for c in peer.calls] == ["local_echo"]
        assert peer.calls[0]["params"] == {"text": "ping"}
        # A tool the client does not offer, and one outside the engine's pool.
        peer.request("process-steer", targetThinkProcessId=pid, content="local_missing")
        assert "no server tool, connected client or MCP server offers it" in _last_line(
            embedded, pid, 2)
        # A client's own error becomes an error result.
        peer.answer = lambda call: ("error", "disk full")
        peer.request("process-steer", targetThinkProcessId=pid, content="local_echo")
        assert _last_line(embedded, pid, 3) == "error: disk full"
    finally:
        peer.close()


def test_with_no_client_bound_the_call_fails_clearly(embedded, url):
    peer = Peer(url, lambda call: ("success", "unused"))
    try:
        peer.request("session-create", type="AUTONOMOUS", onDisconnect="KEEP_OPEN")
        peer.request("client-tools-register", tools=[{"name": "local_echo"}])
        pid = peer.request("process-create", engine=ToolCaller.name)["data"]["process"]["id"]
    finally:
        peer.close()
    wait_for(lambda: not embedded.brain.redis.hgetall(f"vt:client-tools:{_session(embedded, pid)}"),
             what="registration dropped with the connection")
    embedded.brain.sessions.steer(embedded.who, pid, "local_echo")
    assert "needs the user's client to be connected" in _last_line(embedded, pid, 1)


def test_a_tool_result_for_a_call_never_sent_is_refused(embedded, url):
    peer = Peer(url, lambda call: ("success", None))
    try:
        peer.request("session-create")
        refused = peer.request("tool-result", toolCallId="tc_forged", status="success",
                               result=1)
        assert refused["type"] == "error" and refused["data"]["code"] == "not_found"
        bad = peer.request("client-tools-register", tools=[{"name": "has space"}])
        assert bad["data"]["code"] == "invalid_input"
    finally:
        peer.close()


def _session(emb, pid):
    return emb.brain.store.port(SessionStore).get_process("acme", pid).session_id
