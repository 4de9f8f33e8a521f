"""Arthur end to end on the embedded runtime with a scripted model: the example flow of
arthur-engine §4, the respond rules, the context budget, and process hierarchies.
"""

from __future__ import annotations

import json
import threading

import pytest

from tests.helpers import wait_for
from vancetope_brain.llm import LlmResponse, ToolCall
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus
from vancetope_brain.store import LaneStore, SessionStore


def call(tool: str, **args) -> ToolCall:
    return ToolCall(f"call_{tool}_{len(json.dumps(args))}", tool, json.dumps(args))


def respond(message: str, awaiting: bool = False) -> LlmResponse:
    return LlmResponse("", (call("respond", message=message, awaiting_user_input=awaiting),))


def last_text(messages) -> str:
    return messages[-1].content


class Script:
    """A model for every process: Arthur (offered process_create) and workers (only respond)."""

    def __init__(self, arthur, worker) -> None:
        self.arthur, self.worker = arthur, worker
        self.inputs: dict[str, list] = {"arthur": [], "worker": []}
        self._lock = threading.Lock()

    def __call__(self, messages, tools):
        role = "arthur" if any(t.name == "process_create" for t in tools) else "worker"
        with self._lock:
            self.inputs[role].append(messages)
        return (self.arthur if role == "arthur" else self.worker)(messages, tools)


def spawn_worker(emb, worker, *, recipe: str = "analyze", goal: str = "look"):
    """A session whose Arthur, told "go", starts one worker named ``w`` of ``recipe`` that
    ``worker`` (a model function) drives; returns (session, w) once ``w`` exists."""
    def arthur(messages, tools):
        if messages[-1].role == "tool":
            return respond("started")
        if messages[-1].content == "go":
            return LlmResponse("", (call("process_create", recipe=recipe, name="w",
                                         goal=goal),))
        return respond("ok")

    emb.model = FunctionModel(Script(arthur, worker))
    session = emb.brain.sessions.create(emb.who)
    emb.brain.sessions.steer(emb.who, session.chat_process_id, "go")
    return session, wait_for(lambda: next((p for p in emb.brain.store.port(SessionStore).list_processes(
        "acme", session.id) if p.name == "w"), None), timeout=15, what="the worker")


def statuses(emb, session_id) -> dict[str, ProcessStatus]:
    return {p.name: p.status for p in emb.brain.store.port(SessionStore).list_processes("acme", session_id)}


def arthur_session(emb):
    session = emb.brain.sessions.create(emb.who, title="flow")
    wait_for(lambda: emb.brain.store.port(SessionStore).get_process("acme", session.chat_process_id).status
             is ProcessStatus.IDLE)
    return session


