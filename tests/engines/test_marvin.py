"""marvin on the embedded runtime with a function model playing Arthur, Marvin and its workers:
plan → parallel workers → more planning → aggregate → DONE with the report at the parent;
invalid plan output repaired once, then a clean failure; node and depth limits; a
USER_INPUT node that blocks until Arthur forwards the answer; worker retries; workflow
templates; the tree over the protocol.
"""

from __future__ import annotations

import json
import re
import threading

import pytest

from tests.gateway.wire import Client
from vancetope_brain.engines.marvin import TaskTree, parse_worker_report, tree_from_template
from vancetope_brain.errors import RecipeError
from vancetope_brain.events import EventType
from vancetope_brain.llm import LlmResponse, ToolCall
from vancetope_brain.llm.demo import DemoModel
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus, ThinkProcess
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.models.workflow_template import WorkflowTemplate
from vancetope_brain.recipes.kinds import bundled_of
from vancetope_brain.recipes.loader import parse_definition
from vancetope_brain.store import LaneStore, SessionStore

GOAL = "Research the widget market"


def call(tool: str, **args) -> LlmResponse:
    return LlmResponse("", (ToolCall(f"c_{tool}", tool, json.dumps(args)),))


def respond(message: str, awaiting: bool = False) -> LlmResponse:
    return call("respond", message=message, awaiting_user_input=awaiting)


def worker_json(summary: str, *, more: list[str] | None = None) -> LlmResponse:
    return respond(json.dumps({"summary": summary, "result": {"said": summary},
                               "needsPlanning": bool(more), "followUps": more or []}))


def step_of(messages) -> str:
    """The worker's step, from its recipe prompt ("Your step: …")."""
    found = re.search(r"Your step: (.*)", messages[0].content)
    return found.group(1).strip() if found else ""


class Flow:
    """One model for every process of a session: Arthur starts marvin on "go" (with
    ``params``), relays a blocked marvin's question, forwards the user's "answer: …" with
    process_steer and relays the final report; ``marvin`` and ``worker`` script the rest."""

    def __init__(self, marvin, worker, params=None) -> None:
        self.marvin, self.worker, self.params = marvin, worker, params
        self.calls: dict[str, list] = {"plan": [], "aggregate": [], "worker": []}
        self._lock = threading.Lock()

    def __call__(self, messages, tools):
        names = {t.name for t in tools}
        if "process_create" in names:
            return self.arthur(messages)
        kind = "plan" if "marvin_plan" in names else "aggregate" \
            if "marvin_aggregate" in names else "worker"
        with self._lock:
            self.calls[kind].append(messages)
        if kind == "worker":
            return self.worker(step_of(messages), messages)
        return self.marvin(kind, messages)

    def arthur(self, messages):
        last = messages[-1]
        if last.role == "tool":
            return respond("forwarded" if '"ok": true' in last.content else "started")
        if last.content == "go":
            return call("process_create", recipe="marvin", name="deep", goal=GOAL,
                        **({"params": self.params} if self.params else {}))
        if last.content.startswith("answer: "):
            marvin = re.findall(r'sourceProcessId="([^"]+)"[^>]* type="blocked"',
                                "".join(m.content for m in messages))[-1]
            return call("process_steer", processId=marvin,
                        message=last.content.removeprefix("answer: "))
        if 'type="blocked"' in last.content:
            return respond("Marvin asks: " + last.content.split(">", 1)[1].split("<")[0].strip(),
                           awaiting=True)
        if "<process-event" in last.content:
            return respond("relayed")
        return respond("?")


def plan(*steps, aggregate="Combine the findings.") -> LlmResponse:
    return call("marvin_plan", steps=[s if isinstance(s, dict) else {"kind": "WORKER", "goal": s}
                                      for s in steps], aggregate=aggregate)


