"""marvin — deep-think: a persistent, dynamically growing task tree (think-engines §7, §9).

The tree lives in ``engineState.tree``. A PLAN node is expanded by one structured LLM call
into WORKER and USER_INPUT steps plus one AGGREGATE; each WORKER runs as a child process
(recipe ``marvin-worker``) whose report arrives as a ProcessEvent; a worker that asks for
more planning grows a PLAN beneath it; the AGGREGATE of a plan synthesizes its steps, and
the root's aggregate is the final report. Each turn loads the tree, routes the drained
messages into it, advances every node that can move, and saves the tree with the turn's
spawns and status in one fenced commit, so a re-run after a kill repeats no committed
decision. docs/engines.md ("marvin") describes the algorithm, settings and events.
"""

from __future__ import annotations

import contextlib
import json
import re
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from vancetope_brain.engines.base import ParentReport, ThinkEngine, register_engine
from vancetope_brain.engines.context import ThinkEngineContext
from vancetope_brain.engines.memory_api import record_report
from vancetope_brain.engines.prompting import event_text, system_prompt
from vancetope_brain.engines.structured import structured
from vancetope_brain.errors import Conflict, LlmError, NotFound, UserError
from vancetope_brain.events import EventType
from vancetope_brain.llm import LlmMessage, LlmResponse, budget
from vancetope_brain.models import (
    ChatRole,
    CloseReason,
    InboxMessage,
    ProcessEvent,
    ProcessStatus,
    ThinkProcess,
    UserChatInput,
)
from vancetope_brain.models.base import Wire
from vancetope_brain.models.recipe import KEBAB
from vancetope_brain.models.render import render_text
from vancetope_brain.models.steer import ProcessEventType
from vancetope_brain.models.workflow_template import MAX_GOAL_CHARS, MAX_STEPS, WorkflowTemplate

WORKER_RECIPE = "marvin-worker"
MAX_STEPS_PER_PLAN = MAX_STEPS
"""Most steps one PLAN call may produce (besides its AGGREGATE); also a template's cap."""
MAX_NOTES = 20
"""Most steering messages kept for the prompts (the oldest go first)."""
FALLBACK_PROMPT = "You are Marvin, a deep-think planner: plan, delegate, synthesize."


class NodeKind(StrEnum):
    PLAN = "PLAN"
    WORKER = "WORKER"
    USER_INPUT = "USER_INPUT"
    AGGREGATE = "AGGREGATE"


class NodeStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    DONE = "DONE"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"


TERMINAL = frozenset({NodeStatus.DONE, NodeStatus.FAILED, NodeStatus.SKIPPED})


class NodeResult(Wire):
    """What a node produced: a Markdown summary and structured data."""

    summary: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class TaskNode(Wire):
    """One node. ``level`` is the planning level of the plan the node belongs to (the root
    plan and its steps are level 1). ``note`` says why a node did less than it was asked
    (e.g. more planning refused by a limit)."""

    id: str
    kind: NodeKind
    parent: str | None = None
    goal: str
    status: NodeStatus = NodeStatus.PENDING
    attempts: int = 0
    level: int = 1
    recipe: str | None = None
    child_process_id: str | None = None
    result: NodeResult | None = None
    error: str | None = None
    note: str | None = None
    children: list[str] = Field(default_factory=list)


