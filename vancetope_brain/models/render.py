"""Rendering recipe prompts: Jinja2, sandboxed, ``StrictUndefined``, autoescape off.

The render context (what a template may use; anything else is an error at load):

=============  ===========================================================
``recipe``     the recipe's name (str)
``process``    ``{id, name, goal}`` of the process being prompted
``params``     the process's params: recipe defaults overlaid with the caller's
``user``       ``{id, name}`` of the session's user
``project``    ``{id, name}`` of the session's project
``tenant``     ``{id}``
``date``       today, ``YYYY-MM-DD`` (UTC)
``tools``      sorted names in the process's effective tool pool
=============  ===========================================================

Templates are checked when a recipe loads (syntax, and that they use only
these names), rendered once with sample values when one is saved, and rendered
per turn from the process's snapshot, so a prompt can show the current date or
tool pool. A render is deterministic in its template and variables, so each OS process
keeps its last ``RENDERED_KEPT`` renders (of at most ``RENDERED_MAX_CHARS`` characters each)
and reuses one while both are the same (a template using ``random`` is rendered anew each
time; a failed render is never kept). The sandbox is immutable: a template can neither reach dunder
attributes (``''.__class__``) nor mutate ``params``; and it is bounded
(``vancetope_brain.models.sandbox``): a render that would pass its CPU time,
loop, call or size bounds fails with a ``RecipeError`` naming the bound.
"""

from __future__ import annotations

import functools
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jinja2 import (
    ChainableUndefined,
    StrictUndefined,
    Template,
    TemplateError,
    TemplateSyntaxError,
    UndefinedError,
)
from jinja2.sandbox import SecurityError

from vancetope_brain.errors import RecipeError, RenderBudgetExceeded
from vancetope_brain.models.sandbox import (
    MAX_TEMPLATE_TOKENS,
    MAX_TEXT,
    BoundedEnvironment,
    budget,
    variables_of,
)

if TYPE_CHECKING:
    from vancetope_brain.models.recipe import AppliedRecipe

CONTEXT_NAMES = frozenset({"recipe", "process", "params", "user", "project", "tenant", "date",
                           "tools"})

_OPTIONS: dict[str, Any] = {"autoescape": False, "keep_trailing_newline": False,
                            "trim_blocks": True, "lstrip_blocks": True}
_ENV = BoundedEnvironment(undefined=StrictUndefined, **_OPTIONS)
_SAMPLE_ENV = BoundedEnvironment(undefined=ChainableUndefined, **_OPTIONS)
"""For the check on save: what the sample values lack renders empty."""


@functools.lru_cache(maxsize=256)  # a stored definition is validated at every read
def check_template(source: str, names: frozenset[str] = CONTEXT_NAMES) -> None:
    """Raise ``ValueError`` (pydantic turns it into a field error) unless ``source`` compiles
    and uses only ``names`` (by default those of the prompt render context). Runs none of the
    template's code, and refuses a template of more than ``MAX_TEMPLATE_TOKENS`` tokens before
    parsing it."""
    try:
        tokens = (kind for _, kind, _ in _ENV.lex(source) if kind != "whitespace")
        for count, _ in enumerate(tokens, 1):
            if count > MAX_TEMPLATE_TOKENS:
                raise ValueError(f"template has more than {MAX_TEMPLATE_TOKENS:,} tokens")
        unknown = variables_of(_ENV, _ENV.parse(source)) - names
    except TemplateSyntaxError as e:
        raise ValueError(f"template line {e.lineno}: {e.message}") from e
    except RecursionError as e:
        raise ValueError("template is nested too deeply") from e
    if unknown:
        raise ValueError(f"template uses unknown variable(s) {', '.join(sorted(unknown))}; "
                         f"the render context has {', '.join(sorted(names))}")


@functools.lru_cache(maxsize=256)
def _compiled(sample: bool, source: str) -> Template:
    return (_SAMPLE_ENV if sample else _ENV).from_string(source)


RENDERED_KEPT = 256
"""Renders kept for reuse (a chat turn renders its recipe's prompt each time)."""
RENDERED_MAX_CHARS = 65_536
"""Longer renders are not kept: at most ``RENDERED_KEPT`` × this many characters are held."""
_rendered: OrderedDict[tuple[bool, str, str], str] = OrderedDict()
_rendered_lock = threading.Lock()


def render(recipe_name: str, field_name: str, source: str, variables: Mapping[str, Any]) -> str:
    """Render one template; an undefined variable or a sandbox violation raises ``RecipeError``
    naming the recipe and the field."""
    return render_text(f"recipe {recipe_name!r}: {field_name}", source, variables)