def aggregate_from(messages) -> LlmResponse:
    """A synthesis naming every step it was given (ids), so tests can see what it saw."""
    ids = re.findall(r'"id": "(n\d+)"', messages[-1].content)
    return call("marvin_aggregate", summary=f"Synthesis of {', '.join(ids)}.",
                result={"steps": ids})


def run(emb, flow, *, say=("go",)):
    emb.worker.join()
    emb.model = FunctionModel(flow)
    session = emb.brain.sessions.create(emb.who)
    for text in say:
        emb.brain.sessions.steer(emb.who, session.chat_process_id, text)
    emb.worker.join(timeout=30)
    return session


def marvin_of(emb, session):
    return next(p for p in emb.brain.store.port(SessionStore).list_processes(
        "acme", session.id) if p.engine == "marvin")


def tree_of(process) -> TaskTree:
    return TaskTree.model_validate(process.engine_state["tree"])


def shape(tree: TaskTree) -> list[tuple[str, str, str | None, str]]:
    return [(n.id, n.kind.value, n.parent, n.status.value) for n in tree.nodes.values()]


def chat(emb, pid):
    return emb.brain.store.port(LaneStore).chat_history("acme", pid, limit=1000)


def test_plan_workers_more_planning_aggregate_done_with_the_report_at_the_parent(embedded):
    def marvin(kind, messages):
        if kind == "aggregate":
            return aggregate_from(messages)
        if "Findings so far" in messages[-1].content:
            return plan("beta deeper")
        return plan("alpha", "beta")

    def worker(step, messages):
        return worker_json(f"{step} found", more=["look closer"] if step == "beta" else None)

    flow = Flow(marvin, worker)
    session = run(embedded, flow)
    process = marvin_of(embedded, session)
    assert (process.status, process.close_reason) == (ProcessStatus.CLOSED, CloseReason.DONE)
    tree = tree_of(process)
    assert shape(tree) == [
        ("n1", "PLAN", None, "DONE"), ("n2", "WORKER", "n1", "DONE"),
        ("n3", "WORKER", "n1", "DONE"), ("n4", "AGGREGATE", "n1", "DONE"),
        ("n5", "PLAN", "n3", "DONE"), ("n6", "WORKER", "n5", "DONE"),
        ("n7", "AGGREGATE", "n5", "DONE")]
    assert [n.level for n in tree.nodes.values()] == [1, 1, 1, 1, 2, 2, 2]
    assert "look closer" in tree.nodes["n5"].goal and "beta found" in tree.nodes["n5"].goal
    # The sub-aggregate saw its one step; the root saw both, with the deeper synthesis.
    assert tree.nodes["n7"].result.summary == "Synthesis of n6."
    assert tree.nodes["n4"].result.summary == "Synthesis of n2, n3."
    assert "Synthesis of n6." in flow.calls["aggregate"][-1][-1].content
    assert tree.nodes["n2"].result.data == {"said": "alpha found"}
    # One child per worker node, each run once, all of the marvin-worker recipe.
    children = [p for p in embedded.brain.store.port(SessionStore).list_processes(
        "acme", session.id) if p.parent_process_id == process.id]
    assert sorted(c.id for c in children) == sorted(
        tree.nodes[n].child_process_id for n in ("n2", "n3", "n6"))
    assert {c.recipe_name for c in children} == {"marvin-worker"}
    assert all(tree.nodes[n].attempts == 1 for n in ("n2", "n3", "n6"))
    assert len(flow.calls["worker"]) == 3 and len(flow.calls["plan"]) == 2
    # The report reached Arthur as the done event, with the structured payload.
    event = next(line.content for line in chat(embedded, session.chat_process_id)
                 if line.role is ChatRole.EVENT and 'type="done"' in line.content
                 and process.id in line.content)
    assert "Synthesis of n2, n3." in event
    payload = json.loads(event.split("<payload>")[1].split("</payload>")[0])
    assert payload["result"] == {"steps": ["n2", "n3"]}
    assert [n["id"] for n in payload["tree"]] == [f"n{i}" for i in range(1, 8)]
    # Events: a snapshot at start, then node changes a client can draw the tree from.
    events = [e for e in embedded.brain.events.read(session.id, 0)
              if e.process_id == process.id]
    kinds = [e.type for e in events if e.type in (EventType.TASK_TREE, EventType.TASK_NODE)]
    assert kinds[0] is EventType.TASK_TREE and kinds.count(EventType.TASK_TREE) == 1
    last = {}
    for e in events:
        if e.type is EventType.TASK_NODE:
            last[e.data["node"]["id"]] = e.data["node"]["status"]
    assert last == {n.id: n.status.value for n in tree.nodes.values()}


