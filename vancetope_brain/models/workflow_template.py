"""The marvin workflow template: a pre-filled task tree (think-engines §9; issue 10).

Templates are catalogued like recipes and strategies (kind ``template``:
bundled under ``recipes/templates/``, tenant and project ones in the store)
and validated into ``WorkflowTemplate`` on load and on save, so every error
names its field, e.g. ``steps.0.goal: template uses unknown variable(s)
user``. Step goals and the ``aggregate`` are Jinja2 in the bounded sandbox (``models.sandbox``)
with ``StrictUndefined``; they may use only ``TEMPLATE_NAMES``.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field, StringConstraints, field_validator
from pydantic.alias_generators import to_camel

from vancetope_brain.models.base import Wire
from vancetope_brain.models.recipe import Definition, Name
from vancetope_brain.models.render import check_template, sample_context

TEMPLATE_NAMES = frozenset({"goal", "params"})
"""What a goal may use: ``goal`` (the process's goal) and ``params`` (its params)."""

MAX_STEPS = 12
"""Steps of a template's root plan, at most (marvin's cap for one plan, too)."""

MAX_GOAL_CHARS = 4000
"""Longest goal of one step (and of the aggregate), before and after rendering."""

Goal = Annotated[str, StringConstraints(min_length=1, max_length=MAX_GOAL_CHARS)]


class TemplateStep(Wire):
    """One step of the root plan: a ``WORKER`` (run as a child process, by ``recipe`` or
    marvin's worker recipe), a ``USER_INPUT`` question, or a ``PLAN`` that marvin expands
    with the LLM when it runs."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid",
                              frozen=True)

    kind: Literal["WORKER", "USER_INPUT", "PLAN"] = "WORKER"
    goal: Goal
    recipe: Name | None = None

    @field_validator("goal")
    @classmethod
    def _compiles(cls, source: str) -> str:
        check_template(source, TEMPLATE_NAMES)
        return source


class WorkflowTemplate(Definition):
    """A pre-filled tree as written in YAML and stored per tenant or project: the root plan's
    ``steps`` and its ``aggregate`` (the synthesis instruction)."""

    SCHEMA_VERSION: ClassVar[int] = 1
    KIND: ClassVar[str] = "template"
    COLLECTION: ClassVar[str] = "templates"

    name: Name
    description: str = Field(default="", max_length=2000)
    steps: list[TemplateStep] = Field(min_length=1, max_length=MAX_STEPS)
    aggregate: Goal

    @field_validator("aggregate")
    @classmethod
    def _compiles(cls, source: str) -> str:
        check_template(source, TEMPLATE_NAMES)
        return source

    def sample_templates(self) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        return ({"goal": sample_context().goal, "params": {}},
                [*((f"steps.{i}.goal", s.goal) for i, s in enumerate(self.steps)),
                 ("aggregate", self.aggregate)])
