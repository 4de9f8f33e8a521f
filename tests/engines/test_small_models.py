"""Arthur on a model that answers in plain text (issue 27 item 18): the real answer is kept,
not the model's reaction to the respond notice; a call the model wrote as text delegates; a
model without tool calling answers in plain text and Arthur says once what it cannot do."""

from __future__ import annotations

import json

from tests.engines.test_arthur import arthur_session, respond
from tests.helpers import wait_for
from tests.llm.fake_openai_server import FakeOpenAiServer, Text
from vancetope_brain.engines.arthur import NO_TOOLS, NOTICE
from vancetope_brain.llm import LlmResponse, ToolCall
from vancetope_brain.llm.openai_provider import OpenAiChatModel
from vancetope_brain.llm.testing import FunctionModel, ScriptedModel
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus
from vancetope_brain.store import LaneStore, SessionStore


def _chat(emb, pid: str) -> list[tuple[ChatRole, str]]:
    return [(m.role, m.content) for m in emb.brain.store.port(LaneStore).chat_history(
        "acme", pid)]


def _settled(emb, pid: str, lines: int) -> list[tuple[ChatRole, str]]:
    wait_for(lambda: len(_chat(emb, pid)) >= lines, timeout=20, what=f"{lines} chat lines")
    emb.worker.join()
    return _chat(emb, pid)


def test_the_first_plain_answer_is_the_reply_and_the_notice_leaves_no_trace(embedded):
    """What Qwen2.5-1.5B under llama.cpp did: the real answer in plain text, then, told to use
    respond, a refusal. The user reads the answer; the next turn's model input holds neither
    the notice nor the refusal."""
    model = ScriptedModel([LlmResponse("2 + 2 equals 4."),
                           LlmResponse("I'm sorry, but I can't assist with that."),
                           "3 + 3 equals 6."])
    embedded.model = model
    pid = arthur_session(embedded).chat_process_id
    embedded.brain.sessions.steer(embedded.who, pid, "what is 2+2?")
    lines = _settled(embedded, pid, 3)
    assert lines[1:] == [(ChatRole.USER, "what is 2+2?"), (ChatRole.ASSISTANT, "2 + 2 equals 4.")]
    assert model.calls[1].messages[-1].content == NOTICE  # it was asked once
    embedded.brain.sessions.steer(embedded.who, pid, "and 3+3?")
    assert _settled(embedded, pid, 5)[4] == (ChatRole.ASSISTANT, "3 + 3 equals 6.")
    seen = [(m.role, m.content) for m in model.calls[2].messages[1:]]
    assert seen[-3:] == [("user", "what is 2+2?"), ("assistant", "2 + 2 equals 4."),
                         ("user", "and 3+3?")]
    assert not any("sorry" in text or "vancetope-notice" in text for _, text in seen)


def test_a_plain_answer_after_tools_ran_is_the_reply(embedded):
    """Sent back, the model delegates (a call written as text, recognised by the provider:
    here a native one), then answers about it in plain text: that answer is the reply, not
    the plain answer from before the notice."""
    model = ScriptedModel([
        LlmResponse("Bicycles were invented in the 19th century."),
        LlmResponse("", (ToolCall("c1", "process_create", json.dumps(
            {"recipe": "analyze", "name": "bikes", "goal": "history of the bicycle"})),)),
        LlmResponse("I started a worker on the history of the bicycle."),
        "The worker is done."])  # Arthur, when the worker's report arrives
    embedded.model = FunctionModel(lambda messages, tools: respond("found it")
                                   if not any(t.name == "process_create" for t in tools)
                                   else model.complete(messages, tools=tools))
    pid = arthur_session(embedded).chat_process_id
    embedded.brain.sessions.steer(embedded.who, pid, "research the history of the bicycle")
    lines = _settled(embedded, pid, 4)
    assert lines[2][0] is ChatRole.TOOL and lines[2][1].startswith("process_create(")
    assert lines[3] == (ChatRole.ASSISTANT, "I started a worker on the history of the bicycle.")


def _written(tool: str, **arguments) -> Text:
    """A call as the small model writes it: fenced JSON text, streamed."""
    return Text(f"```json\n{json.dumps({'name': tool, 'arguments': arguments})}\n```", chunks=4)


def test_arthur_delegates_through_a_call_the_model_wrote_as_text(embedded):
    with FakeOpenAiServer() as server:
        server.script(
            _written("process_create", recipe="analyze", name="bikes",
                     goal="Research the history of the bicycle"),
            _written("respond", message="I started a worker on it."),
            _written("respond", message="The draisine came first, in 1817."),  # the worker
            _written("respond", message="Your worker reports: the draisine, 1817."))
        embedded.model = OpenAiChatModel("qwen", base_url=server.base_url, max_retries=0,
                                         timeout=10, text_tool_calls=True)
        session = arthur_session(embedded)
        pid = session.chat_process_id
        embedded.brain.sessions.steer(embedded.who, pid,
                                      "research the history of the bicycle")
        wait_for(lambda: (ChatRole.ASSISTANT, "Your worker reports: the draisine, 1817.")
                 in _chat(embedded, pid), timeout=30, what="Arthur relaying the report")
        embedded.worker.join()
        bodies = [r.body for r in server.requests]
    worker = next(p for p in embedded.brain.store.port(SessionStore).list_processes(
        "acme", session.id) if p.name == "bikes")
    assert (worker.recipe_name, worker.goal, worker.close_reason) == (
        "analyze", "Research the history of the bicycle", CloseReason.DONE)
    assert worker.engine_state["lastReply"] == "The draisine came first, in 1817."
    assistant = [text for role, text in _chat(embedded, pid) if role is ChatRole.ASSISTANT]
    assert assistant[1:] == ["I started a worker on it.",
                             "Your worker reports: the draisine, 1817."]
    assert len(bodies) == 4 and all("tools" in body for body in bodies)
    # The next step saw its call as a call, answered by the tool's result.
    assert bodies[1]["messages"][-2]["tool_calls"][0]["function"]["name"] == "process_create"
    assert bodies[1]["messages"][-1]["role"] == "tool"


def test_a_model_without_tool_calling_answers_in_plain_text_and_arthur_says_so_once(embedded):
    with FakeOpenAiServer() as server:
        server.script(Text("2 + 2 equals 4."), Text("3 + 3 equals 6."))
        embedded.model = OpenAiChatModel("tiny", base_url=server.base_url, max_retries=0,
                                         timeout=10, tool_calling=False)
        pid = arthur_session(embedded).chat_process_id
        embedded.brain.sessions.steer(embedded.who, pid, "what is 2+2?")
        _settled(embedded, pid, 4)
        embedded.brain.sessions.steer(embedded.who, pid, "and 3+3?")
        lines = _settled(embedded, pid, 6)
        assert not any("tools" in r.body for r in server.requests)
        assert len(server.requests) == 2  # never sent back for want of respond
    assert lines[1:] == [(ChatRole.USER, "what is 2+2?"), (ChatRole.SYSTEM, NO_TOOLS),
                         (ChatRole.ASSISTANT, "2 + 2 equals 4."), (ChatRole.USER, "and 3+3?"),
                         (ChatRole.ASSISTANT, "3 + 3 equals 6.")]
    process = embedded.brain.store.port(SessionStore).get_process("acme", pid)
    assert process.status is ProcessStatus.IDLE and process.engine_state["toldNoTools"]
