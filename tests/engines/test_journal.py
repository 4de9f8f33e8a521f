"""The turn journal on the embedded runtime: a turn whose attempt dies (here: a tool raises a
Redis error, which abandons the attempt unwritten like a killed worker, and the task runs
the turn again) replays its recorded completions and tool results; a side-effecting call
the crash cut short is not repeated but asked about in the user's Inbox, and the answer
decides; an idempotent tool is simply called again."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
import redis

from tests.engines.test_arthur import call, respond
from tests.helpers import wait_for
from vancetope_brain.events import EventType
from vancetope_brain.llm import LlmMessage, LlmResponse, ToolSpec
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus, ThinkProcess, utcnow
from vancetope_brain.models.inbox import InboxItem, InboxQuery, ItemStatus, ItemType, Outcome
from vancetope_brain.recipes.loader import parse_recipe
from vancetope_brain.store import (
    JournalStore,
    LaneStore,
    SessionStore,
    UsageStore,
    UserInboxStore,
)
from vancetope_brain.tools import SERVER_TOOLS, server_tool

S = ProcessStatus
JOURNALED = """
name: journaled
engine: ford
category: worker
description: A worker with side-effecting test tools.
allowedToolsAdd: [journal_*]
"""
OBJECT = {"type": "object"}


class World:
    """What the test tools did, and when they crash: each crashes its first call."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: dict[str, list[dict]] = {"send": [], "lookup": [], "charge": []}
        self.on_crash: Callable[[], object] = lambda: None

    def record(self, tool: str, **params) -> int:
        with self.lock:
            self.calls[tool].append(params)
            return len(self.calls[tool])


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    w = World()

    @server_tool(ToolSpec("journal_send", "sends a message (a side effect)", OBJECT))
    def send(context, to: str) -> dict:
        return {"sent": w.record("send", to=to)}

    @server_tool(ToolSpec("journal_lookup", "looks something up", OBJECT), idempotent=True)
    def lookup(context, q: str) -> dict:
        if w.record("lookup", q=q) == 1:  # the worker dies after the send, before the commit
            w.on_crash()
            raise redis.ConnectionError("simulated crash after the send")
        return {"found": q}

    @server_tool(ToolSpec("journal_charge", "charges a card (a side effect)", OBJECT))
    def charge(context, amount: int) -> dict:
        if w.record("charge", amount=amount) == 1:  # the worker dies during the charge
            raise redis.ConnectionError("simulated crash during the charge")
        return {"charged": amount}

    yield w
    for name in ("journal_send", "journal_lookup", "journal_charge"):
        SERVER_TOOLS.pop(name)


@pytest.fixture(autouse=True)
def journaled_recipe(embedded, world):
    embedded.brain.recipe_admin.put("acme", None, parse_recipe(JOURNALED, "journaled"))
    with world.lock:
        for calls in world.calls.values():
            calls.clear()
    world.on_crash = lambda: None
    yield
    embedded.brain.recipe_admin.delete("acme", None, "journaled")


def _worker_calls(model: FunctionModel) -> list[tuple]:
    """The worker's model calls (the session's Arthur is offered no journal_* tool)."""
    return [c for c in model.calls if any(t.name.startswith("journal_") for t in c.tools)]


def _start(emb, script) -> tuple[FunctionModel, ThinkProcess]:
    def model(messages: list[LlmMessage], tools: list[ToolSpec]):
        return script(messages) if any(t.name == "journal_send" for t in tools) \
            else respond("ok")

    emb.model = fm = FunctionModel(model)
    session = emb.brain.sessions.create(emb.who)
    worker = emb.brain.sessions.create_process(emb.who, session.id, recipe="journaled",
                                               goal="do it", name="w")
    return fm, worker


def _status(emb, pid: str) -> S:
    return emb.brain.store.port(SessionStore).get_process("acme", pid).status


