"""With no endpoint configured, the offline demo model still shows delegation: asked for a
piece of work, Arthur starts a fitting worker (by keywords) and later relays its result."""

from __future__ import annotations

import json

import pytest

from tests.helpers import wait_for
from vancetope_brain.engines.prompting import event_text
from vancetope_brain.llm import LlmMessage, ToolCall, ToolSpec, demo
from vancetope_brain.llm.demo import DemoModel
from vancetope_brain.models import ChatRole, CloseReason, ProcessEvent, ProcessStatus
from vancetope_brain.models.inbox import ItemStatus, Outcome
from vancetope_brain.models.steer import ProcessEventType
from vancetope_brain.store import LaneStore, SessionStore


def test_arthur_on_the_demo_model_delegates_and_relays(embedded):
    embedded.model = DemoModel()
    session = embedded.brain.sessions.create(embedded.who)
    pid = session.chat_process_id
    embedded.brain.sessions.steer(embedded.who, pid, "Please analyze the quarterly numbers")

    def relayed():
        lines = embedded.brain.store.port(LaneStore).chat_history("acme", pid)
        return [m.content for m in lines if m.role is ChatRole.ASSISTANT
                and "It reports: Demo result" in m.content]

    wait_for(relayed, timeout=20, what="Arthur relaying the worker's result")
    assistant = [m.content for m in embedded.brain.store.port(LaneStore).chat_history("acme", pid)
                 if m.role is ChatRole.ASSISTANT]
    assert assistant[1].startswith("I started a worker (demo-worker)")
    assert assistant[2].startswith("The worker demo-worker is done.")  # named, not its id
    worker = next(p for p in embedded.brain.store.port(SessionStore).list_processes("acme", session.id)
                  if p.name == "demo-worker")
    assert worker.recipe_name == "analyze" and worker.close_reason is CloseReason.DONE


ARTHUR_TOOLS = [ToolSpec(n, n) for n in ("process_create", "process_steer", "respond")]


@pytest.mark.parametrize(("request_text", "recipe", "params"), [
    ("Please research the history of type systems", "marvin", None),
    ("Do a deep dive into our churn", "marvin", None),
    ("Run the review process on the draft", "vogon", {"strategy": "draft-review"}),
    ("Review the release notes with approval", "vogon", {"strategy": "draft-review"}),
    ("Should we move to Postgres?", "zaphod", None),
    ("Give me pros and cons of remote work", "zaphod", None),
    ("Summarize this thread", "analyze", None),
])
def test_the_demo_arthur_picks_the_worker_by_keywords(request_text, recipe, params):
    reply = DemoModel().complete([LlmMessage("system", "You are Arthur."),
                                  LlmMessage("user", request_text)], tools=ARTHUR_TOOLS)
    [spawn] = reply.tool_calls
    args = json.loads(spawn.arguments)
    assert (spawn.name, args["recipe"], args.get("params"), args["goal"]) == (
        "process_create", recipe, params, request_text)


def test_the_demo_arthur_relays_an_escaped_report_and_a_question():
    def answer(event: str) -> dict:
        [call] = DemoModel().complete([LlmMessage("user", event)], tools=ARTHUR_TOOLS).tool_calls
        return json.loads(call.arguments)

    done = event_text(ProcessEvent(source_process_id="proc_1", type=ProcessEventType.DONE,
                                   human_summary="1 < 2 & the tree is done"))
    assert answer(done) == {"message": "The worker proc_1 is done. It reports: 1 < 2 & the "
                                       "tree is done", "awaiting_user_input": False}
    blocked = event_text(ProcessEvent(source_process_id="proc_2", type=ProcessEventType.BLOCKED,
                                      human_summary="Approve phase 2?"))
    assert answer(blocked) == {"message": "The worker proc_2 asks: Approve phase 2?",
                               "awaiting_user_input": True}
    in_inbox = event_text(ProcessEvent(source_process_id="proc_3", type=ProcessEventType.BLOCKED,
                                       human_summary="Approve the draft?",
                                       payload={"itemId": "item_1"}))
    assert answer(in_inbox) == {
        "message": "The worker proc_3 put a question into your Inbox: Approve the draft? Answer "
                   "it there (in the terminal: /inbox); the answer goes straight to the worker.",
        "awaiting_user_input": False}
    named = event_text(ProcessEvent(source_process_id="proc_4", source_name='the "tea" <w>',
                                    type=ProcessEventType.DONE, human_summary="tea is good"))
    assert 'sourceName=\'the "tea" &lt;w&gt;\'' in named  # escaped like every attribute
    assert answer(named)["message"] == 'The worker the "tea" <w> is done. It reports: tea is good'


@pytest.mark.parametrize("report", [
    "## Strategy draft-review: completed\n\nPhase draft passed its gate.",
    "- one finding\n- another", "1. first\n2. second", "```\nlog\n```", "> quoted",
    "| a | b |\n|---|---|"])