def test_the_tree_is_readable_over_the_protocol(embedded):
    session = run(embedded, Flow(lambda kind, m: aggregate_from(m) if kind == "aggregate"
                                 else plan("alpha"), lambda step, m: worker_json("ok")))
    process = marvin_of(embedded, session)
    client = Client(embedded, embedded.who)
    try:
        shown = client.ok("process-status", processId=process.id)["process"]
    finally:
        client.close()
    assert shown["engine"] == "marvin"
    assert [n["kind"] for n in shown["engineState"]["tree"]["nodes"].values()] == [
        "PLAN", "WORKER", "AGGREGATE"]


def test_invalid_plan_is_repaired_once(embedded):
    answers = iter([call("marvin_plan", steps=[], aggregate="x"), plan("alpha")])

    def marvin(kind, messages):
        return aggregate_from(messages) if kind == "aggregate" else next(answers)

    flow = Flow(marvin, lambda step, m: worker_json("ok"))
    process = marvin_of(embedded, run(embedded, flow))
    assert process.close_reason is CloseReason.DONE
    assert "steps: List should have at least 1 item" in flow.calls["plan"][1][-1].content


def test_plan_invalid_twice_fails_the_node_and_the_process_reports_it(embedded):
    flow = Flow(lambda kind, m: LlmResponse("this is not JSON"), None)
    session = run(embedded, flow)
    process = marvin_of(embedded, session)
    assert (process.status, process.close_reason) == (ProcessStatus.CLOSED, CloseReason.FAILED)
    assert process.last_error is None  # a clean end of the engine, not a crash
    root = tree_of(process).nodes["n1"]
    assert root.status.value == "FAILED" and "marvin_plan" in root.error
    assert len(flow.calls["plan"]) == 2
    event = next(line.content for line in chat(embedded, session.chat_process_id)
                 if 'type="failed"' in line.content)
    assert "Marvin could not plan" in event and "invalid after 1 repair" in event


def test_node_and_depth_limits_hold(embedded):
    embedded.brain.settings.set("acme", SettingScope.tenant(), "marvin.maxNodes", 6)
    embedded.brain.settings.set("acme", SettingScope.tenant(), "marvin.maxDepth", 2)
    try:
        def marvin(kind, messages):
            return aggregate_from(messages) if kind == "aggregate" else \
                plan("a", "b", "c", "d", "e", "f", "g")

        def worker(step, messages):  # every worker wants more planning, forever
            return worker_json(f"{step} done", more=["deeper"])

        process = marvin_of(embedded, run(embedded, Flow(marvin, worker)))
    finally:
        for key in ("marvin.maxNodes", "marvin.maxDepth"):
            embedded.brain.settings.unset("acme", SettingScope.tenant(), key)
    tree = tree_of(process)
    assert process.close_reason is CloseReason.DONE
    assert len(tree.nodes) <= 6
    # The root plan was cut to the 4 steps that fit beside it and its aggregate.
    assert [n.kind.value for n in tree.children(tree.nodes["n1"])] == ["WORKER"] * 4 + [
        "AGGREGATE"]
    assert "3 step(s) dropped" in tree.nodes["n1"].note
    refused = [n for n in tree.nodes.values() if n.note and "more planning" in n.note]
    assert len(refused) == 4 and "marvin.maxNodes is 6" in refused[0].note
    assert "Not completed" in tree.nodes["n6"].result.summary


