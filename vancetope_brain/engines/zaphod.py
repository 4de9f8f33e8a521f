"""zaphod — the council (think-engines §7 "zaphod"): several heads, one recommendation.

Each head is a worker process spawned by recipe (``zaphod-head``, a ford worker, unless the
head names another) with its own persona, and every head answers the process's goal.
Heads run in parallel (all spawned in one turn) unless ``sequential``. The ``debate``
pattern plays K rounds: each round's heads are spawned anew (a ford worker is DONE after
one answer) with the previous round's answers in their goal. Then one structured-output
call, the synthesizer, turns the answers into consensus / differences / conclusion. A head
that failed, was stopped, asked a question or ran past ``zaphod.headTimeoutSec`` is
missing; the engine, not the model, names the missing heads in the synthesis. The state is a
``ZaphodState`` (``vancetope_brain.engines.zaphod_state``).
"""

from __future__ import annotations

import contextlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from vancetope_brain.engines.base import ParentReport, ThinkEngine, register_engine
from vancetope_brain.engines.context import TIMER_COMMAND, ThinkEngineContext
from vancetope_brain.engines.prompting import event_text, system_prompt
from vancetope_brain.engines.structured import describe_invalid, structured
from vancetope_brain.engines.zaphod_state import (
    DONE,
    MISSING,
    PENDING,
    RUNNING,
    Council,
    HeadRun,
    HeadSpec,
    Synthesis,
    SynthesisDraft,
    ZaphodState,
    ZaphodView,
)
from vancetope_brain.errors import Conflict, InvalidInput, LlmError, NotFound, UserError
from vancetope_brain.events import EventType
from vancetope_brain.llm import LlmMessage
from vancetope_brain.models import (
    ChatRole,
    CloseReason,
    ExternalCommand,
    InboxMessage,
    ProcessEvent,
    ProcessStatus,
    ThinkProcess,
    UserChatInput,
)
from vancetope_brain.models.markup import tagged
from vancetope_brain.models.steer import ProcessEventType

HEAD_RECIPE = "zaphod-head"
SYNTHESIS_TOOL = "council_synthesis"
SYNTHESIS_ATTEMPTS = 3
"""Synthesizer calls (each with its one repair) before the council fails."""
SYNTHESIS_RETRY_SEC = 30
RETRY_KEY = "synthesize"
SYNTHESIZER_PROMPT = ("You are Zaphod, the synthesizer of a council: combine the heads' answers "
                      "into one recommendation.")

class CouncilParams(BaseModel):
    """The params zaphod reads; others (a recipe's own) pass through untouched."""

    model_config = ConfigDict(extra="ignore")

    heads: list[HeadSpec] = Field(min_length=1)
    pattern: Literal["council", "debate"] = "council"
    rounds: int = Field(default=2, ge=1)
    sequential: bool | None = None

    @field_validator("heads")
    @classmethod
    def _unique_names(cls, heads: list[HeadSpec]) -> list[HeadSpec]:
        names = [h.name for h in heads]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"head names must be unique: {', '.join(twice)}")
        return heads


