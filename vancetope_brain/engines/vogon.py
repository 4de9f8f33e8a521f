"""vogon — the strategy runner (think-engines §7 "vogon", user-interaction §10.3, §14).

Deterministic, no LLM of its own: a strategy (``vancetope_brain.models.strategy``) is a list
of phases; per phase Vogon spawns its worker(s) by recipe with a goal rendered from the input
and the earlier phases' results, waits for their reports (ProcessEvents), asks the user at an
optional checkpoint (an Inbox item; Vogon is BLOCKED until the InboxAnswer arrives), evaluates
the gate and goes on: to the next phase, to this phase again (a bounded loop), or where
``onFail`` says. Everything lives in ``engineState.strategyState`` (``VogonState``,
``vancetope_brain.engines.vogon_state``), written with the turn's spawns, so a turn that is
killed and re-run spawns nothing twice and resumes the right phase; the Inbox item's
idempotency key makes its creation safe to repeat.
"""

from __future__ import annotations

import json
from typing import Any

from vancetope_brain.engines.base import ParentReport, ThinkEngine, register_engine
from vancetope_brain.engines.context import ThinkEngineContext
from vancetope_brain.engines.memory_api import record_report
from vancetope_brain.engines.vogon_state import (
    BranchResult,
    CheckpointItem,
    GateRun,
    PhaseResult,
    StrategyRun,
    VogonState,
    VogonView,
    WorkerRun,
)
from vancetope_brain.errors import RecipeError, StrategyEnded, UserError
from vancetope_brain.events import EventType
from vancetope_brain.models import (
    ChatRole,
    CloseReason,
    InboxAnswer,
    ProcessEvent,
    ProcessStatus,
    ThinkProcess,
    UserChatInput,
)
from vancetope_brain.models.inbox import ItemStatus, ItemType, NewItem
from vancetope_brain.models.render import render_text
from vancetope_brain.models.steer import ProcessEventType
from vancetope_brain.models.strategy import END, STOP, Checkpoint, Condition, Gate, Phase, Strategy
from vancetope_brain.recipes.loader import definition_from_mapping

_MISSING = object()
_ENDED = ("done", "failed", "stopped")