class TaskTree(Wire):
    """The whole tree; ``nodes`` keeps creation order (ids ``n1``, ``n2`` …)."""

    schema_version: int = 1
    root: str = "n1"
    nodes: dict[str, TaskNode] = Field(default_factory=dict)
    next_id: int = 1
    tokens_used: int = 0
    notes: list[str] = Field(default_factory=list)
    template: str | None = None

    def add(self, kind: NodeKind, goal: str, parent: TaskNode | None, level: int,
            recipe: str | None = None) -> TaskNode:
        node = TaskNode(id=f"n{self.next_id}", kind=kind, goal=goal[:MAX_GOAL_CHARS],
                        parent=parent.id if parent else None, level=level, recipe=recipe)
        self.next_id += 1
        self.nodes[node.id] = node
        if parent is not None:
            parent.children.append(node.id)
        return node

    def children(self, node: TaskNode) -> list[TaskNode]:
        return [self.nodes[c] for c in node.children]

    def settled(self, node: TaskNode) -> bool:
        """Finished, and so is everything beneath it."""
        return node.status in TERMINAL and all(map(self.settled, self.children(node)))

    def aggregate_of(self, plan: TaskNode) -> TaskNode | None:
        return next((c for c in self.children(plan) if c.kind is NodeKind.AGGREGATE), None)

    def subtree(self, node: TaskNode) -> list[TaskNode]:
        found = []
        for child in self.children(node):
            found += [child, *self.subtree(child)]
        return found

    def of_kind(self, kind: NodeKind, status: NodeStatus) -> list[TaskNode]:
        return [n for n in self.nodes.values() if n.kind is kind and n.status is status]


class MarvinView(Wire):
    """marvin's task tree as the web client draws it (the ``task-tree`` and ``task-node``
    events carry the same tree and nodes)."""

    engine: Literal["marvin"] = "marvin"
    tree: TaskTree


# ── the LLM's outputs ────────────────────────────────────────────────────────────────

