"""The recipe document (think-engines §2, §7a, §7b) and the snapshot a process gets at spawn.

A recipe names an engine and configures it for a use case: default params,
a prompt (``promptOverride`` replaces the engine's system prompt,
``promptPrefix`` goes before it), tool pool adjustments, a category,
engine roles and optionally the model (an LLM endpoint profile and/or a
model name, see ``vancetope_brain.llm.profiles``). Field names are camelCase
in YAML and in the store.
"""

from __future__ import annotations

import posixpath
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field, StringConstraints, field_validator, model_validator
from pydantic.alias_generators import to_camel

from vancetope_brain.models.base import Document, Wire
from vancetope_brain.models.render import check_template, render_text, sample_context

KEBAB = r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$"
"""Recipe and engine names: lowercase-kebab, like registry names."""

Name = Annotated[str, StringConstraints(pattern=KEBAB, max_length=64)]
EngineName = Annotated[str, StringConstraints(min_length=1, max_length=64)]
"""An engine's registry name. The registry is its judge (``models`` imports no engine):
``RecipeAdmin`` asks it when a recipe is written and the spawner when a process is, and
its error names the engines and the closest one (``Arthur``: did you mean ``arthur``?)."""
# A tool name or an fnmatch pattern over tool names (MCP tools are prefixed by their server).
ToolName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:*?\[\]-]+$", max_length=128)]
Role = Annotated[str, StringConstraints(pattern=KEBAB, max_length=64)]


class RecipeCategory(StrEnum):
    """What a recipe is for: a chat (top-level, talks with the user), a worker (spawned by
    another process, reports to its parent) or a service (system-triggered, hidden)."""

    CHAT = "chat"
    WORKER = "worker"
    SERVICE = "service"


class RecipeSource(StrEnum):
    """Where the resolved recipe came from; ``engine``: no recipe is named like the engine,
    so it runs on its own defaults."""

    PROJECT = "project"
    TENANT = "tenant"
    BUNDLED = "bundled"
    ENGINE = "engine"


class ModelChoice(Wire):
    """Which LLM a recipe's processes talk to: an endpoint ``profile`` (see
    ``vancetope_brain.llm.profiles``) and/or a model ``name`` on it. Either may be left out;
    the settings cascade and the deployment fill the gap (``llm.profiles.choose``)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid",
                              frozen=True)

    profile: Name | None = None
    name: str | None = Field(default=None, min_length=1, max_length=200)

    @model_validator(mode="after")
    def _names_something(self) -> ModelChoice:
        if self.profile is None and self.name is None:
            raise ValueError("model needs a profile, a name or both")
        return self


class Definition(Document):
    """A catalogued YAML document (a recipe, a strategy, …): named, kebab-case, stored per
    tenant or project and bundled as package data. ``KIND`` names the kind in the store and in
    error messages; ``COLLECTION`` is its MongoDB collection. Unknown fields are errors (a
    misspelt key must not be silently ignored), and a definition is immutable."""

    KIND: ClassVar[str]
    COLLECTION: ClassVar[str]
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid",
                              frozen=True)
    if TYPE_CHECKING:  # each kind declares the field itself (with its validation)
        name: str

    def sample_templates(self) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """Sample render variables and the document's templates as ``(field path, source)``,
        for ``check_render``; a kind with templates overrides it."""
        return {}, []

    def check_render(self) -> None:
        """Render each template once with sample values, inside the render bounds (see
        ``vancetope_brain.models.sandbox``), as a save does; raises ``RecipeError`` naming the
        field. What the sample values lack renders empty."""
        variables, templates = self.sample_templates()
        for path, source in templates:
            render_text(f"{self.KIND} {self.name!r}: {path}", source, variables, sample=True)


class SystemSessionSpec(Wire):
    """The lifecycle of a service recipe's system session (think-engines §7b): idle for
    ``idleTimeoutSec`` without a job, it is SUSPENDED (``onIdle``); the next job resumes it."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid",
                              frozen=True)

    on_idle: Literal["SUSPEND"] = "SUSPEND"
    idle_timeout_sec: int = Field(default=300, ge=10, le=86_400)


class _RecipeFields(Wire):
    """The fields a recipe and its snapshot share."""

    name: Name
    engine: EngineName
    description: str = Field(default="", max_length=2000)
    params: dict[str, Any] = Field(default_factory=dict)
    prompt_prefix: str | None = Field(default=None, max_length=100_000)
    prompt_override: str | None = Field(default=None, max_length=100_000)
    allowed_tools_add: list[ToolName] = Field(default_factory=list)
    allowed_tools_remove: list[ToolName] = Field(default_factory=list)
    category: RecipeCategory = RecipeCategory.WORKER
    roles: list[Role] = Field(default_factory=list)
    system_session: SystemSessionSpec | None = None
    manual_paths: list[str] = Field(default_factory=list)
    model: ModelChoice | None = None


class Recipe(Definition, _RecipeFields):
    """A recipe as written in YAML and stored per tenant or project. Unknown fields are errors
    (a misspelt ``allowedToolAdd`` must not be silently ignored)."""

    SCHEMA_VERSION: ClassVar[int] = 1
    KIND: ClassVar[str] = "recipe"
    COLLECTION: ClassVar[str] = "recipes"

    @field_validator("prompt_prefix", "prompt_override")
    @classmethod
    def _template_compiles(cls, source: str | None) -> str | None:
        if source is not None:
            check_template(source)
        return source

    @field_validator("manual_paths")
    @classmethod
    def _relative_markdown(cls, paths: list[str]) -> list[str]:
        for path in paths:
            clean = posixpath.normpath(path)
            if path.startswith("/") or clean.startswith("..") or not path.endswith(".md"):
                raise ValueError(f"{path!r} is not a relative path to a .md file inside the "
                                 "recipes directory")
        return paths

    def sample_templates(self) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        templates = [("promptPrefix", self.prompt_prefix), ("promptOverride", self.prompt_override)]
        return (sample_context(self.params).variables(self.name),
                [(path, source) for path, source in templates if source is not None])

    @model_validator(mode="after")
    def _system_session_of_a_service(self) -> Recipe:
        if self.system_session is not None and self.category is not RecipeCategory.SERVICE:
            raise ValueError("systemSession: only a recipe of category 'service' runs in a "
                             "system session")
        return self

    @model_validator(mode="after")
    def _add_and_remove_are_disjoint(self) -> Recipe:
        both = set(self.allowed_tools_add) & set(self.allowed_tools_remove)
        if both:
            raise ValueError(f"tools both added and removed: {', '.join(sorted(both))}")
        return self


class AppliedRecipe(_RecipeFields):
    """The resolved recipe copied into a process at spawn, so the process survives edits of the
    recipe. Templates stay unrendered (they are rendered per turn). ``params`` are the merged
    params (recipe defaults overlaid with the caller's)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore",
                              frozen=True)

    schema_version: int = 1
    source: RecipeSource

    @classmethod
    def of(cls, recipe: Recipe, source: RecipeSource,
           caller_params: dict[str, Any] | None = None) -> AppliedRecipe:
        fields = recipe.model_dump(exclude={"schema_version"})
        fields["params"] = {**recipe.params, **(caller_params or {})}
        return cls(source=source, **fields)

    @classmethod
    def bare(cls, engine: str, caller_params: dict[str, Any] | None = None) -> AppliedRecipe:
        """No recipe is named like the engine: the engine's own prompt and pool."""
        return cls(name=engine, engine=engine, source=RecipeSource.ENGINE,
                   params=dict(caller_params or {}))