def test_a_rerun_replays_completions_and_results_and_calls_an_idempotent_tool_again(
        embedded, world):
    def script(messages):
        if messages[-1].role == "tool":
            return respond("sent, and found ada")
        return LlmResponse("Sending now.", (call("journal_send", to="ada"),
                                            call("journal_lookup", q="ada")))

    model, w = _start(embedded, script)
    wait_for(lambda: _status(embedded, w.id) is S.CLOSED, timeout=20, what="the worker done")
    assert world.calls["send"] == [{"to": "ada"}]  # not again in the second attempt
    assert world.calls["lookup"] == [{"q": "ada"}, {"q": "ada"}]  # idempotent: called again
    calls = _worker_calls(model)
    assert len(calls) == 2 and calls[0].messages != calls[1].messages  # once per request
    done = embedded.brain.store.port(SessionStore).get_process("acme", w.id)
    assert (done.close_reason, done.engine_state["lastReply"]) == (
        CloseReason.DONE, "sent, and found ada")
    tools = [m.content for m in embedded.brain.store.port(LaneStore).chat_history("acme", w.id)
             if m.role is ChatRole.TOOL]
    assert [t.split("(", 1)[0] for t in tools] == ["journal_send", "journal_lookup"]
    assert '"sent": 1' in tools[0]
    # Clients were told to discard the dead attempt's stream, then got the replayed text once.
    events = [e for e in embedded.brain.events.read(w.session_id, 0) if e.process_id == w.id]
    kinds = [(e.type, e.data.get("text")) for e in events
             if e.type in (EventType.TOKEN, EventType.TURN_RESTARTED)]
    restart = kinds.index((EventType.TURN_RESTARTED, None))
    assert "".join(text for _, text in kinds[:restart]) == "Sending now."
    assert kinds[restart + 1:] == [(EventType.TOKEN, "Sending now.")]
    assert embedded.brain.store.port(JournalStore).journal("acme", w.id) == []
    # Usage counts each completion once: the replayed one in the attempt that committed,
    # the dead attempt's not at all (the session's every model call, Arthur's too).
    embedded.worker.join()
    today = utcnow().date()
    rows = embedded.brain.store.port(UsageStore).read_usage(
        "acme", today - timedelta(days=1), today, session_id=w.session_id)
    assert sum(row.calls for row in rows) == len(model.calls)


def test_a_message_that_arrives_while_the_turn_is_dead_waits_for_the_next_turn(
        embedded, world):
    def script(messages):
        last = messages[-1]
        if last.role == "tool":
            return respond("done", awaiting=True)
        if last.content.startswith("send to "):
            to = last.content.removeprefix("send to ")
            return LlmResponse("", (call("journal_send", to=to), call("journal_lookup", q=to)))
        return respond("whom?", awaiting=True)

    model, w = _start(embedded, script)
    wait_for(lambda: _status(embedded, w.id) is S.BLOCKED, timeout=20, what="the question")
    world.on_crash = lambda: embedded.brain.sessions.steer(embedded.who, w.id, "send to bob")
    first, _ = embedded.brain.sessions.steer(embedded.who, w.id, "send to ada")
    wait_for(lambda: len(world.calls["send"]) == 2 and _status(embedded, w.id) is S.BLOCKED
             and not embedded.brain.store.port(LaneStore).pending_messages("acme", w.id),
             timeout=20, what="both sends")
    assert world.calls["send"] == [{"to": "ada"}, {"to": "bob"}]
    # The second attempt handled what the first was given, so it asked the same questions.
    asked = [c.last_user_text for c in _worker_calls(model)]
    assert asked.count("send to ada") == 2  # the tool call, then the reply after its results
    turns = embedded.brain.store.port(LaneStore).turn_records("acme", w.id)
    assert [t.drained_ids for t in turns[-2:]][0] == [first.id]
    users = [m.content for m in embedded.brain.store.port(LaneStore).chat_history("acme", w.id)
             if m.role is ChatRole.USER]
    assert users == ["do it", "send to ada", "send to bob"]