def test_the_example_flow(embedded):
    def arthur(messages, tools):
        text = last_text(messages)
        if messages[-1].role == "tool":
            result = json.loads(text)["result"]
            if "processId" in result:
                return respond("Started paper-diff; I'll tell you when it reports back.")
            return respond("Forwarded.")
        if text.startswith("Analyze"):
            return LlmResponse("", (call("process_create", recipe="analyze", name="paper-diff",
                                         goal="Analyze 5 PDFs for contradictions"),))
        if 'type="blocked"' in text:
            return respond("paper-diff asks: may it assume Vaswani2017 as baseline?",
                           awaiting=True)
        if text == "Yes, do it.":
            worker = next(p for p in embedded.brain.store.port(SessionStore).list_processes("acme", session.id)
                          if p.name == "paper-diff")
            return LlmResponse("", (call("process_steer", processId=worker.id,
                                         message="Yes, use Vaswani2017 as baseline"),))
        if 'type="done"' in text:
            return respond("paper-diff is finished: 3 contradictions found.")
        return respond("?")

    def worker(messages, tools):
        if "Vaswani2017 as baseline" in last_text(messages):
            return respond("3 contradictions found.")
        return respond("May I assume the paper Vaswani2017 as baseline?", awaiting=True)

    script = Script(arthur, worker)
    embedded.model = FunctionModel(script)
    session = arthur_session(embedded)
    pid = session.chat_process_id
    assert [m.content for m in embedded.brain.store.port(LaneStore).chat_history("acme", pid)] == [
        "Hi, I'm Arthur. How can I help?"]

    embedded.brain.sessions.steer(embedded.who, pid, "Analyze the 5 PDFs for contradictions")
    # Arthur relays the worker's question and waits for the user.
    wait_for(lambda: statuses(embedded, session.id) == {
        "chat": ProcessStatus.BLOCKED, "paper-diff": ProcessStatus.BLOCKED}, timeout=15)
    worker_doc = next(p for p in embedded.brain.store.port(SessionStore).list_processes("acme", session.id)
                      if p.name == "paper-diff")
    assert worker_doc.parent_process_id == pid and worker_doc.engine == "ford"
    assert worker_doc.recipe_name == "analyze" and worker_doc.recipe["name"] == "analyze"

    embedded.brain.sessions.steer(embedded.who, pid, "Yes, do it.")
    wait_for(lambda: statuses(embedded, session.id) == {
        "chat": ProcessStatus.IDLE, "paper-diff": ProcessStatus.CLOSED}, timeout=15)
    wait_for(lambda: embedded.brain.store.port(LaneStore).chat_history("acme", pid)[-1].content
             == "paper-diff is finished: 3 contradictions found.", timeout=15)
    worker_doc = embedded.brain.store.port(SessionStore).get_process("acme", worker_doc.id)
    assert worker_doc.close_reason is CloseReason.DONE

    lines = [(m.role, m.content) for m in embedded.brain.store.port(LaneStore).chat_history("acme", pid)
             if m.role is not ChatRole.TOOL]
    assert lines[0] == (ChatRole.ASSISTANT, "Hi, I'm Arthur. How can I help?")
    assert lines[1] == (ChatRole.USER, "Analyze the 5 PDFs for contradictions")
    assert lines[2] == (ChatRole.ASSISTANT, "Started paper-diff; I'll tell you when it reports back.")
    assert lines[3][0] is ChatRole.EVENT and 'type="blocked"' in lines[3][1]
    assert "Vaswani2017" in lines[3][1]
    assert lines[4] == (ChatRole.ASSISTANT,
                        "paper-diff asks: may it assume Vaswani2017 as baseline?")
    assert lines[5] == (ChatRole.USER, "Yes, do it.")
    assert lines[6] == (ChatRole.ASSISTANT, "Forwarded.")
    assert lines[7][0] is ChatRole.EVENT and 'type="done"' in lines[7][1]
    assert lines[8] == (ChatRole.ASSISTANT, "paper-diff is finished: 3 contradictions found.")
    worker_lines = [m.content for m in embedded.brain.store.port(LaneStore).chat_history("acme", worker_doc.id)]
    assert worker_lines[0] == "Analyze 5 PDFs for contradictions"
    assert "Yes, use Vaswani2017 as baseline" in worker_lines
    # Who wrote a user line: Arthur's relay names him, so no client shows it as the user's.
    relayed = next(m for m in embedded.brain.store.port(LaneStore).chat_history("acme", worker_doc.id)
                   if m.content == "Yes, use Vaswani2017 as baseline")
    assert relayed.meta["fromProcess"] == pid
    assert all("fromProcess" not in m.meta for m in embedded.brain.store.port(LaneStore).chat_history(
        "acme", pid) if m.role is ChatRole.USER)


def test_respond_must_stand_alone(embedded):
    seen = []

    def arthur(messages, tools):
        seen.append(messages)
        if messages[-1].role == "user":
            return LlmResponse("", (call("process_list"), call("respond", message="too early",
                                                                awaiting_user_input=False)))
        return respond("now alone")

    embedded.model = FunctionModel(Script(arthur, None))
    session = arthur_session(embedded)
    embedded.brain.sessions.steer(embedded.who, session.chat_process_id, "hi")
    wait_for(lambda: embedded.brain.store.port(LaneStore).chat_history("acme", session.chat_process_id)[-1].content
             == "now alone")
    second = seen[-1]
    tool_results = [m for m in second if m.role == "tool"]
    listed = json.loads(tool_results[0].content)["result"]
    assert [p["name"] for p in listed] == ["chat"]  # the work tool ran
    assert "respond must stand alone" in tool_results[1].content
    assert "too early" not in [m.content for m in embedded.brain.store.port(LaneStore).chat_history(
        "acme", session.chat_process_id)]


def test_the_model_input_never_exceeds_the_budget(embedded):
    from vancetope_brain.llm import budget

    sizes = []

    def arthur(messages, tools):
        sizes.append((budget.estimate(messages, tools), [m.content for m in messages]))
        return respond("ok " * 50)

    embedded.model = FunctionModel(Script(arthur, lambda messages, tools: ""))
    session = arthur_session(embedded)
    pid = session.chat_process_id
    for i in range(12):
        embedded.brain.sessions.steer(embedded.who, pid, f"message {i} " + "x" * 2000)
        wait_for(lambda i=i: len(sizes) == i + 1, timeout=10)
    maximum = 4096
    assert all(size <= 65536 for size, _ in sizes)  # the default arthur.maxContextTokens
    # With a small budget the oldest lines go and the note says so.
    _set(embedded, "arthur.maxContextTokens", maximum)
    embedded.brain.sessions.steer(embedded.who, pid, "last one")
    wait_for(lambda: len(sizes) == 13, timeout=10)
    size, contents = sizes[-1]
    assert size <= maximum
    assert contents[1] == "Earlier conversation was truncated."
    assert contents[-1] == "last one"
    assert not any(c.startswith("message 0 ") for c in contents)