@register_engine
class ZaphodEngine(ThinkEngine):
    name = "zaphod"
    title = "Zaphod Council"
    description = ("Asks several heads with different personas the same question (in "
                   "parallel, or as a debate over rounds) and synthesizes consensus, "
                   "differences and a conclusion.")
    version = "1.0.0"
    allowed_tools = frozenset()
    view_model = ZaphodView

    def start(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        try:
            state = _convene(process, context)
        except InvalidInput as e:
            context.chat().append(ChatRole.ERROR, f"The council cannot meet: {e}")
            context.save_state(ZaphodState(phase="failed", error=str(e)).dump())
            context.set_status(ProcessStatus.CLOSED, CloseReason.FAILED)
            return
        context.chat().append(ChatRole.USER, process.goal)
        self._advance(process, context, state)

    def steer(self, process: ThinkProcess, context: ThinkEngineContext) -> None:
        state = ZaphodState.load(process.engine_state)
        for envelope in context.drain_pending():
            self._take(envelope, context, state)
        if state.phase == "heads":
            self._advance(process, context, state)
        else:
            context.save_state(state.dump())

    def _take(self, envelope: InboxMessage, context: ThinkEngineContext,
              state: ZaphodState) -> None:
        """Record one message; a head's report or timeout settles its run."""
        message = envelope.message
        chat = context.chat()
        if isinstance(message, UserChatInput):
            chat.append(ChatRole.USER, message.content, source=envelope)
            return
        chat.append(ChatRole.EVENT, event_text(message), source=envelope)
        if isinstance(message, ProcessEvent):
            run = _running(state, message.source_process_id)
            if run is None or message.type not in _SETTLES:
                return
            run.status = _SETTLES[message.type]
            if run.status == DONE:
                run.answer = message.human_summary or ""
            else:
                run.detail = message.human_summary or ""
            if message.type is ProcessEventType.BLOCKED:  # a head must answer on its own
                _stop(context, run)
        elif isinstance(message, ExternalCommand) and message.command == TIMER_COMMAND:
            run = _running(state, str(message.params.get("key", "")))
            if run is not None:
                run.status = "timeout"
                run.detail = f"no answer within {state.timeout_sec} s"
                _stop(context, run)

    def _advance(self, process: ThinkProcess, context: ThinkEngineContext,
                 state: ZaphodState) -> None:
        """Spawn what is due, or, once the last round is settled, synthesize."""
        while True:
            runs = _round(state)
            if any(r.status == RUNNING for r in runs):
                break
            pending = [r for r in runs if r.status == PENDING]
            if pending:
                for run in pending[:1] if state.sequential else pending:
                    _spawn(process, context, state, run)
                continue  # a head that could not start counts as failed: go on without it
            if state.round < state.rounds and any(r.status == DONE for r in runs):
                state.round += 1
                state.runs += [_new_run(state.round, h.name) for h in state.heads]
                continue
            self._synthesize(process, context, state)
            break
        context.events().emit(EventType.COUNCIL_UPDATED, Council.of(state).dump())
        context.save_state(state.dump())

    def _synthesize(self, process: ThinkProcess, context: ThinkEngineContext,
                    state: ZaphodState) -> None:
        runs = _round(state)
        missing = [r.head for r in runs if r.status != DONE]
        if len(missing) == len(runs):
            state.phase, state.error = "failed", "no head answered"
            context.chat().append(ChatRole.ERROR, "No head answered; there is nothing to "
                                  "synthesize.")
            context.set_status(ProcessStatus.CLOSED, CloseReason.FAILED)
            return
        messages = [LlmMessage("system", system_prompt(process, context, SYNTHESIZER_PROMPT)),
                    LlmMessage("user", _synthesis_input(state, runs, missing))]
        try:
            draft = structured(context, messages, SynthesisDraft, tool=SYNTHESIS_TOOL,
                               description="Give the council's synthesis.")
        except LlmError as e:
            state.synthesis_attempts = attempt = state.synthesis_attempts + 1
            context.chat().append(ChatRole.ERROR, f"The synthesizer failed ({attempt} of "
                                  f"{SYNTHESIS_ATTEMPTS}): {e}")
            if attempt < SYNTHESIS_ATTEMPTS:  # the heads' answers are kept: try again later
                context.timers().after(SYNTHESIS_RETRY_SEC, RETRY_KEY)
                return
            state.phase, state.error = "failed", f"the synthesizer failed: {e}"
            context.set_status(ProcessStatus.CLOSED, CloseReason.FAILED)
            return
        synthesis = Synthesis(**draft.model_dump(), missing_heads=missing)
        state.phase, state.synthesis = "done", synthesis
        context.chat().append(ChatRole.ASSISTANT, _report(state))
        context.set_status(ProcessStatus.CLOSED, CloseReason.DONE)

    def summarize_for_parent(self, process: ThinkProcess,
                             event_type: ProcessEventType) -> ParentReport:
        state = ZaphodState.load(process.engine_state)
        if event_type in (ProcessEventType.DONE, ProcessEventType.FAILED) and \
                state.phase is not None:
            return ParentReport(_report(state), _payload(state))
        return super().summarize_for_parent(process, event_type)

    def view(self, process: ThinkProcess) -> ZaphodView | None:
        return ZaphodView.of(ZaphodState.load(process.engine_state))


_SETTLES = {ProcessEventType.DONE: DONE, ProcessEventType.FAILED: "failed",
            ProcessEventType.STOPPED: "stopped", ProcessEventType.BLOCKED: "blocked"}


def _convene(process: ThinkProcess, context: ThinkEngineContext) -> ZaphodState:
    """The initial state from the params and the caps; raises ``InvalidInput``."""
    try:
        params = CouncilParams.model_validate(process.engine_params)
    except ValidationError as e:
        raise InvalidInput(f"invalid params: {describe_invalid(e)}") from None
    settings = context.settings()
    if len(params.heads) > settings.get("zaphod.maxHeads"):
        raise InvalidInput(f"{len(params.heads)} heads, but zaphod.maxHeads is "
                          f"{settings.get('zaphod.maxHeads')}")
    rounds = params.rounds if params.pattern == "debate" else 1
    if rounds > settings.get("zaphod.maxRounds"):
        raise InvalidInput(f"{rounds} rounds, but zaphod.maxRounds is "
                          f"{settings.get('zaphod.maxRounds')}")
    if not process.goal.strip():
        raise InvalidInput("the council needs a question (the process's goal)")
    for head in params.heads:
        try:
            context.recipes().describe(head.recipe or HEAD_RECIPE)
        except NotFound as e:
            raise InvalidInput(f"head {head.name}: {e}") from None
    sequential = params.sequential if params.sequential is not None \
        else settings.get("zaphod.sequential")
    return ZaphodState(phase="heads", question=process.goal, pattern=params.pattern, round=1,
                       rounds=rounds, sequential=sequential,
                       timeout_sec=settings.get("zaphod.headTimeoutSec"), heads=params.heads,
                       runs=[_new_run(1, h.name) for h in params.heads])


def _new_run(round_: int, head: str) -> HeadRun:
    return HeadRun(round=round_, head=head, status=PENDING, process_id=None, answer=None,
                   detail=None)


def _round(state: ZaphodState, round_: int | None = None) -> list[HeadRun]:
    wanted = state.round if round_ is None else round_
    return [r for r in state.runs if r.round == wanted]


def _running(state: ZaphodState, process_id: str) -> HeadRun | None:
    return next((r for r in state.runs if r.process_id == process_id and r.status == RUNNING),
                None)


def _spawn(process: ThinkProcess, context: ThinkEngineContext, state: ZaphodState,
           run: HeadRun) -> None:
    head = next(h for h in state.heads if h.name == run.head)
    suffix = f"-r{run.round}" if state.rounds > 1 else ""
    try:
        child = context.processes().spawn(
            recipe=head.recipe or HEAD_RECIPE, name=f"{process.name}-{head.name}{suffix}",
            goal=_head_goal(state, run), params={"persona": head.persona})
    except UserError as e:  # e.g. the session's cap of open processes
        run.status, run.detail = "failed", f"could not start: {e}"
        return
    context.timers().after(state.timeout_sec, child.id)
    run.status, run.process_id = RUNNING, child.id


def _head_goal(state: ZaphodState, run: HeadRun) -> str:
    """The question; in a debate's later rounds, with the previous round's answers."""
    question = state.question
    if run.round == 1:
        return question
    earlier = [r for r in _round(state, run.round - 1) if r.status == DONE]
    own = next((r.answer for r in earlier if r.head == run.head), None)
    others = "\n\n".join(tagged("answer", f"\n{r.answer}\n", head=r.head)
                         for r in earlier if r.head != run.head)
    mine = f"Your answer in round {run.round - 1} was:\n\n{own}\n\n" if own else ""
    return (f"{question}\n\nThis is round {run.round} of {state.rounds} of a debate. "
            f"{mine}The other heads answered in round {run.round - 1}:\n\n"
            f"{others or '(none)'}\n\nAnswer the question again in the light of theirs: keep "
            "what still holds, concede what they got right, say where you still disagree.")


def _stop(context: ThinkEngineContext, run: HeadRun) -> None:
    assert run.process_id is not None  # only a running head is stopped
    with contextlib.suppress(Conflict, NotFound):  # closed meanwhile: nothing to stop
        context.processes().stop(run.process_id)


def _synthesis_input(state: ZaphodState, runs: list[HeadRun], missing: list[str]) -> str:
    personas = {h.name: h.persona for h in state.heads}
    answers = "\n\n".join(
        tagged("head", f"\n{r.answer}\n", name=r.head, persona=personas[r.head])
        for r in runs if r.status == DONE)
    gone = "; ".join(f"{r.head} ({r.status})" for r in runs if r.head in missing)
    absent = (f"\n\nMissing heads (no answer): {gone}. Say in the conclusion that their "
              "perspective is missing." if missing else "")
    debate = f" after {state.rounds} rounds of debate" if state.rounds > 1 else ""
    return (f"The question: {state.question}\n\nThe heads' answers{debate}:\n\n{answers}"
            f"{absent}\n\nCombine them into one recommendation: what they agree on "
            f"(consensus), where they differ (differences), and the conclusion. Answer by "
            f"calling {SYNTHESIS_TOOL}.")


def _report(state: ZaphodState) -> str:
    """The council's result as Markdown (for the parent's model and the chat)."""
    if not state.convened:
        return f"The council could not meet: {state.error}"
    lines = [f"## Council: {state.question}"]
    synthesis = state.synthesis
    if synthesis:
        lines += ["", f"**Conclusion:** {synthesis.conclusion}", "", "### Consensus", "",
                  synthesis.consensus, "", "### Differences", ""]
        lines += [f"- {d}" for d in synthesis.differences] or ["(none)"]
    else:
        lines += ["", f"**The council failed:** {state.error}"]
    runs = _round(state)
    missing = [r for r in runs if r.status in MISSING or r.status == PENDING]
    if missing:
        lines += ["", "### Missing heads", ""]
        lines += [f"- {r.head}: {r.status}" + (f" ({r.detail})" if r.detail else "")
                  for r in missing]
    lines += ["", "### The heads' answers" + (f" (round {state.round})"
                                               if state.rounds > 1 else "")]
    for r in runs:
        if r.status == DONE:
            lines += ["", f"#### {r.head}", "", r.answer or ""]
    return "\n".join(lines)


def _payload(state: ZaphodState) -> dict[str, Any]:
    if not state.convened:
        return {"error": state.error}
    personas = {h.name: h.persona for h in state.heads}
    return {"question": state.question, "pattern": state.pattern,
            "rounds": state.round, "error": state.error,
            "heads": [{"name": r.head, "persona": personas[r.head], "round": r.round,
                       "status": r.status, "processId": r.process_id,
                       "answer": r.answer, "detail": r.detail} for r in state.runs],
            "synthesis": state.synthesis.model_dump(by_alias=True) if state.synthesis
            else None}
