"""vogon in the embedded shape: a strategy runs phase by phase under Arthur; a checkpoint posts
an Inbox item and blocks Vogon (Arthur hears the item's title); the answer continues the
phase; gates, onFail, bounded loops, forks and the cron variant's OUTPUT_TEXT."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.engines.test_arthur import Script, call, respond
from tests.helpers import wait_for
from vancetope_brain.llm import LlmResponse
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus, ThinkProcess
from vancetope_brain.models.inbox import InboxQuery, ItemStatus, ItemType, Outcome
from vancetope_brain.models.memory import MemoryKind, MemoryScope
from vancetope_brain.store import LaneStore, MemoryStore, SessionStore, UserInboxStore

S = ProcessStatus

THREE_PHASES: dict[str, Any] = {"name": "three", "phases": [
    {"name": "a", "recipe": "ford", "goal": "A for {{ input }}"},
    {"name": "b", "recipe": "ford", "goal": "B after {{ phases.a.output }}",
     "checkpoint": {"type": "approval", "title": "Approve B for {{ input }}?"},
     "onFail": "rescue"},
    {"name": "c", "recipe": "ford", "goal": "C after {{ phases.b.output }}", "next": "end"},
    {"name": "rescue", "recipe": "ford", "goal": "rescue {{ phases.b.output }}"}]}


def _worker(messages, tools):
    """A phase worker: its result is ``out(<its goal's first line>)``; goals with ``PASS if
    try 2`` pass on their second run."""
    goal = next(m.content for m in messages if m.role == "user").splitlines()[0]
    if "PASS if try" in goal:
        return respond("PASS" if goal.endswith("try 2") else "not yet")
    return respond(f"out({goal})")


def _arthur(recipe: str):
    def arthur(messages, tools):
        last = messages[-1]
        if last.role == "tool":
            return respond("started")
        if last.content.startswith("run "):
            params = json.loads(last.content.removeprefix("run "))
            return LlmResponse("", (call("process_create", recipe=recipe, name="v",
                                         goal="the launch", params=params),))
        event = re.search(r'type="(\w+)">(.*?)(<payload>|</process-event>)', last.content,
                          re.DOTALL)
        return respond(f"heard {event.group(1)}: {event.group(2).strip()}" if event else "ok")
    return arthur


def _run(emb, params: dict[str, Any], recipe: str = "vogon") -> tuple[str, ThinkProcess]:
    emb.model = FunctionModel(Script(_arthur(recipe), _worker))
    session = emb.brain.sessions.create(emb.who)
    emb.brain.sessions.steer(emb.who, session.chat_process_id, "run " + json.dumps(params))
    return session.id, wait_for(lambda: _named(emb, session.id, "v"), timeout=15, what="vogon")


def _named(emb, session_id: str, name: str) -> ThinkProcess | None:
    return next((p for p in emb.brain.store.port(SessionStore).list_processes("acme", session_id)
                 if p.name == name), None)


def _status(emb, pid: str) -> S:
    return emb.brain.store.port(SessionStore).get_process("acme", pid).status


def _closed(emb, pid: str, timeout: float = 20) -> ThinkProcess:
    wait_for(lambda: _status(emb, pid) is S.CLOSED, timeout=timeout, what="vogon to close")
    return emb.brain.store.port(SessionStore).get_process("acme", pid)


def _workers(emb, session_id: str, vogon_id: str) -> list[str]:
    return sorted(p.name for p in emb.brain.store.port(SessionStore).list_processes(
        "acme", session_id) if p.parent_process_id == vogon_id)


def _arthur_heard(emb, session_id: str, text: str) -> bool:
    chat = emb.brain.store.port(SessionStore).get_session("acme", session_id).chat_process_id
    return any(m.content == text for m in emb.brain.store.port(LaneStore).chat_history(
        "acme", chat) if m.role is ChatRole.ASSISTANT)


def _pending_item(emb, vogon_id: str):
    return wait_for(lambda: next(iter(emb.brain.store.port(UserInboxStore).list_inbox_items(
        "acme", InboxQuery(origin_process_id=vogon_id, statuses=frozenset({ItemStatus.PENDING})))),
        None), timeout=20, what="the checkpoint's Inbox item")


def _strategy_state(process: ThinkProcess) -> dict[str, Any]:
    return process.engine_state["strategyState"]


@pytest.mark.parametrize("approved", [True, False])
def test_an_approval_checkpoint_blocks_and_the_answer_continues_or_follows_on_fail(
        embedded, approved: bool):
    sid, vogon = _run(embedded, {"strategy": THREE_PHASES})
    item = _pending_item(embedded, vogon.id)
    assert (item.type, item.title) == (ItemType.APPROVAL, "Approve B for the launch?")
    assert item.body == "out(B after out(A for the launch))"  # the phase's output by default
    wait_for(lambda: _status(embedded, vogon.id) is S.BLOCKED, timeout=10)
    wait_for(lambda: _arthur_heard(embedded, sid, "heard blocked: Approve B for the launch?"),
             timeout=10, what="Arthur hearing the item title")
    assert _workers(embedded, sid, vogon.id) == ["a", "b"]

    embedded.brain.inbox.answer(embedded.who, item.id, Outcome.DECIDED,
                                value={"approved": approved})
    done = _closed(embedded, vogon.id)
    state = _strategy_state(done)
    assert done.close_reason is CloseReason.DONE
    if approved:
        assert _workers(embedded, sid, vogon.id) == ["a", "b", "c"]
        assert state["outcome"] == "completed"
        assert state["results"]["c"]["output"] == "out(C after out(B after out(A for the launch)))"
    else:  # onFail: rescue — c is skipped
        assert _workers(embedded, sid, vogon.id) == ["a", "b", "rescue"]
        assert state["outcome"] == "completed" and "c" not in state["results"]
    assert state["results"]["b"]["answer"]["value"] == {"approved": approved}
    assert [h["phase"] for h in state["history"]] == ["a", "b", "c" if approved else "rescue"]
    wait_for(lambda: _arthur_heard(embedded, sid, "heard done: " + state["report"]), timeout=10,
             what="Arthur hearing the phase synthesis")
    # The synthesis is project memory; the done event's payload names it (report_id).
    entry = embedded.brain.store.port(MemoryStore).get_memory("acme", state["reportId"])
    assert (entry.kind, entry.scope, entry.project_id) == (
        MemoryKind.REPORT, MemoryScope.PROJECT, done.project_id)
    assert state["report"] in entry.text
    assert ("Checkpoint: approved" if approved else "Checkpoint: rejected") in state["report"]
    progress = [(e.data["phase"], e.data["step"], e.data.get("passed"))
                for e in embedded.brain.events.read(sid, 0) if e.type.value == "vogon-phase"]
    last = ("c", "gate", True) if approved else ("rescue", "gate", True)
    assert progress == [("a", "started", None), ("a", "gate", True), ("b", "started", None),
                        ("b", "waiting", None), ("b", "gate", approved),
                        (last[0], "started", None), last, (last[0], "finished", None)]


def test_a_loop_repeats_a_phase_until_its_gate_passes_and_ends_at_its_bound(embedded):
    looping = {"name": "loop", "phases": [
        {"name": "try", "recipe": "ford", "goal": "PASS if try {{ iteration }}",
         "gate": {"all": [{"value": "phases.try.output", "equals": "PASS"}]},
         "maxIterations": 3},
        {"name": "never", "recipe": "ford", "goal": "PASS if try 9 {{ iteration }}",
         "gate": {"any": [{"value": "phases.never.output", "equals": "PASS"},
                          {"value": "input", "contains": "no such text"}]},
         "maxIterations": 2}]}
    sid, vogon = _run(embedded, {"strategy": looping})
    state = _strategy_state(_closed(embedded, vogon.id))
    assert [(h["phase"], h["iteration"], h["gate"]) for h in state["history"]] == [
        ("try", 1, "failed"), ("try", 2, "passed"), ("never", 1, "failed"),
        ("never", 2, "failed")]
    assert state["outcome"] == "stopped"
    assert "The gate of phase never failed after 2 runs." in state["report"]
    assert _workers(embedded, sid, vogon.id) == ["never", "never", "try", "try"]


def test_a_fork_runs_its_branches_in_parallel_and_joins(embedded):
    forked = {"name": "fork", "phases": [
        {"name": "weigh", "fork": [
            {"name": "pro", "recipe": "ford", "goal": "pro {{ input }}"},
            {"name": "con", "recipe": "analyze", "goal": "con {{ input }}"}]},
        {"name": "join", "recipe": "ford",
         "goal": "join {{ phases.weigh.branches.pro.output }} + "
                 "{{ phases.weigh.branches.con.output }}"}]}
    sid, vogon = _run(embedded, {"strategy": forked})
    done = _closed(embedded, vogon.id)
    state = _strategy_state(done)
    assert state["results"]["join"]["output"] == \
        "out(join out(pro the launch) + out(con the launch))"
    workers = [p for p in embedded.brain.store.port(SessionStore).list_processes("acme", sid)
               if p.parent_process_id == vogon.id]
    pro, con = (next(p for p in workers if p.name == n) for n in ("weigh-pro", "weigh-con"))
    # Both branches were spawned by one turn, before either had reported.
    assert pro.created_at == con.created_at or abs(
        (pro.created_at - con.created_at).total_seconds()) < 1
    started = [t for t in embedded.brain.store.port(LaneStore).turn_records("acme", vogon.id)
               if t.lifecycle == "start"]
    assert len(started) == 1


def test_an_unknown_or_invalid_strategy_fails_the_process_with_a_field_named_error(embedded):
    _, vogon = _run(embedded, {"strategy": "drat-review"})
    failed = _closed(embedded, vogon.id)
    assert failed.close_reason is CloseReason.FAILED
    assert "no strategy named 'drat-review'; did you mean 'draft-review'?" in \
        _strategy_state(failed)["report"]

    bad = {"name": "bad", "phases": [{"name": "a", "recipe": "ford", "goal": "{{ nope }}"}]}
    _, vogon = _run(embedded, {"strategy": bad})
    report = _strategy_state(_closed(embedded, vogon.id))["report"]
    assert "params.strategy: phases.0.goal: template uses unknown variable(s) nope" in report


def test_the_cron_variant_posts_its_synthesis_as_output_text_and_the_sub_variant_cannot(
        embedded):
    one = {"name": "one", "phases": [{"name": "a", "recipe": "ford", "goal": "A"}]}
    _, cron = _run(embedded, {"strategy": one}, recipe="vogon-cron")
    _, sub = _run(embedded, {"strategy": one, "postSynthesis": True})
    for process in (cron, sub):
        _closed(embedded, process.id)
    items = {p.id: embedded.brain.store.port(UserInboxStore).list_inbox_items(
        "acme", InboxQuery(origin_process_id=p.id)) for p in (cron, sub)}
    assert items[sub.id] == []  # inbox_post is not in the vogon recipe's pool
    (posted,) = items[cron.id]
    assert (posted.type, posted.title) == (ItemType.OUTPUT_TEXT, "one: completed")
    assert posted.body == _strategy_state(_closed(embedded, cron.id))["report"]
    assert "### a (run 1, done)" in posted.body and "out(A)" in posted.body


def test_the_demo_model_runs_a_bundled_strategy_up_to_its_approval(embedded):
    from vancetope_brain.llm.demo import DemoModel

    embedded.model = DemoModel()
    session = embedded.brain.sessions.create(embedded.who)
    embedded.brain.sessions.steer(embedded.who, session.chat_process_id,
                                  "Run the strategy for a product launch note")
    vogon = wait_for(lambda: _named(embedded, session.id, "demo-strategy"), timeout=15)
    item = _pending_item(embedded, vogon.id)
    assert item.title.startswith("Approve the draft for")
    embedded.brain.inbox.answer(embedded.who, item.id, Outcome.DECIDED, value={"approved": True})
    state = _strategy_state(_closed(embedded, vogon.id))
    assert state["outcome"] == "completed"
    assert _workers(embedded, session.id, vogon.id) == ["draft", "finalize", "research"]


def test_a_worker_question_blocks_vogon_and_the_parents_answer_is_relayed(embedded):
    asking = {"name": "ask", "phases": [{"name": "a", "recipe": "ford", "goal": "ASK me"}]}

    def worker(messages, tools):
        said = [m.content for m in messages if m.role == "user"]
        if said[-1] == "blue":
            return respond("the answer was blue")
        return respond("Which colour?", awaiting=True)

    def arthur(messages, tools):
        last = messages[-1]
        if 'type="blocked">Phase a: a worker asks: Which colour?' in last.content:
            vogon = re.search(r'sourceProcessId="([^"]+)"', last.content).group(1)
            return LlmResponse("", (call("process_steer", processId=vogon, message="blue"),))
        return _arthur("vogon")(messages, tools)

    embedded.model = FunctionModel(Script(arthur, worker))
    session = embedded.brain.sessions.create(embedded.who)
    embedded.brain.sessions.steer(embedded.who, session.chat_process_id,
                                  "run " + json.dumps({"strategy": asking}))
    vogon = wait_for(lambda: _named(embedded, session.id, "v"), timeout=15, what="vogon")
    state = _strategy_state(_closed(embedded, vogon.id))
    assert state["results"]["a"]["output"] == "the answer was blue"
    assert _workers(embedded, session.id, vogon.id) == ["a"]


def test_the_phase_and_fork_caps_hold(embedded):
    from vancetope_brain.models.settings import SettingScope

    settings, tenant = embedded.brain.settings, SettingScope.tenant()
    settings.set("acme", tenant, "vogon.maxPhases", 2)
    settings.set("acme", tenant, "vogon.maxForkBranches", 1)
    settings.set("acme", tenant, "vogon.maxLoopIterations", 1)
    try:
        sid, vogon = _run(embedded, {"strategy": THREE_PHASES})  # a, b (+ its checkpoint), …
        item = _pending_item(embedded, vogon.id)
        embedded.brain.inbox.answer(embedded.who, item.id, Outcome.DECIDED,
                                    value={"approved": True})
        failed = _closed(embedded, vogon.id)
        assert failed.close_reason is CloseReason.FAILED
        assert "The strategy ran 2 phases, the vogon.maxPhases bound." in \
            _strategy_state(failed)["report"]
        assert _workers(embedded, sid, vogon.id) == ["a", "b"]

        forked = {"name": "wide", "phases": [{"name": "f", "fork": [
            {"name": "x", "recipe": "ford", "goal": "x"},
            {"name": "y", "recipe": "ford", "goal": "y"}]}]}
        sid, vogon = _run(embedded, {"strategy": forked})
        refused = _closed(embedded, vogon.id)
        assert "phases.0.fork: 2 branches, more than vogon.maxForkBranches (1)" in \
            _strategy_state(refused)["report"]
        assert _workers(embedded, sid, vogon.id) == []

        looping = {"name": "loop", "phases": [{"name": "try", "recipe": "ford",
                                               "goal": "PASS if try {{ iteration }}",
                                               "gate": {"all": [{"value": "phases.try.output",
                                                                 "equals": "PASS"}]},
                                               "maxIterations": 3}]}
        _, vogon = _run(embedded, {"strategy": looping})
        state = _strategy_state(_closed(embedded, vogon.id))
        assert [h["iteration"] for h in state["history"]] == [1]  # the setting caps the 3
        assert state["outcome"] == "stopped"
    finally:
        settings.unset("acme", tenant, "vogon.maxLoopIterations")
        settings.unset("acme", tenant, "vogon.maxPhases")
        settings.unset("acme", tenant, "vogon.maxForkBranches")
