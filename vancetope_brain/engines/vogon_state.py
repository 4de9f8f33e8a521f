"""vogon's persisted state (``engineState``) and the view of it the web client draws.

``VogonState`` is the whole ``engineState``: ``{"strategyState": StrategyRun}``. The
shape is the one vogon wrote as plain dicts before it was typed (schema version 1; the
fixtures ``tests/fixtures/records/vogon_state.*.v1.json`` are states of that code), so
keys that a state gains on the way (``report``, a result's ``answer`` and ``branches``, an
item's ``answer``) are absent, not null, until set. ``VogonView`` is what clients read
(``engineView``, docs/schemas/view.vogon.json); the state stays the engine's own.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from vancetope_brain.models.base import Document, Sparse, Wire
from vancetope_brain.models.strategy import CheckpointType, Strategy

Step = Literal["work", "ask", "gate", "end"]
"""Where a phase's run is: its workers work, its checkpoint asks, its gate is evaluated (within
a turn), or the strategy ended."""


class WorkerRun(Wire):
    """One worker of the current phase's run; ``status`` is None until it reports
    (``done``, ``failed``, ``stopped``, or ``blocked`` while it asks a question)."""

    process_id: str
    status: str | None = None
    output: str = ""
    payload: Any = None


class BranchResult(Wire):
    """One branch of a fork's result."""

    status: str | None
    output: str
    payload: Any = None


class PhaseResult(Sparse):
    """A phase's result, as strategy templates and gates read it (``phases.<name>``):
    ``branches`` for a fork, ``answer`` (the Inbox answer, null if dismissed) after a
    checkpoint."""

    OPTIONAL = frozenset({"branches", "answer"})

    status: Literal["done", "failed"]
    output: str
    payload: Any = None
    iteration: int
    branches: dict[str, BranchResult] | None = None
    answer: dict[str, Any] | None = None

    @property
    def asked(self) -> bool:
        """A checkpoint asked after this run (``answer`` is its answer, null if dismissed)."""
        return "answer" in self.model_fields_set


class CheckpointItem(Sparse):
    """The Inbox item the current checkpoint posted; ``answer`` is set once answered (to
    null when dismissed)."""

    OPTIONAL = frozenset({"answer"})

    id: str
    title: str
    type: str
    answer: dict[str, Any] | None = None

    @property
    def answered(self) -> bool:
        return "answer" in self.model_fields_set


class GateRun(Wire):
    """One evaluated gate, in the order the phases ran."""

    phase: str
    iteration: int
    gate: Literal["passed", "failed"]


class StrategyRun(Sparse):
    """A running (or ended) strategy. A strategy that could not be loaded has only
    ``outcome``, ``report`` and ``results``."""

    OPTIONAL = frozenset({"strategy", "input", "phase", "iteration", "runs", "step", "workers",
                          "item", "history", "report", "report_id"})

    strategy: Strategy | None = None
    input: str = ""
    phase: int = 0
    """The current phase's index."""
    iteration: int = 0
    """The current phase's run, from 1 (a bounded loop runs a phase again)."""
    runs: int = 0
    """Phase runs so far (``vogon.maxPhases`` bounds them)."""
    step: Step = "work"
    workers: dict[str, WorkerRun] = Field(default_factory=dict)
    item: CheckpointItem | None = None
    results: dict[str, PhaseResult] = Field(default_factory=dict)
    history: list[GateRun] = Field(default_factory=list)
    outcome: str | None = None
    """``completed``, ``stopped`` or ``failed`` once the strategy ended."""
    report: str | None = None
    report_id: str | None = None
    """The memory entry of the synthesis of a strategy that did not fail (the done event's
    ``report_id``; None when memory refused it)."""

    def phase_results(self) -> dict[str, Any]:
        """The results as templates and gates read them (``phases.<name>.output``)."""
        return {name: result.dump() for name, result in self.results.items()}


class VogonState(Document):
    """vogon's whole ``engineState``."""

    strategy_state: StrategyRun | None = None


# ── the view ─────────────────────────────────────────────────────────────────────────

class PhaseOutline(Wire):
    """One phase as drawn: its name and the kind of its checkpoint, if it has one."""

    name: str
    checkpoint: CheckpointType | None


class WaitingItem(Wire):
    """The checkpoint's Inbox item the strategy waits for."""

    id: str
    title: str


class VogonView(Wire):
    """vogon's phases as the web client draws them, as committed. The client lays the
    newest ``vogon-phase`` event over it (``index``, ``iteration``, ``step``, ``current``,
    ``outcome``, ``waiting``): the event's ``step`` is one of started / waiting / gate /
    finished, the committed one of work / ask / end."""

    engine: Literal["vogon"] = "vogon"
    phases: list[PhaseOutline]
    index: int
    iteration: int
    step: str
    current: str
    """The current phase's name."""
    outcome: str | None
    waiting: WaitingItem | None
    history: list[GateRun]

    @classmethod
    def of(cls, run: StrategyRun) -> VogonView | None:
        """None for a strategy that could not be loaded (there are no phases to draw)."""
        if run.strategy is None:
            return None
        phases = [PhaseOutline(name=p.name, checkpoint=p.checkpoint.type if p.checkpoint
                               else None) for p in run.strategy.phases]
        item = run.item
        waiting = WaitingItem(id=item.id, title=item.title) \
            if run.step == "ask" and item is not None and not item.answered else None
        current = phases[run.phase].name if run.phase < len(phases) else ""
        return cls(phases=phases, index=run.phase, iteration=run.iteration, step=run.step,
                   current=current, outcome=run.outcome, waiting=waiting,
                   history=run.history)
