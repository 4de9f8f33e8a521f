"""The recipe side of a turn's context: the process's rendered prompt, the catalogue, manuals."""

from __future__ import annotations

import posixpath
from typing import Any, TypeVar

from vancetope_brain.errors import NotFound
from vancetope_brain.models import ThinkProcess
from vancetope_brain.models.recipe import AppliedRecipe, Definition, RecipeCategory
from vancetope_brain.models.render import PromptContext, render_prompts
from vancetope_brain.recipes.resolver import RecipeResolver, effective_tools

D = TypeVar("D", bound=Definition)


def applied_recipe(process: ThinkProcess) -> AppliedRecipe:
    """The snapshot the process was spawned with (a bare one for processes without)."""
    if process.recipe is None:
        return AppliedRecipe.bare(process.engine, process.engine_params)
    return AppliedRecipe.model_validate(process.recipe)


def tool_pool(process: ThinkProcess, engine_default: frozenset[str]) -> frozenset[str]:
    return effective_tools(engine_default, applied_recipe(process))


class RecipesApi:
    def __init__(self, resolver: RecipeResolver, process: ThinkProcess,
                 pool: frozenset[str]) -> None:
        self._resolver = resolver
        self._process = process
        self._applied = applied_recipe(process)
        self._pool = pool

    @property
    def roles(self) -> frozenset[str]:
        return frozenset(self._applied.roles)

    @property
    def category(self) -> RecipeCategory:
        """What the recipe made this process (think-engines §7a): a ``chat`` talks with
        whoever writes to it, a ``worker`` or ``service`` works on its goal and reports."""
        return self._applied.category

    def system_prompt(self, fallback: str) -> str:
        """The recipe's prompt rendered now (prefix, then override or ``fallback``)."""
        p = self._process
        context = PromptContext(process_id=p.id, process_name=p.name, goal=p.goal,
                                params=p.engine_params, user_id=p.user_id,
                                project_id=p.project_id, tenant_id=p.tenant_id,
                                tools=sorted(self._pool))
        return render_prompts(self._applied, context).system_prompt(fallback)

    def catalogue(self) -> list[dict[str, Any]]:
        """Recipes a coordinator can start workers with (not chat or service recipes)."""
        hidden = {RecipeCategory.CHAT, RecipeCategory.SERVICE}
        return [{"name": e.recipe.name, "engine": e.recipe.engine,
                 "description": e.recipe.description, "category": e.recipe.category.value,
                 "source": e.source.value}
                for e in self._resolver.list(self._process.tenant_id, self._process.project_id)
                if e.recipe.category not in hidden]

    def definition(self, kind: type[D], name: str) -> D:
        """The innermost ``kind`` (e.g. ``Strategy``) named ``name`` from the cascade of this
        process's project; raises ``UnknownRecipe``."""
        return self._resolver.of(kind).get(self._process.tenant_id, self._process.project_id,
                                           name).definition

    def describe(self, name: str) -> dict[str, Any]:
        return self._resolver.describe(self._process.tenant_id, self._process.project_id, name)

    def manuals(self) -> list[str]:
        return [posixpath.basename(path) for path in self._applied.manual_paths]

    def manual(self, name: str) -> str:
        for path in self._applied.manual_paths:
            if name in (path, posixpath.basename(path)):
                return self._resolver.manual(path)
        raise NotFound(f"no manual {name!r}; manual_list names the ones you have")