def test_user_input_blocks_and_the_forwarded_answer_continues(embedded):
    def marvin(kind, messages):
        if kind == "aggregate":
            return aggregate_from(messages)
        return plan("alpha", {"kind": "USER_INPUT", "goal": "Which region matters?"}, "beta")

    flow = Flow(marvin, lambda step, m: worker_json(f"{step}: {m[0].content.count('EMEA')}"))
    session = run(embedded, flow)
    process = marvin_of(embedded, session)
    assert process.status is ProcessStatus.BLOCKED
    tree = tree_of(process)
    assert shape(tree)[1:4] == [("n2", "WORKER", "n1", "DONE"),
                                ("n3", "USER_INPUT", "n1", "RUNNING"),
                                ("n4", "WORKER", "n1", "PENDING")]
    arthur = [line.content for line in chat(embedded, session.chat_process_id)
              if line.role is ChatRole.ASSISTANT]
    assert arthur[-1] == "Marvin asks: Which region matters?"

    embedded.brain.sessions.steer(embedded.who, session.chat_process_id, "answer: EMEA")
    embedded.worker.join(timeout=30)
    process = marvin_of(embedded, session)
    assert process.close_reason is CloseReason.DONE
    tree = tree_of(process)
    assert tree.nodes["n3"].result.summary == "EMEA"
    # The step after the question got the answer with its goal.
    assert tree.nodes["n4"].result.summary == "beta: 1"
    assert [line.content for line in chat(embedded, process.id)
            if line.role is ChatRole.USER] == ["EMEA"]


def _failing_flow():
    def worker(step, messages):
        if step == "broken":
            raise RuntimeError("worker model exploded")
        return worker_json(f"{step} ok")

    def marvin(kind, messages):
        if kind == "aggregate":
            return aggregate_from(messages)
        if "Find another way to: broken" in messages[-1].content:
            return plan("detour")
        return plan("fine", "broken")

    return Flow(marvin, worker)


def test_a_failing_worker_is_retried_then_replanned_and_the_report_says_so(embedded):
    flow = _failing_flow()
    process = marvin_of(embedded, run(embedded, flow))
    assert process.close_reason is CloseReason.DONE
    tree = tree_of(process)
    broken = tree.nodes["n3"]
    assert (broken.status.value, broken.attempts) == ("FAILED", 2)  # marvin.workerRetries 1
    assert broken.error == "the worker failed: Process deep-n3 (ford) is failed."
    assert shape(tree)[4:] == [("n5", "PLAN", "n3", "DONE"), ("n6", "WORKER", "n5", "DONE"),
                               ("n7", "AGGREGATE", "n5", "DONE")]
    assert "The worker failed 2 time(s)" in tree.nodes["n5"].goal
    report = tree.nodes["n4"].result.summary
    assert "**Not completed:**" in report and "`n3` WORKER “broken”: FAILED after 2" in report
    assert "re-planned beneath it" in report
    assert "Synthesis of n6." in flow.calls["aggregate"][-1][-1].content


def test_without_replanning_a_failed_worker_fails_its_node(embedded):
    embedded.brain.settings.set("acme", SettingScope.tenant(), "marvin.replanFailed", False)
    embedded.brain.settings.set("acme", SettingScope.tenant(), "marvin.workerRetries", 0)
    try:
        process = marvin_of(embedded, run(embedded, _failing_flow()))
    finally:
        for key in ("marvin.replanFailed", "marvin.workerRetries"):
            embedded.brain.settings.unset("acme", SettingScope.tenant(), key)
    tree = tree_of(process)
    assert process.close_reason is CloseReason.DONE
    assert shape(tree) == [("n1", "PLAN", None, "DONE"), ("n2", "WORKER", "n1", "DONE"),
                           ("n3", "WORKER", "n1", "FAILED"), ("n4", "AGGREGATE", "n1", "DONE")]
    assert tree.nodes["n3"].attempts == 1
    assert "`n3` WORKER “broken”: FAILED after 1 attempt(s)" in tree.nodes["n4"].result.summary