def _charging(messages):
    """Charges 5; after an in-doubt or refused result it says so; it charges again whenever
    the user answers or asks — the dispatcher, not the model, must hold the call back."""
    last = messages[-1]
    if last.role == "tool":
        result = json.loads(last.content)
        if "error" in result:
            return respond(f"held back: {result['error'].split(':')[0]}")
        return respond(f"charged {result['result']['charged']}")
    return LlmResponse("", (call("journal_charge", amount=5),))


def _in_doubt_item(emb, w: ThinkProcess) -> InboxItem:
    wait_for(lambda: _status(emb, w.id) is S.BLOCKED, timeout=20, what="the worker blocked")
    [item] = emb.brain.store.port(UserInboxStore).list_inbox_items(
        "acme", InboxQuery(origin_process_id=w.id))
    return item


def test_a_call_cut_short_is_in_doubt_not_repeated_and_approval_runs_it(embedded, world):
    _, w = _start(embedded, _charging)
    item = _in_doubt_item(embedded, w)
    assert world.calls["charge"] == [{"amount": 5}]  # the second attempt did not call it
    assert (item.type, item.status, item.tags) == (ItemType.APPROVAL, ItemStatus.PENDING,
                                                   ["in-doubt"])
    assert item.title == "Run journal_charge again?"
    assert item.body == ('The server restarted while running `journal_charge({"amount":5})`; '
                         'it may or may not have run. Run it again?')
    process = embedded.brain.store.port(SessionStore).get_process("acme", w.id)
    assert process.engine_state["lastReply"] == "held back: in doubt"
    [doubt] = embedded.brain.store.port(JournalStore).journal("acme", w.id)
    assert (doubt.state.value, doubt.item_id, doubt.params) == ("IN_DOUBT", item.id,
                                                                {"amount": 5})

    # Asked again before the answer, the call is still held back, and nothing new is asked.
    turns = len(embedded.brain.store.port(LaneStore).turn_records("acme", w.id))
    embedded.brain.sessions.steer(embedded.who, w.id, "please retry the charge")
    wait_for(lambda: len(embedded.brain.store.port(LaneStore).turn_records("acme", w.id))
             == turns + 1, timeout=20, what="the retry turn")
    assert _status(embedded, w.id) is S.BLOCKED
    assert world.calls["charge"] == [{"amount": 5}]
    assert len(embedded.brain.store.port(UserInboxStore).list_inbox_items(
        "acme", InboxQuery(origin_process_id=w.id))) == 1

    embedded.brain.inbox.answer(embedded.who, item.id, Outcome.DECIDED,
                                value={"approved": True})
    wait_for(lambda: _status(embedded, w.id) is S.CLOSED, timeout=20, what="the worker done")
    assert world.calls["charge"] == [{"amount": 5}, {"amount": 5}]  # run once more
    done = embedded.brain.store.port(SessionStore).get_process("acme", w.id)
    assert (done.close_reason, done.engine_state["lastReply"]) == (CloseReason.DONE,
                                                                   "charged 5")
    assert embedded.brain.store.port(JournalStore).journal("acme", w.id) == []


def test_a_rejected_in_doubt_call_is_not_run_even_when_the_model_calls_it(embedded, world):
    _, w = _start(embedded, _charging)
    item = _in_doubt_item(embedded, w)
    embedded.brain.inbox.answer(embedded.who, item.id, Outcome.DECIDED,
                                value={"approved": False})
    wait_for(lambda: _status(embedded, w.id) is S.CLOSED, timeout=20, what="the worker done")
    assert world.calls["charge"] == [{"amount": 5}]
    done = embedded.brain.store.port(SessionStore).get_process("acme", w.id)
    assert done.engine_state["lastReply"] == "held back: not run"
    tool_lines = [m.content for m in embedded.brain.store.port(LaneStore).chat_history(
        "acme", w.id) if m.role is ChatRole.TOOL]
    assert "decided not to run it again" in tool_lines[-1]
