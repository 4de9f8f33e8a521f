"""An engine that raises fails its turn, not its process — unless it repeats
(``VANCETOPE_MAX_ENGINE_FAILURES``, 3 here): every message the turn read is answered, the
engine state stays as before the turn, a message sent meanwhile runs next; the third failed
turn in a row closes the process FAILED and answers whatever is still pending."""

from __future__ import annotations

import threading

from tests.helpers import wait_for
from vancetope_brain.engines.arthur import WELCOME
from vancetope_brain.llm import LlmMessage, ToolSpec
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus
from vancetope_brain.store import LaneStore, SessionStore


class Gate:
    """A model that raises on ``bad`` input; with ``hold`` set it first waits for ``go``,
    so the test can send a message while the failing turn runs."""

    def __init__(self) -> None:
        self.hold = False
        self.entered = threading.Event()
        self.go = threading.Event()

    def __call__(self, messages: list[LlmMessage], tools: list[ToolSpec]) -> str:
        last = next(m.content for m in reversed(messages) if m.role == "user")
        if last.startswith("bad"):
            if self.hold:
                self.entered.set()
                assert self.go.wait(10)
            raise ZeroDivisionError(f"engine bug on {last}")
        return f"echo: {last}"


def _process(emb, pid):
    return emb.brain.store.port(SessionStore).get_process("acme", pid)


def _chat(emb, pid):
    return emb.brain.store.port(LaneStore).chat_history("acme", pid, limit=1000)


def _settled(emb, pid, lines):
    """The chat once it has ``lines`` lines and the lane is at rest."""
    wait_for(lambda: len(_chat(emb, pid)) >= lines, what=f"{lines} chat lines")
    emb.worker.join()
    return _chat(emb, pid)


def _answered_once(emb):
    """A chat process on the ``Gate`` model that answered "hello": the gate, the process id
    and its engine state then."""
    gate = Gate()
    emb.model = FunctionModel(gate)
    pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id
    emb.brain.sessions.steer(emb.who, pid, "hello")
    _settled(emb, pid, 3)
    return gate, pid, _process(emb, pid).engine_state


def test_an_engine_error_fails_the_turn_and_the_process_goes_on(embedded):
    emb = embedded
    gate, pid, state = _answered_once(emb)
    gate.hold = True
    bad, _ = emb.brain.sessions.steer(emb.who, pid, "bad input")
    assert gate.entered.wait(10)
    meanwhile, _ = emb.brain.sessions.steer(emb.who, pid, "still there?")  # during that turn
    failed_turn = _process(emb, pid).epoch
    gate.go.set()
    lines = _settled(emb, pid, 7)
    assert [(x.role, x.content) for x in lines] == [
        (ChatRole.ASSISTANT, WELCOME), (ChatRole.USER, "hello"),
        (ChatRole.ASSISTANT, "echo: hello"), (ChatRole.USER, "bad input"),
        (ChatRole.ERROR, 'Your message "bad input" was not processed: this turn failed '
                         "(ZeroDivisionError: engine bug on bad input); the process goes on. "
                         "You can send it again."),
        (ChatRole.USER, "still there?"), (ChatRole.ASSISTANT, "echo: still there?")]
    assert lines[4].source_message_id == bad.id and lines[5].source_message_id == meanwhile.id
    records = emb.brain.store.port(LaneStore).turn_records("acme", pid)
    failed = next(r for r in records if r.epoch == failed_turn)
    assert (failed.drained_ids, failed.status_after) == ([bad.id], ProcessStatus.IDLE)
    process = _process(emb, pid)
    # The failure left the state as it was; the turn after it succeeded and reset the count.
    assert process.engine_state == {**state, "lastReply": "echo: still there?"}
    assert (process.status, process.engine_failures, process.last_error) == (
        ProcessStatus.IDLE, 0, None)


