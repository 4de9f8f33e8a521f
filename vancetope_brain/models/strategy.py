"""The Vogon strategy document: a list of phases, each a worker (or a fork of workers) with an
optional Inbox checkpoint and a gate (think-engines §7 "vogon", user-interaction §10.3, §14).

Strategies are catalogued like recipes (kind ``strategy``: bundled under
``recipes/strategies/``, tenant and project ones in the store) and validated
into ``Strategy`` on load and on save, so every error names its field, e.g.
``phases.1.onFail: no phase named 'drfat'``. Templates (``goal``, checkpoint
``title`` / ``body``) are Jinja2 in the bounded sandbox (``models.sandbox``) with
``StrictUndefined``; they may use only ``TEMPLATE_NAMES``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar, Self

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from vancetope_brain.models.base import Wire
from vancetope_brain.models.inbox import Criticality
from vancetope_brain.models.recipe import Definition, Name
from vancetope_brain.models.render import check_template, sample_context

TEMPLATE_NAMES = frozenset({"input", "params", "phases", "iteration", "strategy"})
"""What a strategy template may use: ``input`` (the process's goal), ``params`` (its params),
``phases`` (results of phases run so far, by name), ``iteration`` (this phase's run, from 1),
``strategy`` (the strategy's name)."""

STOP = "stop"
"""``onFail: stop``: end the strategy with a report (the default)."""

END = "end"
"""``next: end``: the strategy is complete after this phase (phases after it are only reached
by ``onFail`` or another ``next``)."""

MAX_BRANCHES = 8
"""Branches of one fork, at most (``vogon.maxForkBranches`` may lower it)."""

Template = Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
Path = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$",
                                        max_length=200)]


class _Strict(Wire):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid",
                              frozen=True)


def _template(source: str | None) -> str | None:
    if source is not None:
        check_template(source, TEMPLATE_NAMES)
    return source


class CheckpointType(StrEnum):
    """The Inbox item a checkpoint creates (user-interaction §4.1)."""

    APPROVAL = "APPROVAL"
    DECISION = "DECISION"
    FEEDBACK = "FEEDBACK"


class DecisionOption(_Strict):
    value: str = Field(min_length=1, max_length=200)
    label: str = Field(min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=2000)