def test_a_budget_too_small_for_the_prompt_and_tools_says_what_to_change(embedded):
    calls = []

    def arthur(messages, tools):
        calls.append(messages)
        return respond("ok")

    embedded.model = FunctionModel(Script(arthur, lambda messages, tools: ""))
    session = arthur_session(embedded)
    pid = session.chat_process_id
    _set(embedded, "arthur.maxContextTokens", 1024)  # the least allowed
    embedded.brain.sessions.steer(embedded.who, pid, "hello")
    lanes = embedded.brain.store.port(LaneStore)
    wait_for(lambda: any(line.role is ChatRole.ERROR for line in lanes.chat_history("acme", pid)),
             timeout=10)
    error = next(line.content for line in lanes.chat_history("acme", pid)
                 if line.role is ChatRole.ERROR)
    assert "raise arthur.maxContextTokens" in error and "(1024)" in error, error
    assert "the process goes on" in error and not calls
    _set(embedded, "arthur.maxContextTokens", 65536)  # raised: the next message is answered
    embedded.brain.sessions.steer(embedded.who, pid, "again")
    wait_for(lambda: lanes.chat_history("acme", pid, limit=1)[0].content == "ok", timeout=10)


def _set(emb, key, value):
    from vancetope_brain.models.settings import SettingScope

    emb.brain.settings.set("acme", SettingScope.tenant(), key, value)


@pytest.mark.parametrize("middle_is_stopped_by", ["arthur-tool", "user"])
def test_stopping_the_middle_of_three_levels_stops_the_bottom_and_tells_the_top(
        embedded, middle_is_stopped_by):
    def arthur(messages, tools):
        text = last_text(messages)
        if messages[-1].role == "tool":
            return respond("ok")
        if text == "spawn":
            return LlmResponse("", (call("process_create", engine="arthur", name="middle",
                                         goal="coordinate"),))
        if text.startswith("stop "):
            return LlmResponse("", (call("process_stop", processId=text[5:]),))
        if text == "coordinate" or "coordinate" in text:
            return LlmResponse("", (call("process_create", recipe="analyze", name="bottom",
                                         goal="dig"),))
        return respond("noted")

    def worker(messages, tools):
        return respond("a question?", awaiting=True)

    embedded.model = FunctionModel(Script(arthur, worker))
    session = arthur_session(embedded)
    top = session.chat_process_id
    embedded.brain.sessions.steer(embedded.who, top, "spawn")
    wait_for(lambda: statuses(embedded, session.id).get("bottom") is ProcessStatus.BLOCKED,
             timeout=15)
    middle = next(p for p in embedded.brain.store.port(SessionStore).list_processes("acme", session.id)
                  if p.name == "middle")
    if middle_is_stopped_by == "user":
        from vancetope_brain.models.lifecycle import LifecycleCall

        embedded.brain.sessions.control(embedded.who, middle.id, LifecycleCall.STOP)
    else:
        embedded.brain.sessions.steer(embedded.who, top, f"stop {middle.id}")
    wait_for(lambda: statuses(embedded, session.id).get("bottom") is ProcessStatus.CLOSED,
             timeout=15)
    assert statuses(embedded, session.id)["middle"] is ProcessStatus.CLOSED
    wait_for(lambda: any('type="stopped"' in m.content and middle.id in m.content
                         for m in embedded.brain.store.port(LaneStore).chat_history("acme", top)), timeout=15)


