"""zaphod's persisted state (``engineState``) and the view of it the web client draws.

``ZaphodState`` is the whole ``engineState``, in the shape zaphod wrote as a plain dict
before it was typed (schema version 1; the fixtures
``tests/fixtures/records/zaphod_state.*.v1.json`` are states of that code): a council that
could not meet has only ``phase`` and ``error``, and ``synthesisAttempts``, ``error`` and
``synthesis`` are absent, not null, until set. ``ZaphodView`` is what clients read
(``engineView``, docs/schemas/view.zaphod.json); ``Council`` is also the data of the
``council-updated`` event.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

from vancetope_brain.models.base import Document, Sparse, Wire
from vancetope_brain.models.recipe import KEBAB

# A head's run: running until its report arrives, then one of the settled outcomes.
PENDING, RUNNING, DONE = "pending", "running", "done"
MISSING = {"failed", "stopped", "blocked", "timeout"}


class HeadSpec(BaseModel):
    """One head of the council, as the process's ``heads`` param lists it."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(pattern=KEBAB, max_length=64)]
    persona: str = Field(min_length=1, max_length=4000)
    recipe: Annotated[str, StringConstraints(pattern=KEBAB, max_length=64)] | None = None


class SynthesisDraft(BaseModel):
    """What the synthesizer model writes."""

    consensus: str = Field(description="What the heads agree on (Markdown).")
    differences: list[str] = Field(
        description="Where the heads disagree: one point each, naming who holds which view.")
    conclusion: str = Field(
        description="The council's one recommendation, weighing the differences.")


class Synthesis(SynthesisDraft):
    """The synthesis as reported: the draft plus the missing heads, filled in by the engine."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    missing_heads: list[str] = Field(default_factory=list)


class HeadRun(Wire):
    """One head in one round: ``pending``, ``running`` (``processId`` set), then ``done``
    (with its ``answer``) or missing (one of ``MISSING``, with a ``detail``)."""

    round: int
    head: str
    status: str
    process_id: str | None
    answer: str | None
    detail: str | None


class ZaphodState(Sparse, Document):
    """zaphod's whole ``engineState``; ``convened`` is False for a council that could not
    meet (bad params or a cap), which has only ``phase`` and ``error``."""

    OPTIONAL = frozenset({"phase", "question", "pattern", "round", "rounds", "sequential",
                          "timeout_sec", "heads", "runs", "synthesis_attempts", "error",
                          "synthesis"})

    phase: Literal["heads", "done", "failed"] | None = None
    question: str = ""
    pattern: Literal["council", "debate"] = "council"
    round: int = 1
    rounds: int = 1
    sequential: bool = False
    timeout_sec: int = 0
    heads: list[HeadSpec] = Field(default_factory=list)
    runs: list[HeadRun] = Field(default_factory=list)
    synthesis_attempts: int = 0
    error: str | None = None
    synthesis: Synthesis | None = None

    @property
    def convened(self) -> bool:
        return "runs" in self.model_fields_set


# ── the view ─────────────────────────────────────────────────────────────────────────

class CouncilHead(Wire):
    """One head's run as drawn."""

    name: str
    round: int
    status: str
    process_id: str | None


class Council(Wire):
    """A council as it stands: the ``council-updated`` event's data and ``ZaphodView``'s
    council. ``missingHeads`` is filled once the synthesis names them."""

    pattern: str
    round: int
    rounds: int
    sequential: bool
    phase: str
    heads: list[CouncilHead]
    missing_heads: list[str]

    @classmethod
    def of(cls, state: ZaphodState) -> Council:
        return cls(pattern=state.pattern, round=state.round, rounds=state.rounds,
                   sequential=state.sequential, phase=state.phase or "heads",
                   heads=[CouncilHead(name=r.head, round=r.round, status=r.status,
                                      process_id=r.process_id) for r in state.runs],
                   missing_heads=state.synthesis.missing_heads if state.synthesis else [])


class ZaphodView(Wire):
    """zaphod's council and synthesis as the web client draws them, as committed (the client
    draws a newer ``council-updated`` event's council in its place)."""

    engine: Literal["zaphod"] = "zaphod"
    council: Council
    synthesis: Synthesis | None

    @classmethod
    def of(cls, state: ZaphodState) -> ZaphodView | None:
        """None for a council that could not meet (there are no heads to draw)."""
        if not state.convened:
            return None
        return cls(council=Council.of(state), synthesis=state.synthesis)