def test_the_demo_arthur_relays_a_report_that_opens_with_a_block_as_its_own_paragraph(report):
    """A heading (vogon's and zaphod's reports start with one) or a list spliced into "It
    reports: …" is no heading any more; it starts a paragraph of its own."""
    for kind, lead in ((ProcessEventType.DONE, "The worker w is done. It reports:"),
                       (ProcessEventType.BLOCKED, "The worker w asks:")):
        event = event_text(ProcessEvent(source_process_id="w", type=kind, human_summary=report))
        [call] = DemoModel().complete([LlmMessage("user", event)], tools=ARTHUR_TOOLS).tool_calls
        assert json.loads(call.arguments)["message"] == f"{lead}\n\n{report}"


def test_the_demo_arthur_says_when_a_worker_could_not_start():
    messages = [LlmMessage("user", "research X"),
                LlmMessage("assistant", "", tool_calls=(ToolCall("demo_spawn", "process_create",
                                                                 "{}"),)),
                LlmMessage("tool", json.dumps({"error": "no recipe named 'marvin'"}),
                           tool_call_id="demo_spawn")]
    [call] = DemoModel().complete(messages, tools=ARTHUR_TOOLS).tool_calls
    assert json.loads(call.arguments)["message"].startswith(
        "I could not start a worker: no recipe named 'marvin'")


ENGINE_OF = {"please research green tea": "marvin",
             "run the strategy for a tea slogan": "vogon",
             "give me the pros and cons of remote work": "zaphod",
             "analyze the quarterly numbers": "ford"}


def test_the_demo_welcome_suggests_a_phrase_for_each_engine_and_the_inbox(embedded):
    embedded.model = DemoModel()
    session = embedded.brain.sessions.create(embedded.who)
    [line] = wait_for(lambda: [m for m in embedded.brain.store.port(LaneStore)
                               .chat_history("acme", session.chat_process_id)
                               if m.role is ChatRole.ASSISTANT], timeout=20)
    welcome = line.content
    assert welcome.startswith("Hi, I'm Arthur. How can I help?\n\nNo LLM is configured")
    for phrase, _ in demo.TRY:
        assert f"“{phrase}”" in welcome
    assert set(ENGINE_OF) <= {phrase for phrase, _ in demo.TRY}
    assert "ask me for approval" in welcome and "show me every kind of inbox item" in welcome
    # The same phrases as data, for a client's buttons (the web client's suggestions).
    assert line.meta["suggestions"] == [phrase for phrase, _ in demo.TRY]


@pytest.mark.parametrize("phrase", list(ENGINE_OF))
def test_each_suggested_phrase_drives_its_engine_to_a_report_in_arthurs_chat(embedded, phrase):
    """Through Arthur's real process_create: the worker of that engine starts, runs (vogon's
    approval answered in the Inbox), ends DONE, and Arthur's chat gets its report."""
    embedded.model = DemoModel()
    session = embedded.brain.sessions.create(embedded.who)
    pid = session.chat_process_id
    embedded.brain.sessions.steer(embedded.who, pid, phrase)
    sessions = embedded.brain.store.port(SessionStore)
    worker = wait_for(lambda: next((p for p in sessions.list_processes("acme", session.id)
                                    if p.parent_process_id == pid), None), timeout=20,
                      what="the worker")
    assert worker.engine == ENGINE_OF[phrase]

    def done() -> bool:
        for item in embedded.brain.inbox.list(embedded.who, session_id=session.id,
                                              statuses=[ItemStatus.PENDING]):
            embedded.brain.inbox.answer(embedded.who, item.id, Outcome.DECIDED,
                                        value={"approved": True})
        return sessions.get_process("acme", worker.id).status is ProcessStatus.CLOSED

    wait_for(done, timeout=60, what=f"the {worker.engine} worker done")
    assert sessions.get_process("acme", worker.id).close_reason is CloseReason.DONE
    report = (f'<process-event sourceProcessId="{worker.id}" sourceName="{worker.name}" '
              'type="done">')

    def relayed() -> list[str]:
        lines = embedded.brain.store.port(LaneStore).chat_history("acme", pid)
        at = next((i for i, m in enumerate(lines) if m.role is ChatRole.EVENT
                   and m.content.startswith(report)), None)
        return [] if at is None else [m.content for m in lines[at:]
                                      if m.role is ChatRole.ASSISTANT]

    [relay] = wait_for(relayed, timeout=20, what="Arthur relaying the report")
    lead = f"The worker {worker.name} is done. It reports:"
    assert relay.startswith(lead)
    # vogon's and zaphod's reports open with a heading: it starts a paragraph of its own.
    assert relay[len(lead):].startswith(
        "\n\n## " if worker.engine in ("vogon", "zaphod") else " ")