class PlannedStep(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["WORKER", "USER_INPUT"] = Field(
        default="WORKER", description="WORKER: a worker does it; USER_INPUT: a question "
        "only the user can answer (the goal is the question)")
    goal: str = Field(min_length=1, max_length=MAX_GOAL_CHARS,
                      description="what the worker must do, understandable on its own")
    recipe: str | None = Field(default=None, pattern=KEBAB,
                               description=f"a worker recipe; default {WORKER_RECIPE}")


class PlanOutput(BaseModel):
    """A plan: steps that run in parallel (a USER_INPUT step waits for the steps before it,
    the steps after it wait for its answer), then how to aggregate them."""

    model_config = ConfigDict(extra="forbid")

    steps: list[PlannedStep] = Field(min_length=1, max_length=MAX_STEPS_PER_PLAN)
    aggregate: str = Field(min_length=1, max_length=MAX_GOAL_CHARS,
                           description="how the steps' results are to be combined")


class AggregateOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    summary: str = Field(min_length=1, description="the synthesis, in Markdown")
    result: dict[str, Any] = Field(default_factory=dict,
                                   description="the synthesis as structured data")


class WorkerReport(BaseModel):
    """What a ``marvin-worker`` reports (its respond message, as JSON)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    summary: str
    result: dict[str, Any] = Field(default_factory=dict)
    needs_planning: bool = False
    follow_ups: list[str] = Field(default_factory=list)


def parse_worker_report(text: str | None) -> WorkerReport:
    """Lenient: a JSON object (optionally fenced) is read as a report; anything else is the
    summary."""
    text = (text or "").strip()
    body = re.sub(r"^```(?:json)?\s*|\s*```$", "", text)
    try:
        raw = json.loads(body)
        if isinstance(raw, dict):
            raw.setdefault("summary", "")
            return WorkerReport.model_validate(raw)
    except (ValueError, ValidationError):
        pass
    return WorkerReport(summary=text)


# ── workflow templates (think-engines §9) ────────────────────────────────────────────

def _render_goal(template: WorkflowTemplate, where: str, source: str,
                 process: ThinkProcess) -> str:
    return render_text(f"template {template.name!r}: {where}", source,
                       {"goal": process.goal, "params": process.engine_params})


def tree_from_template(template: WorkflowTemplate, process: ThinkProcess) -> TaskTree:
    """The pre-filled tree: a DONE root plan with the template's steps (goals rendered now;
    a PLAN step is expanded by the LLM when it runs) and its aggregate. Raises
    ``RecipeError`` for a goal that does not render (e.g. a missing ``params`` key)."""
    tree = TaskTree(template=template.name)
    root = tree.add(NodeKind.PLAN, process.goal or template.description or template.name,
                    None, 1)
    for i, step in enumerate(template.steps):
        tree.add(NodeKind(step.kind), _render_goal(template, f"steps.{i}.goal", step.goal,
                                                   process),
                 root, 2 if step.kind == "PLAN" else 1, step.recipe)
    tree.add(NodeKind.AGGREGATE, _render_goal(template, "aggregate", template.aggregate,
                                              process), root, 1)
    root.status = NodeStatus.DONE
    root.result = NodeResult(summary=f"From the workflow template {template.name}.")
    return tree


# ── the engine ───────────────────────────────────────────────────────────────────────

@register_engine
class MarvinEngine(ThinkEngine):
    name = "marvin"
    title = "Marvin Deep-Think"
    description = ("Plans a task tree for a goal, runs independent steps as parallel workers, "
                   "plans deeper where needed and reports one synthesized result.")
    version = "1.0.0"
    allowed_tools = frozenset()
    view_model = MarvinView

    def start(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        try:
            tree = _new_tree(process, context)
        except UserError as e:
            context.drain_pending()
            context.chat().append(ChatRole.ERROR, f"Marvin cannot start: {e}")
            context.save_state({"error": str(e)})
            context.set_status(ProcessStatus.CLOSED, CloseReason.FAILED)
            return
        run = Run(process, context, tree)
        context.events().emit(EventType.TASK_TREE, {"tree": tree.dump()})
        run.take(context.drain_pending())
        run.advance()
        run.finish()

    def steer(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        if "tree" not in process.engine_state:
            self.start(process, context)
            return
        run = Run(process, context, TaskTree.model_validate(process.engine_state["tree"]))
        run.take(context.drain_pending())
        run.advance()
        run.finish()

    def summarize_for_parent(self, process: ThinkProcess,
                             event_type: ProcessEventType) -> ParentReport:
        state = process.engine_state
        if "tree" not in state:
            return ParentReport(f"Marvin could not start: {state.get('error', 'no tree')}",
                                {"error": state.get("error")})
        tree = TaskTree.model_validate(state["tree"])
        if event_type is ProcessEventType.BLOCKED:
            asking = tree.of_kind(NodeKind.USER_INPUT, NodeStatus.RUNNING)
            if asking:
                return ParentReport(asking[0].goal, {"nodeId": asking[0].id,
                                                     "question": asking[0].goal})
        if event_type in (ProcessEventType.DONE, ProcessEventType.FAILED):
            summary, data = final_report(tree)
            return ParentReport(summary, {"result": data, "tree": outline(tree),
                                          "tokensUsed": tree.tokens_used,
                                          "report_id": state.get(REPORT_ID)})
        return super().summarize_for_parent(process, event_type)

    def view(self, process: ThinkProcess) -> MarvinView | None:
        tree = process.engine_state.get("tree")
        return MarvinView(tree=TaskTree.model_validate(tree)) if tree is not None else None


def _new_tree(process: ThinkProcess, context: ThinkEngineContext) -> TaskTree:
    """The tree to start from: the workflow template named by the param ``template`` (the
    innermost of the process's project → tenant → bundled catalogue), else one PLAN node
    for the goal. Raises ``UnknownRecipe`` suggesting the closest name, or ``RecipeError``
    naming the field."""
    name = process.engine_params.get("template")
    if name:
        template = context.recipes().definition(WorkflowTemplate, str(name))
        return tree_from_template(template, process)
    if not process.goal.strip():
        raise Conflict("marvin needs a goal (or a workflow template)")
    tree = TaskTree()
    tree.add(NodeKind.PLAN, process.goal, None, 1)
    return tree


def final_report(tree: TaskTree) -> tuple[str, dict[str, Any]]:
    """The root aggregate's synthesis, or why there is none."""
    root = tree.nodes[tree.root]
    aggregate = tree.aggregate_of(root)
    if aggregate is not None and aggregate.result is not None:
        return aggregate.result.summary, aggregate.result.data
    if root.status is NodeStatus.FAILED:
        return f"Marvin could not plan “{root.goal}”: {root.error}", {}
    return "Marvin has no report yet.", {}


def outline(tree: TaskTree) -> list[dict[str, Any]]:
    """The tree in brief, for a parent's payload."""
    return [{"id": n.id, "kind": n.kind.value, "parent": n.parent, "goal": n.goal[:200],
             "status": n.status.value, "attempts": n.attempts,
             **({"error": n.error} if n.error else {})} for n in tree.nodes.values()]


class Run:
    """One turn's work on the tree. Every change of a node is announced as a ``task-node``
    event as it happens (a live overlay; the saved tree is the record)."""

    def __init__(self, process: ThinkProcess, context: ThinkEngineContext,
                 tree: TaskTree) -> None:
        self.process, self.context, self.tree = process, context, tree
        settings = context.settings()
        self.max_depth: int = settings.get("marvin.maxDepth")
        self.max_nodes: int = settings.get("marvin.maxNodes")
        self.max_parallel: int = settings.get("marvin.maxParallelWorkers")
        self.max_tokens: int = settings.get("marvin.maxTokens")
        self.retries: int = settings.get("marvin.workerRetries")
        self.replan: bool = settings.get("marvin.replanFailed")
        self.asked = False

    # ── changes ──
    def change(self, node: TaskNode, **fields: Any) -> None:
        for name, value in fields.items():
            setattr(node, name, value)
        self.context.events().emit(EventType.TASK_NODE, {"node": node.dump()})

    def add(self, kind: NodeKind, goal: str, parent: TaskNode, level: int,
            recipe: str | None = None) -> TaskNode:
        node = self.tree.add(kind, goal, parent, level, recipe)
        self.context.events().emit(EventType.TASK_NODE, {"node": node.dump()})
        return node

    # ── messages ──
    def take(self, envelopes: list[InboxMessage]) -> None:
        chat = self.context.chat()
        for envelope in envelopes:
            message = envelope.message
            if isinstance(message, UserChatInput):
                chat.append(ChatRole.USER, message.content, source=envelope)
                self._user_input(message.content)
                continue
            chat.append(ChatRole.EVENT, event_text(message), source=envelope)
            if isinstance(message, ProcessEvent):
                self._report(message)

    def _user_input(self, text: str) -> None:
        asking = self.tree.of_kind(NodeKind.USER_INPUT, NodeStatus.RUNNING)
        if asking:
            self.change(asking[0], status=NodeStatus.DONE, result=NodeResult(
                summary=text, data={"question": asking[0].goal, "answer": text}))
        else:  # steering: later plans and aggregates see it
            self.tree.notes = [*self.tree.notes, text[:MAX_GOAL_CHARS]][-MAX_NOTES:]

    def _report(self, event: ProcessEvent) -> None:
        node = next((n for n in self.tree.of_kind(NodeKind.WORKER, NodeStatus.RUNNING)
                     if n.child_process_id == event.source_process_id), None)
        if node is None:
            return  # a report of an earlier attempt, or not from one of our workers
        if event.type is ProcessEventType.DONE:
            report = parse_worker_report(event.human_summary)
            self.change(node, status=NodeStatus.DONE,
                        result=NodeResult(summary=report.summary, data=report.result))
            if report.needs_planning:
                follow = "".join(f"\n- {goal}" for goal in report.follow_ups[:MAX_STEPS_PER_PLAN])
                self._grow(node, f"{node.goal}\n\nFindings so far:\n{report.summary}"
                           + (f"\n\nFollow up on:{follow}" if follow else ""),
                           "more planning was asked for")
            return
        if event.type not in (ProcessEventType.FAILED, ProcessEventType.STOPPED,
                              ProcessEventType.BLOCKED):
            return
        if event.type is ProcessEventType.BLOCKED:
            # Workers must not ask (their recipe says so); a question counts as a failure.
            with contextlib.suppress(Conflict, NotFound):
                self.context.processes().stop(event.source_process_id)
        error = f"the worker {event.type.value}: {(event.human_summary or '')[:500]}"
        if node.attempts <= self.retries:
            self.change(node, status=NodeStatus.PENDING, child_process_id=None, error=error)
        else:
            self.change(node, status=NodeStatus.FAILED, error=error)
            if self.replan:
                self._grow(node, f"Find another way to: {node.goal}\n\nThe worker failed "
                           f"{node.attempts} time(s), last: {error}", "a replan was due")

    def _grow(self, node: TaskNode, goal: str, reason: str) -> None:
        """A PLAN one level beneath ``node``, unless a limit forbids it (then ``note`` says
        which)."""
        level = node.level + 1
        if level > self.max_depth:
            limit = f"marvin.maxDepth is {self.max_depth}"
        elif len(self.tree.nodes) + 3 > self.max_nodes:
            limit = f"marvin.maxNodes is {self.max_nodes}"
        elif self._spent():
            limit = f"marvin.maxTokens ({self.max_tokens}) is spent"
        else:
            self.add(NodeKind.PLAN, goal, node, level)
            return
        self.change(node, note=f"{reason}, but {limit}")

    # ── advancing ──
    def advance(self) -> None:
        """Run every node that can run now, until nothing more can."""
        while (node := self._next()) is not None:
            if node.kind is NodeKind.PLAN:
                self._plan(node)
            elif node.kind is NodeKind.AGGREGATE:
                self._aggregate(node)
            elif node.kind is NodeKind.WORKER:
                self._spawn(node)
            else:
                self.change(node, status=NodeStatus.RUNNING)
                self.asked = True

    def _next(self) -> TaskNode | None:
        running = len(self.tree.of_kind(NodeKind.WORKER, NodeStatus.RUNNING))
        asking = self.tree.of_kind(NodeKind.USER_INPUT, NodeStatus.RUNNING)
        for node in self.tree.nodes.values():
            if node.status is not NodeStatus.PENDING or not self._ready(node):
                continue
            if node.kind is NodeKind.WORKER and running >= self.max_parallel:
                continue
            # One question at a time, and only once no worker runs: a BLOCKED marvin that a
            # worker's report woke would otherwise ask its parent the same question again.
            if node.kind is NodeKind.USER_INPUT and (running or asking):
                continue
            return node
        return None

    def _ready(self, node: TaskNode) -> bool:
        parent = self.tree.nodes.get(node.parent or "")
        if parent is None or parent.kind is not NodeKind.PLAN:
            return True
        siblings = self.tree.children(parent)
        before = siblings[:siblings.index(node)]
        if node.kind is NodeKind.AGGREGATE:
            return all(self.tree.settled(s) for s in siblings if s is not node)
        if node.kind is NodeKind.USER_INPUT:
            return all(map(self.tree.settled, before))
        return all(self.tree.settled(s) for s in before if s.kind is NodeKind.USER_INPUT)

    def _spent(self) -> bool:
        return self.tree.tokens_used >= self.max_tokens

    def _count(self, messages: list[LlmMessage], response: LlmResponse) -> None:
        used = response.usage.get("total_tokens") or (
            budget.estimate(messages, []) + budget.message_tokens(
                LlmMessage("assistant", response.content, tool_calls=response.tool_calls)))
        self.tree.tokens_used += used

    def _plan(self, node: TaskNode) -> None:
        room = min(MAX_STEPS_PER_PLAN, self.max_nodes - len(self.tree.nodes) - 1)
        if self._spent() or room < 1:
            limit = "marvin.maxTokens is spent" if self._spent() else \
                f"marvin.maxNodes ({self.max_nodes}) is reached"
            self.change(node, status=NodeStatus.SKIPPED, error=f"not planned: {limit}")
            return
        self.change(node, status=NodeStatus.RUNNING, attempts=node.attempts + 1)
        try:
            plan = structured(self.context, self._plan_input(node, room), PlanOutput,
                              tool="marvin_plan", description=PLAN_TOOL, on_response=self._count)
        except LlmError as e:
            self.context.chat().append(ChatRole.ERROR, f"Planning {node.id} failed: {e}")
            self.change(node, status=NodeStatus.FAILED, error=str(e))
            return
        steps = plan.steps[:room]
        for step in steps:
            self.add(NodeKind(step.kind), step.goal, node, node.level, step.recipe)
        self.add(NodeKind.AGGREGATE, plan.aggregate, node, node.level)
        dropped = len(plan.steps) - len(steps)
        self.change(node, status=NodeStatus.DONE, result=NodeResult(
            summary=f"Planned {len(steps)} step(s).", data={"steps": len(steps)}),
            note=f"{dropped} step(s) dropped: marvin.maxNodes is {self.max_nodes}"
            if dropped else None)

    def _plan_input(self, node: TaskNode, room: int) -> list[LlmMessage]:
        recipes = [r for r in self.context.recipes().catalogue()
                   if r["category"] == "worker" and r["engine"] == "ford"]
        lines = [f"Plan this goal (planning level {node.level} of at most {self.max_depth}):",
                 node.goal, "",
                 f"Give at most {room} step(s), then how to aggregate them.",
                 f"Worker recipes (default {WORKER_RECIPE}): "
                 + ", ".join(f"{r['name']} ({r['description'][:80]})" for r in recipes)]
        if node.parent is not None:
            lines += ["", f"This plan is part of the overall goal: {self.process.goal}"]
        return self._messages(lines)

    def _messages(self, lines: list[str]) -> list[LlmMessage]:
        if self.tree.notes:
            lines = [*lines, "", "Notes from the user while you worked:",
                     *(f"- {n}" for n in self.tree.notes)]
        return [LlmMessage("system", system_prompt(self.process, self.context,
                                                   FALLBACK_PROMPT)),
                LlmMessage("user", "\n".join(lines))]

    def _aggregate(self, node: TaskNode) -> None:
        plan = self.tree.nodes[node.parent or ""]
        steps = [self._describe(s) for s in self.tree.children(plan) if s is not node]
        self.change(node, status=NodeStatus.RUNNING, attempts=node.attempts + 1)
        failures = self._failures(plan)
        lines = [f"Aggregate the results of the plan for: {plan.goal}", "",
                 f"How to combine them: {node.goal}", "", "The steps and their results:",
                 json.dumps(steps, indent=1, ensure_ascii=False)]
        try:
            out = structured(self.context, self._messages(lines), AggregateOutput,
                             tool="marvin_aggregate", description=AGGREGATE_TOOL,
                             on_response=self._count)
        except LlmError as e:
            digest = "\n\n".join(f"**{s['goal'][:120]}** ({s['status']}): {s.get('summary', '')}"
                                 for s in steps)
            self.context.chat().append(ChatRole.ERROR, f"Aggregating {node.id} failed: {e}")
            self.change(node, status=NodeStatus.FAILED, error=str(e), result=NodeResult(
                summary=f"The synthesis failed ({e}); the steps' results:\n\n{digest}{failures}"))
            return
        self.change(node, status=NodeStatus.DONE,
                    result=NodeResult(summary=out.summary + failures, data=out.result))

    def _describe(self, node: TaskNode) -> dict[str, Any]:
        """A step as the aggregator sees it, with what was planned beneath it."""
        entry: dict[str, Any] = {"id": node.id, "kind": node.kind.value, "goal": node.goal,
                                 "status": node.status.value}
        if node.result is not None:
            entry |= {"summary": node.result.summary, "result": node.result.data}
        if node.error or node.note:
            entry["problem"] = node.error or node.note
        deeper = [self.tree.aggregate_of(c) for c in self.tree.children(node)
                  if c.kind is NodeKind.PLAN]
        if node.kind is NodeKind.PLAN:
            deeper = [self.tree.aggregate_of(node)]
        found = [d.result.summary for d in deeper if d is not None and d.result is not None]
        if found:
            entry["deeper"] = found
        return entry

    def _failures(self, plan: TaskNode) -> str:
        """What did not get done beneath ``plan``, said by marvin itself (not left to the LLM)."""
        lines = []
        for n in self.tree.subtree(plan):
            if n.status in (NodeStatus.FAILED, NodeStatus.SKIPPED) or n.note:
                what = n.error if n.status is not NodeStatus.DONE else n.note
                tries = f" after {n.attempts} attempt(s)" if n.kind is NodeKind.WORKER else ""
                if any(c.kind is NodeKind.PLAN for c in self.tree.children(n)):
                    what = f"{what}; re-planned beneath it"
                lines.append(f"- `{n.id}` {n.kind.value} “{n.goal.splitlines()[0][:120]}”: "
                             f"{n.status.value}{tries} — {what}")
        return "\n\n**Not completed:**\n" + "\n".join(lines) if lines else ""

    def _spawn(self, node: TaskNode) -> None:
        attempts = node.attempts + 1
        try:
            child = self.context.processes().spawn(
                recipe=node.recipe or WORKER_RECIPE, name=f"{self.process.name}-{node.id}",
                goal=self._worker_goal(node))
        except UserError as e:
            self.change(node, status=NodeStatus.FAILED, attempts=attempts,
                        error=f"could not start a worker: {e}")
            return
        self.change(node, status=NodeStatus.RUNNING, attempts=attempts,
                    child_process_id=child.id)

    def _worker_goal(self, node: TaskNode) -> str:
        plan = self.tree.nodes.get(node.parent or "")
        answers = [f"- {s.goal} → {s.result.summary}" for s in self.tree.children(plan)
                   if s.kind is NodeKind.USER_INPUT and s.result is not None] if plan else []
        parts = [node.goal, "", f"(One step of the overall goal: {self.process.goal})"]
        if answers:
            parts += ["", "The user's answers so far:", *answers]
        return "\n".join(parts)

    # ── ending the turn ──
    def finish(self) -> None:
        tree, context = self.tree, self.context
        root = tree.nodes[tree.root]
        report: dict[str, str | None] = {}
        if tree.settled(root):
            summary, _ = final_report(tree)
            aggregate = tree.aggregate_of(root)
            done = aggregate is not None and aggregate.status is NodeStatus.DONE
            context.chat().append(ChatRole.ASSISTANT if done else ChatRole.ERROR, summary)
            context.set_status(ProcessStatus.CLOSED, CloseReason.DONE if done
                               else CloseReason.FAILED)
            if done:  # the report as project memory; its id goes to the parent
                report = {REPORT_ID: record_report(context, goal=root.goal, summary=summary,
                                                   source="marvin:aggregate")}
        elif asking := tree.of_kind(NodeKind.USER_INPUT, NodeStatus.RUNNING):
            if self.asked:
                context.chat().append(ChatRole.ASSISTANT, asking[0].goal)
            context.set_status(ProcessStatus.BLOCKED)
        context.save_state({**self.process.engine_state, **report, "tree": tree.dump()})


REPORT_ID = "reportId"
"""``engineState`` key: the memory entry of the final report (the done event's
``report_id``; None when memory refused it)."""
PLAN_TOOL = ("Give the plan: steps that workers can do on their own (they run in parallel), "
             "USER_INPUT steps only for what only the user can answer, and how to aggregate.")
AGGREGATE_TOOL = "Give the synthesis of the steps' results: Markdown summary plus structured data."