def test_repeated_engine_errors_close_the_process_and_answer_what_is_pending(embedded):
    emb = embedded
    gate, pid, state = _answered_once(emb)
    for n in (1, 2):
        emb.brain.sessions.steer(emb.who, pid, f"bad {n}")
        _settled(emb, pid, 3 + 2 * n)
        process = _process(emb, pid)
        assert (process.status, process.engine_failures, process.engine_state) == (
            ProcessStatus.IDLE, n, state)
        assert process.last_error == f"ZeroDivisionError: engine bug on bad {n}"
    gate.hold = True
    emb.brain.sessions.steer(emb.who, pid, "bad 3")
    assert gate.entered.wait(10)
    late, _ = emb.brain.sessions.steer(emb.who, pid, "anyone?")  # accepted during the 3rd
    gate.go.set()
    lines = _settled(emb, pid, 10)
    process = _process(emb, pid)
    assert (process.status, process.close_reason, process.engine_failures) == (
        ProcessStatus.CLOSED, CloseReason.FAILED, 3)
    failed = "the process failed 3 turns in a row, last: ZeroDivisionError: engine bug on bad 3."
    assert [(x.role, x.content) for x in lines[7:]] == [
        (ChatRole.USER, "bad 3"), (ChatRole.ERROR, f'Your message "bad 3" was not processed: '
                                                   f"{failed}"),
        (ChatRole.ERROR, 'Your message "anyone?" was not processed: the process had failed '
                         "(ZeroDivisionError: engine bug on bad 3).")]
    assert lines[-1].source_message_id == late.id
    assert not emb.brain.store.port(LaneStore).pending_messages("acme", pid)
    assert [t.lifecycle for t in emb.brain.store.port(LaneStore).turn_records("acme", pid)] == [
        "start", "steer", "steer", "steer", "steer", "answer"]


def test_a_line_the_provider_refuses_is_left_out_of_later_turns(embedded):
    """A content filter refuses the turn that brought a line (HTTP 400 from the fake
    OpenAI server for any request holding the marker): the line is committed marked as
    excluded, so the next turn's request does not carry it and is answered."""
    from tests.llm.fake_openai_server import Call, FakeOpenAiServer, HttpError, ToolCalls
    from vancetope_brain.engines.context import EXCLUDED
    from vancetope_brain.llm.openai_provider import OpenAiChatModel

    def respond(text: str) -> ToolCalls:
        return ToolCalls((Call("r", "respond", f'{{"message": "{text}", '
                                               '"awaiting_user_input": false}'),))

    emb = embedded
    with FakeOpenAiServer() as server:
        server.reject("FORBIDDEN", HttpError(400, "The response was filtered due to the prompt "
                                                  "triggering the content management policy.",
                                             code="content_filter"))
        server.script(respond("hi"), respond("fine"))
        emb.model = OpenAiChatModel("fake-model", api_key="sk-fake-0123456789", base_url=server.base_url,
                                    max_retries=0, timeout=5)
        pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id
        emb.brain.sessions.steer(emb.who, pid, "hello")
        _settled(emb, pid, 3)
        refused, _ = emb.brain.sessions.steer(emb.who, pid, "say FORBIDDEN things")
        lines = _settled(emb, pid, 6)
        emb.brain.sessions.steer(emb.who, pid, "something else")
        lines = _settled(emb, pid, 8)
        sent = [m["content"] for m in server.requests[-1].body["messages"]]
    assert [(x.role, x.content) for x in lines[3:]] == [
        (ChatRole.USER, "say FORBIDDEN things"),
        (ChatRole.ERROR, 'The model provider refused this turn\'s input ("say FORBIDDEN '
                         'things"); it is left out of what the model sees from now on, so '
                         "later messages are not refused for it."),
        (ChatRole.ERROR, lines[5].content),
        (ChatRole.USER, "something else"), (ChatRole.ASSISTANT, "fine")]
    assert lines[5].content.startswith("The model could not answer: ") and \
        "HTTP 400" in lines[5].content
    assert lines[3].source_message_id == refused.id
    assert lines[3].meta[EXCLUDED].startswith("llm_rejected: ")
    assert len(server.requests) == 3
    assert not any("FORBIDDEN" in (content or "") for content in sent)
    assert "hello" in sent and "something else" in sent
    assert _process(emb, pid).status is ProcessStatus.IDLE


def test_a_web_page_where_the_api_should_be_is_an_error_line_not_an_empty_reply(embedded):
    """A wrong base URL behind a proxy answers HTTP 200 with HTML: the user reads why in the
    error line every other endpoint failure gets, not an empty reply."""
    from tests.llm.fake_openai_server import FakeOpenAiServer, Raw
    from vancetope_brain.llm.openai_provider import OpenAiChatModel

    emb = embedded
    with FakeOpenAiServer() as server:
        server.script(Raw("<html><body>Welcome to nginx!</body></html>", "text/html"))
        emb.model = OpenAiChatModel("fake-model", base_url=server.base_url, max_retries=0,
                                    timeout=5)
        pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id
        emb.brain.sessions.steer(emb.who, pid, "hello")
        lines = _settled(emb, pid, 3)
    assert [x.role for x in lines] == [ChatRole.ASSISTANT, ChatRole.USER, ChatRole.ERROR]
    assert lines[2].content == (
        f"The model could not answer: LLM endpoint {server.base_url} (model fake-model) "
        "answered HTTP 200 with text/html instead of a completion stream (is the base URL the "
        "OpenAI-compatible API's, such as http://host/v1?)")
    assert len(server.requests) == 1