def test_a_template_starts_from_the_prefilled_tree(embedded):
    def marvin(kind, messages):
        if kind == "plan":  # only the template's PLAN step, never the root
            assert "Find the open questions" in messages[-1].content
            return plan("risks", "disagreements")
        return aggregate_from(messages)

    flow = Flow(marvin, lambda step, m: worker_json(step[:20]),
                params={"template": "research-brief"})
    process = marvin_of(embedded, run(embedded, flow))
    assert process.close_reason is CloseReason.DONE
    tree = tree_of(process)
    assert tree.template == "research-brief"
    assert [n.kind.value for n in tree.children(tree.nodes["n1"])] == [
        "WORKER", "WORKER", "PLAN", "AGGREGATE"]
    assert tree.nodes["n2"].goal == f"Background and key concepts of: {GOAL}"
    assert len(flow.calls["plan"]) == 1
    assert [(n.kind.value, n.parent, n.level) for n in tree.children(tree.nodes["n4"])] == [
        ("WORKER", "n4", 2), ("WORKER", "n4", 2), ("AGGREGATE", "n4", 2)]
    # The root synthesis saw the planned step's own synthesis.
    assert "Synthesis of n6, n7." in flow.calls["aggregate"][-1][-1].content
    assert all(n.status.value == "DONE" for n in tree.nodes.values())


def test_an_unknown_template_fails_at_start_with_a_clear_message(embedded):
    flow = Flow(None, None, params={"template": "research-brif"})
    session = run(embedded, flow)
    process = marvin_of(embedded, session)
    assert process.close_reason is CloseReason.FAILED
    assert [line.content for line in chat(embedded, process.id)] == [
        "Marvin cannot start: no template named 'research-brif'; "
        "did you mean 'research-brief'?"]
    assert not flow.calls["plan"]


BUNDLED = bundled_of(WorkflowTemplate).definitions


def _process(goal: str, **params) -> ThinkProcess:
    return ThinkProcess(id="p", tenant_id="t", session_id="s", user_id="u", name="m",
                        goal=goal, engine="marvin", engine_version="1.0.0", engine_params=params)


def _parse(text: str) -> WorkflowTemplate:
    return parse_definition(WorkflowTemplate, text, "t.yaml")


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_every_bundled_template_loads_and_instantiates(name):
    process = _process("Pick a CI service", template=name)
    tree = tree_from_template(BUNDLED[name], process)
    assert tree.template == name and tree.nodes["n1"].status.value == "DONE"
    assert all("Pick a CI service" in n.goal for n in tree.nodes.values()
               if n.kind.value == "WORKER")
    assert list(tree.nodes.values())[-1].kind.value == "AGGREGATE"


def test_bundled_templates_load_and_invalid_ones_name_the_field():
    assert sorted(BUNDLED) == ["compare-options", "research-brief"]
    assert BUNDLED["compare-options"].steps[2].kind == "USER_INPUT"
    planned = _parse("name: t\nsteps: [{kind: PLAN, goal: 'Plan {{ goal }}'}]\naggregate: x")
    step = tree_from_template(planned, _process("g")).nodes["n2"]
    assert (step.kind.value, step.goal, step.level, step.status.value) == (
        "PLAN", "Plan g", 2, "PENDING")  # expanded by the LLM when it runs
    with pytest.raises(RecipeError, match=r"t.yaml: steps.0.goal: .*unknown variable"):
        _parse("name: t\nsteps: [{goal: '{{ user }}'}]\naggregate: x")
    with pytest.raises(RecipeError, match=r"t.yaml: aggregate: .*unknown variable"):
        _parse("name: t\nsteps: [{goal: g}]\naggregate: '{{ process.id }}'")
    with pytest.raises(RecipeError, match=r"steps.0.kind"):
        _parse("name: t\nsteps: [{kind: AGGREGATE, goal: g}]\naggregate: x")
    sandboxed = _parse("name: t\nsteps: [{goal: '{{ goal.__class__ }}'}]\naggregate: x")
    with pytest.raises(RecipeError, match=r"template 't': steps.0.goal: not allowed"):
        tree_from_template(sandboxed, _process("g"))
    needs = _parse("name: t\nsteps: [{goal: 'Go {{ params.depth }}'}]\naggregate: x")
    with pytest.raises(RecipeError, match=r"template 't': steps.0.goal: undefined variable"):
        tree_from_template(needs, _process("g"))
    assert tree_from_template(needs, _process("g", depth=2)).nodes["n2"].goal == "Go 2"