def test_a_stop_reaches_the_levels_beneath_a_middle_level_that_already_failed(embedded):
    """Arthur → a → b → c, and b has failed (CLOSED) while c still waits: b runs no stop turn
    that would carry a's stop further, so stopping a must stop c itself."""
    from vancetope_brain.models.lifecycle import LifecycleCall

    def arthur(messages, tools):
        text = last_text(messages)
        if messages[-1].role == "tool":
            return respond("ok")
        if text == "spawn":
            return LlmResponse("", (call("process_create", engine="arthur", name="a",
                                         goal="level a"),))
        if text == "level a":
            return LlmResponse("", (call("process_create", engine="arthur", name="b",
                                         goal="level b"),))
        if text == "level b":
            return LlmResponse("", (call("process_create", recipe="analyze", name="c",
                                         goal="dig"),))
        if 'type="blocked"' in text and "You are a Sub-Arthur" in messages[0].content \
                and "level b" in [m.content for m in messages if m.role == "user"][0]:
            raise RuntimeError("b's model broke")  # b fails: CLOSED/FAILED, c stays open
        if 'type="failed"' in text:  # a asks its parent what now (and so stays open)
            return respond("b failed; what now?", awaiting=True)
        return respond("noted")

    embedded.model = FunctionModel(Script(arthur, lambda messages, tools: respond(
        "a question?", awaiting=True)))
    session = arthur_session(embedded)
    embedded.brain.sessions.steer(embedded.who, session.chat_process_id, "spawn")
    processes = embedded.brain.store.port(SessionStore)

    def by_name():
        return {p.name: p for p in processes.list_processes("acme", session.id)}

    wait_for(lambda: by_name().get("b") is not None and by_name()["b"].status
             is ProcessStatus.CLOSED, timeout=15, what="b failing")
    assert by_name()["b"].close_reason is CloseReason.FAILED
    assert by_name()["c"].status is ProcessStatus.BLOCKED
    wait_for(lambda: by_name()["a"].status is ProcessStatus.BLOCKED, timeout=15)
    embedded.brain.sessions.control(embedded.who, by_name()["a"].id, LifecycleCall.STOP)
    wait_for(lambda: by_name()["c"].status is ProcessStatus.CLOSED, timeout=15,
             what="the stop reaching c beneath the failed b")
    found = by_name()
    assert [(found[n].status, found[n].close_reason) for n in "abc"] == [
        (ProcessStatus.CLOSED, CloseReason.STOPPED), (ProcessStatus.CLOSED, CloseReason.FAILED),
        (ProcessStatus.CLOSED, CloseReason.STOPPED)]


def test_a_long_chat_is_read_back_only_as_far_as_the_budget_reaches(embedded, monkeypatch):
    """Here summarising fails (the model answers it with nothing): truncation as before
    summaries (``test_history_summary.py`` has them working)."""
    from vancetope_brain.engines.context import HISTORY_PAGE
    from vancetope_brain.engines.history import TRUNCATED
    from vancetope_brain.engines.prompting import conversation
    from vancetope_brain.llm import LlmMessage, budget
    from vancetope_brain.store.sqlite.lanes import SqliteLanes

    calls = []

    def arthur(messages, tools):
        calls.append((messages, tools))
        return respond("ok")

    embedded.model = FunctionModel(Script(arthur, lambda messages, tools: ""))
    session = arthur_session(embedded)
    pid = session.chat_process_id
    lanes = embedded.brain.store.port(LaneStore)
    sent = 3 * HISTORY_PAGE // 2  # a chat of more than one page of lines
    for i in range(sent):
        embedded.brain.sessions.steer(embedded.who, pid, f"m{i} " + "x" * 100)
    wait_for(lambda: sum(line.role is ChatRole.USER for line in lanes.chat_history(
        "acme", pid, limit=10_000)) == sent and embedded.brain.store.port(
        SessionStore).get_process("acme", pid).status is ProcessStatus.IDLE, timeout=120)
    _set(embedded, "arthur.maxContextTokens", 4096)
    reads = []
    read = SqliteLanes.chat_history

    def counted(self, *args, **kwargs):
        lines = read(self, *args, **kwargs)
        reads.append(len(lines))
        return lines

    monkeypatch.setattr(SqliteLanes, "chat_history", counted)
    turns = len(calls)
    embedded.brain.sessions.steer(embedded.who, pid, "last one")
    wait_for(lambda: [line.content for line in lanes.chat_history("acme", pid, limit=2)]
             == ["last one", "ok"], timeout=60)  # the turn committed
    monkeypatch.undo()
    assert len(calls) == turns + 1
    messages, tools = calls[-1]
    # What the model saw is what the whole chat gives under the budget …
    before_reply = lanes.chat_history("acme", pid, limit=10_000)[:-1]
    expected = budget.fit(messages[:1], conversation(before_reply), tools, 4096,
                          LlmMessage("system", TRUNCATED))
    assert [m.content for m in messages] == [m.content for m in expected]
    assert messages[1].content == TRUNCATED and messages[-1].content == "last one"
    # … but the turn read what the budget and a summarising call can use (two pages
    # here), not the whole chat.
    assert reads and max(reads) <= HISTORY_PAGE and sum(reads) <= 2 * HISTORY_PAGE < 2 * sent