@register_engine
class VogonEngine(ThinkEngine):
    name = "vogon"
    title = "Vogon"
    description = ("Strategy runner: runs a YAML strategy phase by phase — workers by recipe, "
                   "Inbox checkpoints, gates, bounded loops and forks.")
    version = "1.0.0"
    allowed_tools = frozenset()
    view_model = VogonView

    def start(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        try:
            strategy = _load(process, context)
        except UserError as e:
            context.chat().append(ChatRole.ERROR, f"Cannot run the strategy: {e}")
            context.save_state(VogonState(strategy_state=StrategyRun(
                outcome="failed", report=f"Cannot run the strategy: {e}", results={})).dump())
            context.set_status(ProcessStatus.CLOSED, CloseReason.FAILED)
            return
        state = StrategyRun(strategy=strategy, input=process.goal, phase=0, iteration=0, runs=0,
                            step="work", workers={}, item=None, results={}, history=[],
                            outcome=None)
        _Run(process, context, strategy, state).launch()

    def steer(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        state = _state(process)
        envelopes = context.drain_pending()
        if state.strategy is None or state.outcome:
            return
        run = _Run(process, context, state.strategy, state)
        for envelope in envelopes:
            run.take(envelope.message)
        run.advance()

    def summarize_for_parent(self, process: ThinkProcess,
                             event_type: ProcessEventType) -> ParentReport:
        state = _state(process)
        if event_type is ProcessEventType.BLOCKED:
            item = state.item
            if item and state.step == "ask":
                return ParentReport(item.title, {"itemId": item.id, "itemType": item.type,
                                                 "phase": _phase_name(state)})
            asking = [w for w in state.workers.values() if w.status == "blocked"]
            if asking:
                return ParentReport(f"Phase {_phase_name(state)}: a worker asks: "
                                    f"{asking[0].output}", {"phase": _phase_name(state)})
        if event_type in (ProcessEventType.DONE, ProcessEventType.FAILED) and \
                state.report is not None:
            return ParentReport(state.report, {
                "strategy": state.strategy.name if state.strategy else None,
                "outcome": state.outcome, "phases": state.phase_results(),
                "history": [h.dump() for h in state.history], "report_id": state.report_id})
        return super().summarize_for_parent(process, event_type)

    def view(self, process: ThinkProcess) -> VogonView | None:
        return VogonView.of(_state(process))


def _state(process: ThinkProcess) -> StrategyRun:
    return VogonState.load(process.engine_state).strategy_state or StrategyRun()


def _phase_name(state: StrategyRun) -> str:
    assert state.strategy is not None
    return state.strategy.phases[state.phase].name


def _load(process: ThinkProcess, context: ThinkEngineContext) -> Strategy:
    """``params.strategy``: a strategy's name (project → tenant → bundled) or one inline."""
    named = process.engine_params.get("strategy")
    if isinstance(named, dict):
        strategy = definition_from_mapping(Strategy, named, "params.strategy")
    elif isinstance(named, str) and named:
        strategy = context.recipes().definition(Strategy, named)
    else:
        raise RecipeError("params.strategy: name a strategy (or give one inline)")
    limit = context.settings().get("vogon.maxForkBranches")
    for i, phase in enumerate(strategy.phases):
        if len(phase.fork) > limit:
            raise RecipeError(f"strategy {strategy.name!r}: phases.{i}.fork: {len(phase.fork)} "
                              f"branches, more than vogon.maxForkBranches ({limit})")
    return strategy


class _Run:
    """One turn's view of a running strategy: ``state`` is changed in place and saved."""

    def __init__(self, process: ThinkProcess, context: ThinkEngineContext, strategy: Strategy,
                 state: StrategyRun) -> None:
        self.process, self.context, self.strategy, self.state = process, context, strategy, state

    @property
    def phase(self) -> Phase:
        return self.strategy.phases[self.state.phase]

    def _save(self) -> None:
        self.context.save_state(VogonState(strategy_state=self.state).dump())

    # ── messages ───────────────────────────────────────────────────────────
    def take(self, message: Any) -> None:
        workers = self.state.workers
        if isinstance(message, ProcessEvent):
            for worker in workers.values():
                if worker.process_id == message.source_process_id and \
                        message.type.value in (*_ENDED, "blocked"):
                    worker.status = message.type.value
                    worker.output = message.human_summary or ""
                    worker.payload = message.payload
        elif isinstance(message, InboxAnswer):
            item = self.state.item
            if item and item.id == message.inbox_item_id and not item.answered:
                item.answer = message.answer.dump() if message.answer else None
        elif isinstance(message, UserChatInput):
            asking = [w for w in workers.values() if w.status == "blocked"]
            if asking:  # the parent relays the user's answer to the worker that asked
                self.context.processes().steer(asking[0].process_id, message.content)
                asking[0].status = None
            else:
                self.context.chat().append(ChatRole.USER, message.content)

    # ── the phase machine ──────────────────────────────────────────────────
    def launch(self) -> None:
        try:
            self.begin(0, 1)
        except StrategyEnded as end:
            self._finish(end.outcome, end.reason)

    def advance(self) -> None:
        try:
            while self._step():
                pass
        except StrategyEnded as end:
            self._finish(end.outcome, end.reason)
            return
        self._save()

    def _step(self) -> bool:
        """Do what the current step can; False when the turn must wait (IDLE or BLOCKED)."""
        state, phase = self.state, self.phase
        if state.step == "work":
            workers = list(state.workers.values())
            if any(w.status is None for w in workers):
                return False
            if any(w.status == "blocked" for w in workers):
                self.context.set_status(ProcessStatus.BLOCKED)
                return False
            state.results[phase.name] = self._result(workers)
            state.step = "ask" if phase.checkpoint else "gate"
        if state.step == "ask":
            assert phase.checkpoint is not None
            if not self._answered(phase.checkpoint):
                self.context.set_status(ProcessStatus.BLOCKED)
                return False
            assert state.item is not None  # posted by _answered
            state.results[phase.name].answer = state.item.answer
            state.step = "gate"
        passed = self._holds(phase.effective_gate())
        state.history.append(GateRun(phase=phase.name, iteration=state.iteration,
                                     gate="passed" if passed else "failed"))
        self._note(f"Phase {phase.name} (run {state.iteration}): gate "
                   f"{'passed' if passed else 'failed'}.")
        self._event("gate", passed=passed)
        if passed:
            following = state.phase + 1 if phase.next is None else \
                len(self.strategy.phases) if phase.next == END else self.strategy.phase(phase.next)
            if following == len(self.strategy.phases):
                raise StrategyEnded("completed", f"phase {phase.name} passed its gate, the last "
                                "one to run")
            self.begin(following, 1)
        elif state.iteration < min(phase.max_iterations,
                                   self.context.settings().get("vogon.maxLoopIterations")):
            self.begin(state.phase, state.iteration + 1)
        else:
            target = phase.on_fail or self.strategy.on_fail
            count = state.iteration
            runs = "" if phase.max_iterations == 1 else \
                f" after {count} run{'s' if count > 1 else ''}"
            if target == STOP:
                raise StrategyEnded("stopped", f"the gate of phase {phase.name} failed{runs}")
            self._note(f"Phase {phase.name} failed its gate{runs}; going to {target}.")
            self.begin(self.strategy.phase(target), 1)
        return True

    def begin(self, index: int, iteration: int) -> None:
        """Spawn the workers of phase ``index``'s ``iteration``-th run (committed with the
        state)."""
        state = self.state
        if state.runs >= self.context.settings().get("vogon.maxPhases"):
            raise StrategyEnded("failed", f"the strategy ran {state.runs} phases, the "
                            "vogon.maxPhases bound")
        state.phase, state.iteration, state.runs, state.step = index, iteration, state.runs + 1, \
            "work"
        state.item, state.workers = None, {}
        phase = self.phase
        variables = self._variables()
        for branch in phase.branches():
            goal = self._render(f"phases.{index}.goal", branch.goal, variables)
            try:
                child = self.context.processes().spawn(
                    recipe=branch.recipe, name=f"{phase.name}-{branch.name}"
                    if phase.fork else phase.name, goal=goal, params=branch.params or None)
            except UserError as e:
                raise StrategyEnded("failed", f"phase {phase.name}: cannot start a worker: "
                                f"{e}") from e
            state.workers[branch.name] = WorkerRun(process_id=child.id, status=None, output="",
                                                   payload=None)
        self._note(f"Phase {phase.name} (run {iteration}): started "
                   f"{len(state.workers)} worker(s).")
        self._event("started", workers={b: w.process_id for b, w in state.workers.items()})
        self._save()

    def _result(self, workers: list[WorkerRun]) -> PhaseResult:
        branches = self.state.workers
        ok = all(w.status == "done" for w in workers)
        output = workers[0].output if len(workers) == 1 and not self.phase.fork else \
            "\n\n".join(f"**{name}**: {w.output}" for name, w in branches.items())
        result = PhaseResult(status="done" if ok else "failed", output=output,
                             payload=None if self.phase.fork else workers[0].payload,
                             iteration=self.state.iteration)
        if self.phase.fork:
            result.branches = {name: BranchResult(status=w.status, output=w.output,
                                                  payload=w.payload)
                               for name, w in branches.items()}
        return result

    def _answered(self, checkpoint: Checkpoint) -> bool:
        """Whether the checkpoint's item is answered (posting it first, idempotently)."""
        item = self.state.item
        if item is not None:
            return item.answered
        phase, variables = self.phase, self._variables()
        title = self._render(f"phases.{self.state.phase}.checkpoint.title",
                             checkpoint.title, variables)
        body = self._render(f"phases.{self.state.phase}.checkpoint.body", checkpoint.body,
                            variables) if checkpoint.body else \
            self.state.results[phase.name].output
        payload: dict[str, Any] = {}
        if checkpoint.options:
            payload.update(options=[o.model_dump(by_alias=True, exclude_none=True)
                                    for o in checkpoint.options],
                           allowFreeText=checkpoint.allow_free_text)
        if checkpoint.default is not None:
            payload["default"] = checkpoint.default
        posted, _ = self.context.inbox().post(NewItem(
            type=ItemType(checkpoint.type.value), title=title, body=body or None,
            payload=payload or None, criticality=checkpoint.criticality,
            tags=tuple(checkpoint.tags),
            idempotency_key=f"vogon:{self.state.runs}:{phase.name}"))
        self.state.item = item = CheckpointItem(id=posted.id, title=posted.title,
                                                type=posted.type.value)
        if posted.status is not ItemStatus.PENDING:  # a LOW ask answered with its default
            item.answer = posted.answer.dump() if posted.answer else None
            return True
        self._note(f"Phase {phase.name}: waiting for the Inbox: {title}")
        self._event("waiting", itemId=posted.id, title=title)
        return False

    # ── gates ──────────────────────────────────────────────────────────────
    def _holds(self, gate: Gate) -> bool:
        tests = (self._holds(t) if isinstance(t, Gate) else self._true(t) for t in gate.terms)
        return all(tests) if gate.all_of is not None else any(tests)

    def _true(self, condition: Condition) -> bool:
        value: Any = self._variables()
        for part in condition.value.split("."):
            value = value.get(part, _MISSING) if isinstance(value, dict) else _MISSING
        fields = condition.model_fields_set
        if "exists" in fields:
            return (value is not _MISSING and value is not None) == condition.exists
        if value is _MISSING:
            return False
        if "equals" in fields:
            return bool(value == condition.equals)
        if "not_equals" in fields:
            return bool(value != condition.not_equals)
        if "contains" in fields:
            return isinstance(value, str | list) and condition.contains in value
        return value in (condition.one_of or [])

    # ── the end ────────────────────────────────────────────────────────────
    def _finish(self, outcome: str, reason: str) -> None:
        state = self.state
        state.outcome, state.step, state.report = outcome, "end", self._synthesis(outcome, reason)
        self._note(state.report)
        if outcome != "failed":  # the synthesis as project memory; its id goes to the parent
            state.report_id = record_report(self.context, goal=state.input or self.strategy.name,
                                            summary=state.report, source="vogon:synthesis")
        self._event("finished", outcome=outcome)
        if self.process.engine_params.get("postSynthesis"):
            # Through the tool, so only a recipe that adds inbox_post to the pool posts.
            self.context.tools().invoke("inbox_post", {
                "type": "OUTPUT_TEXT", "title": f"{self.strategy.name}: {outcome}",
                "body": state.report, "payload": {"format": "markdown"},
                "idempotency_key": "vogon:synthesis"})
        self._save()
        self.context.set_status(ProcessStatus.CLOSED, CloseReason.FAILED if outcome == "failed"
                                else CloseReason.DONE)

    def _synthesis(self, outcome: str, reason: str) -> str:
        heading = {"completed": "completed", "stopped": f"stopped at phase {self.phase.name}",
                   "failed": "failed"}[outcome]
        lines = [f"## Strategy {self.strategy.name}: {heading}", "", f"{reason[:1].upper()}"
                 f"{reason[1:]}."]
        for phase in self.strategy.phases:
            result = self.state.results.get(phase.name)
            if result is None:
                continue
            lines += ["", f"### {phase.name} (run {result.iteration}, {result.status})",
                      "", result.output or "(no output)"]
            if result.asked:
                lines += ["", f"Checkpoint: {_answer_text(result.answer)}"]
        return "\n".join(lines)

    # ── helpers ────────────────────────────────────────────────────────────
    def _variables(self) -> dict[str, Any]:
        return {"input": self.state.input, "params": dict(self.process.engine_params),
                "phases": self.state.phase_results(), "iteration": self.state.iteration,
                "strategy": self.strategy.name}

    def _render(self, where: str, source: str, variables: dict[str, Any]) -> str:
        try:
            return render_text(f"strategy {self.strategy.name!r}: {where}", source, variables)
        except RecipeError as e:
            raise StrategyEnded("failed", str(e)) from e

    def _event(self, step: str, **data: Any) -> None:
        """Progress for clients drawing the phases (live overlay; the state is the record)."""
        self.context.events().emit(EventType.VOGON_PHASE, {
            "strategy": self.strategy.name, "phase": self.phase.name, "index": self.state.phase,
            "iteration": self.state.iteration, "step": step, **data})

    def _note(self, text: str) -> None:
        self.context.chat().append(ChatRole.ASSISTANT, text)


def _answer_text(answer: dict[str, Any] | None) -> str:
    if answer is None:
        return "not answered (dismissed)"
    value = answer.get("value")
    if answer.get("outcome") != "DECIDED":
        return f"{answer.get('outcome')}: {answer.get('reason') or ''}".strip()
    if isinstance(value, dict) and "approved" in value:
        return "approved" if value["approved"] else "rejected"
    return json.dumps(value)