def test_a_template_that_does_not_render_fails_the_process_naming_the_field(embedded):
    flow = Flow(None, None, params={"template": "research-brief", "x": 1})
    embedded.brain.recipe_admin.of(WorkflowTemplate).create("acme", None, _parse(
        "name: research-brief\nsteps: [{goal: 'Go {{ params.depth }}'}]\naggregate: x"))
    try:
        process = marvin_of(embedded, run(embedded, flow))
    finally:
        embedded.brain.recipe_admin.of(WorkflowTemplate).delete("acme", None, "research-brief")
    assert process.close_reason is CloseReason.FAILED
    [line] = chat(embedded, process.id)
    assert line.content.startswith("Marvin cannot start: template 'research-brief': "
                                   "steps.0.goal: undefined variable")
    assert not flow.calls["plan"]


def test_worker_reports_are_read_leniently():
    assert parse_worker_report("```json\n{\"summary\": \"s\", \"needsPlanning\": true}\n```"
                               ).needs_planning
    assert parse_worker_report("plain words").summary == "plain words"
    assert parse_worker_report("[1, 2]").summary == "[1, 2]"


def test_marvin_works_on_the_offline_demo_model(embedded):
    embedded.worker.join()
    embedded.model = DemoModel()
    session = embedded.brain.sessions.create(embedded.who)
    process = embedded.brain.sessions.create_process(embedded.who, session.id, "marvin",
                                                    goal="Compare three databases")
    embedded.worker.join(timeout=30)
    done = embedded.brain.sessions.process(embedded.who, process.id)
    assert done.close_reason is CloseReason.DONE
    tree = tree_of(done)
    assert [n.kind.value for n in tree.nodes.values()] == [
        "PLAN", "WORKER", "WORKER", "AGGREGATE"]
    assert all(n.result.data for n in tree.nodes.values() if n.kind.value == "WORKER")
    final = chat(embedded, process.id)[-1]
    assert final.role is ChatRole.ASSISTANT and "Compare three databases" in final.content


def test_the_token_budget_stops_growth_but_the_tree_still_finishes(embedded):
    embedded.brain.settings.set("acme", SettingScope.tenant(), "marvin.maxTokens", 1000)
    try:
        def marvin(kind, messages):
            if kind == "aggregate":
                return aggregate_from(messages)
            planned = plan("alpha")
            return LlmResponse("", planned.tool_calls, usage={"total_tokens": 1500})

        flow = Flow(marvin, lambda step, m: worker_json("more", more=["deeper"]))
        process = marvin_of(embedded, run(embedded, flow))
    finally:
        embedded.brain.settings.unset("acme", SettingScope.tenant(), "marvin.maxTokens")
    tree = tree_of(process)
    assert process.close_reason is CloseReason.DONE and len(flow.calls["plan"]) == 1
    assert "marvin.maxTokens (1000) is spent" in tree.nodes["n2"].note
    # Usage counts where the endpoint gives it, an estimate where not (the aggregate here).
    assert tree.tokens_used > 1500
