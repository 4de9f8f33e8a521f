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
from tests.helpers import inspected
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
        server.script(ToolCalls((Call("t1", "process_list", "{}"),)),
                      respond(LONG, fragments=400, pace=0.05),
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
        assert [c.split(" → ")[0] for c in line["meta"]["toolCalls"]] == ["process_list({})"]
        assert line["content"] and LONG.startswith(line["content"])
        assert len(line["content"]) < len(LONG) // 2  # cut, not finished
        status = terminal.request("process-status", processId=pid)["process"]
        assert status["status"] == "IDLE"
        # The cut call was still a call: the inspector shows it, its usage counts it (estimated:
        # a cut stream reports none).
        inspected(emb.brain.store, "acme", line["meta"]["turn"])  # written after the events
        record = terminal.request("turn-get", turnId=line["meta"]["turn"])["turn"]
        calls = [s for s in record["steps"] if s["kind"] == "model"]
        assert [c["finishReason"] for c in calls] == ["tool_calls", "interrupted"]
        assert (calls[1]["usageSource"], calls[1]["tokensOut"] > 0) == ("estimated", True)
        assert line["content"] in json.dumps(calls[1]["output"])
        usage = terminal.request("usage", sessionId=status["sessionId"])["session"]
        assert usage["calls"] == 2 and usage["tokensOut"] >= calls[1]["tokensOut"]

        terminal.request("process-steer", targetThinkProcessId=pid, content="and now?")
        _, next_line = _reply(terminal, pid)
        assert (next_line["content"], next_line["meta"].get("interrupted")) == \
            ("A normal answer.", None)
        # The second turn saw the first one's question, its cut reply — stopped, after a
        # tool call it must not repeat — and the new question.
        last = server.requests[-1].body["messages"]
        assert [m["role"] for m in last[-3:]] == ["user", "assistant", "user"]
        assert [last[-3]["content"], last[-1]["content"]] == ["talk long", "and now?"]
        cut = last[-2]["content"]
        assert cut.startswith(line["content"] + "\n[The user stopped this reply here.")
        assert "Tool calls already made in it" in cut and "process_list({})" in cut
        assert len(server.requests) == 3


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


def test_regenerate_asks_again_with_the_same_input_and_keeps_the_earlier_attempt(emb, terminal):
    """Issue 32 part 1, regenerate: ``process-command regenerate`` (the web client's button,
    ``/again``) asks the model again with exactly the input of the reply it replaces (a new
    turn: the earlier completion is not replayed); the earlier attempt stays in the chat,
    and later turns' model sees only the new reply."""
    with FakeOpenAiServer() as server:
        server.script(respond("First try.", fragments=2), respond("Second try.", fragments=2),
                      respond("Third.", fragments=2))
        emb.model = OpenAiChatModel("fake-model", api_key="sk-fake-0123456789",
                                    base_url=server.base_url, max_retries=0, timeout=10)
        pid = terminal.request("session-create", title="again")["chatProcessId"]
        _reply(terminal, pid)  # the welcome
        terminal.request("process-steer", targetThinkProcessId=pid, content="hello")
        _, first = _reply(terminal, pid)
        asked = first["seq"] - 1
        terminal.request("process-command", processId=pid, command="regenerate")
        _, second = _reply(terminal, pid)
        assert (second["content"], second["meta"]["again"]) == ("Second try.", asked)
        assert set(second["meta"]) == {"again", "turn"}  # and the link to its turn's record
        first_input, second_input = (r.body["messages"] for r in server.requests[:2])
        assert second_input == first_input  # the same input, asked anew
        lines = terminal.request("chat-history", processId=pid)["messages"]
        assert [(m["role"], m["content"]) for m in lines[-3:]] == [
            ("user", "hello"), ("assistant", "First try."), ("assistant", "Second try.")]

        terminal.request("process-steer", targetThinkProcessId=pid, content="and?")
        _, third = _reply(terminal, pid)
        assert third["content"] == "Third."
        seen = [m["content"] for m in server.requests[2].body["messages"]]
        assert "Second try." in seen and "First try." not in seen
        assert len(server.requests) == 3


def test_regenerate_with_no_reply_to_ask_again_says_so(emb, terminal):
    pid = terminal.request("session-create", title="nothing")["chatProcessId"]
    _reply(terminal, pid)  # the welcome: not a reply to a message of the user's
    terminal.request("process-command", processId=pid, command="regenerate")
    _, line = _reply(terminal, pid)
    assert line["role"] == "error" and line["content"].startswith("Nothing to ask again")
