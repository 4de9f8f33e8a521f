"""A reply given through ``respond`` streams from a real OpenAI-compatible endpoint: its
``message`` argument reaches a WebSocket client as ``token`` events while the call streams,
and a plain-text attempt that Arthur sends back is voided by ``stream-reset``."""

from __future__ import annotations

import json
import queue
import time

import pytest

from tests.conftest import Embedded
from tests.llm.fake_openai_server import Call, FakeOpenAiServer, Text, ToolCalls
from vancetope_brain.llm.openai_provider import OpenAiChatModel
from vancetope_gateway.chat_client import ChatClient

MESSAGE = "Hello Ada — here is a reply that streams: \"quoted\", and a second line.\nDone."


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    """Tokens published one by one (``VANCETOPE_TOKEN_FLUSH_MS=0``): the fake server sends
    its chunks within a few ms, which the worker would otherwise merge into fewer events."""
    emb = Embedded(tmp_path_factory.mktemp("embedded"), VANCETOPE_TOKEN_FLUSH_MS="0")
    yield emb
    emb.stop()


@pytest.fixture
def terminal(emb, served):
    client = ChatClient(f"ws://{served}/ws", emb.brain.identity.issue_token("acme", "ada"))
    yield client
    client.close()


def _events_until_reply(client: ChatClient, pid: str, after_user: str) -> list[dict]:
    """The chat process's events up to the assistant line that follows ``after_user``."""
    seen: list[dict] = []
    asked = False
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            frame = client.events.get(timeout=1)
        except queue.Empty:
            continue
        if frame["type"] != "event" or frame["data"]["processId"] != pid:
            continue
        event = frame["data"]
        seen.append(event)
        if event["type"] == "chat-message":
            line = event["data"]
            asked = asked or (line["role"] == "user" and line["content"] == after_user)
            if asked and line["role"] in ("assistant", "error"):
                return seen
    pytest.fail(f"no reply in time; events: {[e['type'] for e in seen]}")


def test_a_respond_call_streams_its_message_and_a_sent_back_attempt_is_reset(emb, terminal):
    arguments = json.dumps({"message": MESSAGE, "awaiting_user_input": False})
    with FakeOpenAiServer() as server:
        server.script(Text("Reply 0, in plain text.", chunks=3),
                      ToolCalls((Call("c1", "respond", arguments),), fragments=8))
        emb.model = OpenAiChatModel("fake-model", api_key="sk-fake-0123456789",
                                    base_url=server.base_url, max_retries=0, timeout=5)
        created = terminal.request("session-create", title="stream")
        pid = created["chatProcessId"]
        terminal.request("process-steer", targetThinkProcessId=pid, content="hello")
        events = _events_until_reply(terminal, pid, "hello")

    kinds = [e["type"] for e in events if e["type"] in ("token", "stream-reset")]
    resets = [i for i, kind in enumerate(kinds) if kind == "stream-reset"]
    assert len(resets) == 1, kinds
    streamed = [e for e in events if e["type"] in ("token", "stream-reset")]
    attempt = "".join(e["data"]["text"] for e in streamed[:resets[0]])
    assert attempt == "Reply 0, in plain text."
    assert streamed[resets[0]]["data"] == {"reason": "respond-required"}
    reply_tokens = [e["data"]["text"] for e in streamed[resets[0] + 1:]]
    assert len(reply_tokens) >= 4, reply_tokens  # streamed as the arguments came, not at once
    final = [e["data"] for e in events if e["type"] == "chat-message"][-1]
    assert (final["role"], final["content"]) == ("assistant", MESSAGE)
    assert "".join(reply_tokens) == MESSAGE
    # The tokens came before the committed line, in order.
    assert max(e["seq"] for e in events if e["type"] == "token") < events[-1]["seq"]