def render_text(where: str, source: str, variables: Mapping[str, Any], *,
                sample: bool = False) -> str:
    """Render one template in the bounded sandbox; errors are ``RecipeError`` errors starting
    with ``where``. ``sample``: the check on save, with sample ``variables`` — what they lack
    renders empty, and a template that still needs it passes (only real data can tell)."""
    key = _render_key(sample, source, variables)
    if key is not None:
        with _rendered_lock:
            if key in _rendered:
                _rendered.move_to_end(key)
                return _rendered[key]
    try:
        with budget():
            text = _compiled(sample, source).render(**variables)
        if len(text) > MAX_TEXT:
            raise RenderBudgetExceeded(f"more than {MAX_TEXT:,} characters of output")
        text = text.strip()
    except RenderBudgetExceeded as e:
        raise RecipeError(f"{where}: template exceeded its render budget: {e}") from e
    except UndefinedError as e:
        if sample:
            return ""
        raise RecipeError(f"{where}: undefined variable: {e.message}") from e
    except SecurityError as e:
        raise RecipeError(f"{where}: not allowed: {e}") from e
    except TemplateSyntaxError as e:  # a stored template that predates the load check
        raise RecipeError(f"{where}: template line {e.lineno}: {e.message}") from e
    except (RecursionError, SyntaxError) as e:  # SyntaxError: Python's own nesting limits
        raise RecipeError(f"{where}: template exceeded its render budget: nested too deeply"
                          ) from e
    except (TemplateError, ArithmeticError, LookupError, TypeError, ValueError) as e:
        raise RecipeError(f"{where}: {type(e).__name__}: {e}") from e
    if key is not None and len(text) <= RENDERED_MAX_CHARS:
        with _rendered_lock:
            _rendered[key] = text
            if len(_rendered) > RENDERED_KEPT:
                _rendered.popitem(last=False)
    return text


def _render_key(sample: bool, source: str, variables: Mapping[str, Any]
                ) -> tuple[bool, str, str] | None:
    """What a kept render is found by; None: not to be kept (``random``, or variables that are
    not plain JSON)."""
    if "random" in source:
        return None
    try:
        return sample, source, json.dumps(variables, sort_keys=True)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class PromptContext:
    """What a prompt is rendered with; ``variables`` builds the documented render context."""

    process_id: str
    process_name: str
    goal: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)
    user_id: str = ""
    user_name: str = ""
    project_id: str = ""
    project_name: str = ""
    tenant_id: str = ""
    tools: Sequence[str] = ()
    date: str = field(default_factory=lambda: datetime.now(UTC).date().isoformat())

    def variables(self, recipe_name: str) -> dict[str, Any]:
        return {
            "recipe": recipe_name,
            "process": {"id": self.process_id, "name": self.process_name, "goal": self.goal},
            "params": dict(self.params),
            "user": {"id": self.user_id, "name": self.user_name or self.user_id},
            "project": {"id": self.project_id, "name": self.project_name or self.project_id},
            "tenant": {"id": self.tenant_id},
            "date": self.date,
            "tools": sorted(self.tools),
        }


@dataclass(frozen=True)
class RenderedPrompts:
    prefix: str | None
    override: str | None

    def system_prompt(self, engine_default: str) -> str:
        """The system prompt: the override (else the engine's own), after the prefix if any."""
        body = self.override if self.override is not None else engine_default
        return f"{self.prefix}\n\n{body}" if self.prefix else body


def render_prompts(applied: AppliedRecipe, context: PromptContext) -> RenderedPrompts:
    """Render the snapshot's ``promptPrefix`` and ``promptOverride`` (None where absent)."""
    variables = context.variables(applied.name)

    def one(field_name: str, source: str | None) -> str | None:
        return None if source is None else render(applied.name, field_name, source, variables)

    return RenderedPrompts(one("promptPrefix", applied.prompt_prefix),
                           one("promptOverride", applied.prompt_override))


def sample_context(params: Mapping[str, Any] | None = None,
                   tools: Sequence[str] = ("process_create", "recipe_list")) -> PromptContext:
    """A filled-in context for tests and previews (``recipe show --render``)."""
    return PromptContext(process_id="proc_sample", process_name="sample",
                         goal="Summarize the attached papers.", params=dict(params or {}),
                         user_id="usr_sample", user_name="Ada", project_id="default",
                         project_name="Literature Review", tenant_id="ten_sample",
                         tools=tuple(tools), date="2025-01-01")