class Checkpoint(_Strict):
    """After the phase's worker(s) report: ask the user through the Inbox and wait."""

    type: CheckpointType
    title: Template
    body: Template | None = None
    options: list[DecisionOption] = Field(default_factory=list, max_length=50)
    allow_free_text: bool = False
    default: Any = None
    criticality: Criticality = Criticality.NORMAL
    tags: list[Annotated[str, StringConstraints(min_length=1, max_length=64)]] = Field(
        default_factory=list, max_length=20)

    @field_validator("type", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("title", "body")
    @classmethod
    def _compiles(cls, source: str | None) -> str | None:
        return _template(source)

    @model_validator(mode="after")
    def _options_fit_the_type(self) -> Self:
        if self.type is CheckpointType.DECISION and not self.options:
            raise ValueError("a DECISION checkpoint needs options")
        if self.type is not CheckpointType.DECISION and self.options:
            raise ValueError(f"options are for DECISION checkpoints, not {self.type.value}")
        return self


class Condition(_Strict):
    """One test of a value from the render context, named by a dotted ``value`` path, e.g.
    ``phases.review.answer.value.approved`` or ``phases.draft.status``. Exactly one test."""

    value: Path
    equals: Any = None
    not_equals: Any = None
    contains: str | None = None
    one_of: list[Any] | None = None
    exists: bool | None = None

    @model_serializer(mode="wrap")
    def _only_its_test(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # ``equals: null`` is a test, so a dump keeps exactly the fields that were given.
        given = self.model_fields_set | {"value"}
        names = given | {to_camel(n) for n in given}
        return {k: v for k, v in handler(self).items() if k in names}

    @model_validator(mode="after")
    def _one_test(self) -> Self:
        tests = [n for n in ("equals", "not_equals", "contains", "one_of", "exists")
                 if n in self.model_fields_set]
        if len(tests) != 1:
            raise ValueError("a condition has exactly one of equals, notEquals, contains, "
                             "oneOf, exists")
        root = self.value.split(".", 1)[0]
        if root not in ("input", "params", "phases"):
            raise ValueError(f"value {self.value!r} must start with input, params or phases")
        return self


class Gate(_Strict):
    """``all`` (AND) or ``any`` (OR) over conditions and nested gates."""

    all_of: list[Gate | Condition] | None = Field(default=None, alias="all", min_length=1,
                                                  max_length=50)
    any_of: list[Gate | Condition] | None = Field(default=None, alias="any", min_length=1,
                                                  max_length=50)

    @model_validator(mode="after")
    def _one_junction(self) -> Self:
        if (self.all_of is None) == (self.any_of is None):
            raise ValueError("a gate has exactly one of all, any")
        return self

    @property
    def terms(self) -> list[Gate | Condition]:
        return self.all_of if self.all_of is not None else self.any_of or []

    def conditions(self) -> list[Condition]:
        return [c for t in self.terms
                for c in (t.conditions() if isinstance(t, Gate) else [t])]


class Branch(_Strict):
    """One worker: spawned by ``recipe`` with the rendered ``goal`` and ``params``."""

    name: Name
    recipe: Name
    goal: Template
    params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("goal")
    @classmethod
    def _compiles(cls, source: str | None) -> str | None:
        return _template(source)


class Phase(_Strict):
    """A worker (``recipe`` + ``goal``) or a ``fork`` of workers that run in parallel and
    join; then an optional ``checkpoint``; then the ``gate``. A phase whose gate fails is run
    again while its run count is below ``maxIterations`` (a bounded loop), then follows
    ``onFail`` (its own, else the strategy's). A phase that passes goes to ``next`` (a phase,
    or ``end``), by default to the phase after it."""

    name: Name
    description: str = Field(default="", max_length=2000)
    recipe: Name | None = None
    goal: Template | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    fork: list[Branch] = Field(default_factory=list, max_length=MAX_BRANCHES)
    checkpoint: Checkpoint | None = None
    gate: Gate | None = None
    on_fail: str | None = Field(default=None, max_length=64)
    next: str | None = Field(default=None, max_length=64)
    max_iterations: int = Field(default=1, ge=1, le=100)

    @field_validator("goal")
    @classmethod
    def _compiles(cls, source: str | None) -> str | None:
        return _template(source)

    @model_validator(mode="after")
    def _worker_or_fork(self) -> Self:
        single = self.recipe is not None or self.goal is not None
        if self.fork and single:
            raise ValueError("a phase has either recipe and goal, or fork")
        if not self.fork and (self.recipe is None or self.goal is None):
            raise ValueError("a phase needs recipe and goal (or a fork)")
        names = [b.name for b in self.fork]
        if len(set(names)) != len(names):
            raise ValueError("fork branch names must be unique")
        if self.max_iterations > 1 and self.gate is None and not self._asks_approval():
            raise ValueError("maxIterations above 1 needs a gate (the loop ends when it passes)")
        return self

    def _asks_approval(self) -> bool:
        return self.checkpoint is not None and self.checkpoint.type is CheckpointType.APPROVAL

    def branches(self) -> list[Branch]:
        """The workers of one run: the fork, or one branch named like the phase."""
        if self.fork:
            return list(self.fork)
        assert self.recipe is not None and self.goal is not None
        return [Branch(name=self.name, recipe=self.recipe, goal=self.goal, params=self.params)]

    def effective_gate(self) -> Gate:
        """The gate to evaluate: the phase's own, else every worker DONE (and, after an
        APPROVAL checkpoint, approved)."""
        if self.gate is not None:
            return self.gate
        terms: list[Gate | Condition] = [
            Condition(value=f"phases.{self.name}.status", equals="done")]
        if self._asks_approval():
            terms.append(Condition(value=f"phases.{self.name}.answer.value.approved",
                                   equals=True))
        return Gate(all=terms)


class Strategy(Definition):
    """A strategy as written in YAML and stored per tenant or project."""

    SCHEMA_VERSION: ClassVar[int] = 1
    KIND: ClassVar[str] = "strategy"
    COLLECTION: ClassVar[str] = "strategies"

    name: Name
    description: str = Field(default="", max_length=2000)
    params: dict[str, Any] = Field(default_factory=dict)
    phases: list[Phase] = Field(min_length=1, max_length=50)
    on_fail: str = Field(default=STOP, max_length=64)

    @model_validator(mode="after")
    def _names_resolve(self) -> Self:
        names = [p.name for p in self.phases]
        seen: set[str] = set()
        for i, name in enumerate(names):
            if name in seen:
                raise ValueError(f"phases.{i}.name: {name!r} is used by an earlier phase")
            seen.add(name)
        targets = [("onFail", self.on_fail)] + [
            (f"phases.{i}.onFail", p.on_fail) for i, p in enumerate(self.phases) if p.on_fail]
        for where, target in targets:
            if target != STOP and target not in seen:
                raise ValueError(f"{where}: no phase named {target!r} (use 'stop' or one of "
                                 f"{', '.join(names)})")
        for i, phase in enumerate(self.phases):
            if phase.next is not None and phase.next != END and phase.next not in seen:
                raise ValueError(f"phases.{i}.next: no phase named {phase.next!r} (use 'end' "
                                 f"or one of {', '.join(names)})")
        for i, phase in enumerate(self.phases):
            for condition in phase.gate.conditions() if phase.gate else []:
                parts = condition.value.split(".")
                if parts[0] == "phases" and (len(parts) < 2 or parts[1] not in seen):
                    raise ValueError(f"phases.{i}.gate: {condition.value!r} names no phase of "
                                     "this strategy")
        return self

    def phase(self, name: str) -> int:
        return next(i for i, p in enumerate(self.phases) if p.name == name)

    def sample_templates(self) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        templates: list[tuple[str, str | None]] = []
        for i, phase in enumerate(self.phases):
            templates.append((f"phases.{i}.goal", phase.goal))
            templates += [(f"phases.{i}.fork.{j}.goal", b.goal) for j, b in enumerate(phase.fork)]
            if phase.checkpoint is not None:
                templates += [(f"phases.{i}.checkpoint.title", phase.checkpoint.title),
                              (f"phases.{i}.checkpoint.body", phase.checkpoint.body)]
        variables = {"input": sample_context().goal, "params": dict(self.params), "phases": {},
                     "iteration": 1, "strategy": self.name}
        return variables, [(path, source) for path, source in templates if source is not None]
