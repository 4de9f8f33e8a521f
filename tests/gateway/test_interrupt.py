"""Stopping a reply (``process-interrupt``, issue 32 part 1) through a real WebSocket, with a
real OpenAI-compatible endpoint (the fake server) that streams slowly: the running model
call is cut at its next chunk, no token reaches the client more than 300 ms after the
frame, what was said is committed as the assistant's line marked ``interrupted``, and the
next message is answered normally."""

from __future__ import annotations

import json
import queue
import time

import pytest

from tests.conftest import Embedded
from tests.llm.fake_openai_server import Call, FakeOpenAiServer, Reply, Text, ToolCalls
from vancetope_brain.llm.openai_provider import OpenAiChatModel
from vancetope_gateway.chat_client import ChatClient

BOUND = 0.3
"""Seconds after the frame by which the last token must have arrived (issue 32)."""

LONG = " ".join(f"word{i}" for i in range(400))


def respond(message: str, *, fragments: int, pace: float = 0.0) -> ToolCalls:
    """A reply through ``respond`` whose message streams in ``fragments`` pieces."""
    arguments = json.dumps({"message": message, "awaiting_user_input": False})
    return ToolCalls((Call("c1", "respond", arguments),), fragments=fragments, pace=pace)


def answer(body: dict) -> Reply:
    """A server's answers for the clients' tests: ``talk long`` gets a long reply through
    ``respond``, a word every 50 ms; any other question a short one (a request without
    tools — a summary — plain text)."""
    if not body.get("tools"):
        return Text("Summary.")
    users = [m for m in body["messages"] if m["role"] == "user"]
    if users and users[-1]["content"] == "talk long":
        return respond(LONG, fragments=400, pace=0.05)
    return respond("A normal answer.", fragments=3)


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    emb = Embedded(tmp_path_factory.mktemp("embedded"))
    yield emb
    emb.stop()


@pytest.fixture
def terminal(emb, served):
    client = ChatClient(f"ws://{served}/ws", emb.brain.identity.issue_token("acme", "ada"))
    yield client
    client.close()


def _event(client: ChatClient, pid: str, timeout: float = 20) -> tuple[float, dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            frame = client.events.get(timeout=0.5)
        except queue.Empty:
            continue
        if frame["type"] == "event" and frame["data"]["processId"] == pid:
            return time.monotonic(), frame["data"]
    pytest.fail("no event in time")


def _reply(client: ChatClient, pid: str) -> tuple[list[tuple[float, dict]], dict]:
    """The events up to the next assistant (or error) line, and that line."""
    seen = []
    while True:
        at, event = _event(client, pid)
        seen.append((at, event))
        if event["type"] == "chat-message" and event["data"]["role"] in ("assistant", "error"):
            return seen, event["data"]


def test_stop_cuts_a_streaming_reply_and_the_next_question_is_answered(emb, terminal):
    with FakeOpenAiServer() as server:
        server.script(respond(LONG, fragments=400, pace=0.05),
                      respond("A normal answer.", fragments=3))
        emb.model = OpenAiChatModel("fake-model", api_key="sk-fake-0123456789",
                                    base_url=server.base_url, max_retries=0, timeout=10)
        pid = terminal.request("session-create", title="stop")["chatProcessId"]
        _reply(terminal, pid)  # the welcome
        terminal.request("process-steer", targetThinkProcessId=pid, content="talk long")
        tokens = 0
        while tokens < 5:  # the reply streams
            _, event = _event(terminal, pid)
            tokens += event["type"] == "token"
        sent = time.monotonic()
        answer = terminal.request("process-interrupt", processId=pid)
        assert answer["interrupted"] is True
        seen, line = _reply(terminal, pid)
        late = [at - sent for at, e in seen if e["type"] == "token" and at - sent > BOUND]
        assert not late, late
        assert line["role"] == "assistant" and line["meta"].get("interrupted") is True
        assert line["content"] and LONG.startswith(line["content"])
        assert len(line["content"]) < len(LONG) // 2  # cut, not finished
        status = terminal.request("process-status", processId=pid)["process"]
        assert status["status"] == "IDLE"

        terminal.request("process-steer", targetThinkProcessId=pid, content="and now?")
        _, line = _reply(terminal, pid)
        assert (line["content"], line["meta"].get("interrupted")) == ("A normal answer.", None)
        # The second turn saw the first one's cut reply and the new question, once each.
        last = server.requests[-1].body["messages"]
        users = [m["content"] for m in last if m["role"] == "user"]
        assert users[-2:] == ["talk long", "and now?"]
        assert len(server.requests) == 2


def test_interrupt_between_turns_stops_nothing(emb, terminal):
    with FakeOpenAiServer() as server:
        server.script(respond("First.", fragments=2), respond("Second.", fragments=2))
        emb.model = OpenAiChatModel("fake-model", api_key="sk-fake-0123456789",
                                    base_url=server.base_url, max_retries=0, timeout=10)
        pid = terminal.request("session-create", title="idle")["chatProcessId"]
        _reply(terminal, pid)  # the welcome
        terminal.request("process-steer", targetThinkProcessId=pid, content="one")
        _, line = _reply(terminal, pid)
        assert line["content"] == "First."
        emb.worker.join()
        assert terminal.request("process-interrupt", processId=pid)["interrupted"] is False
        terminal.request("process-steer", targetThinkProcessId=pid, content="two")
        _, line = _reply(terminal, pid)
        assert (line["content"], line["meta"].get("interrupted")) == ("Second.", None)
