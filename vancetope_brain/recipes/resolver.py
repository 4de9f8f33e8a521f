"""Resolving recipes over the cascade project → tenant → bundled (innermost wins per name)."""

from __future__ import annotations

import builtins
import contextlib
import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vancetope_brain.errors import InvalidInput, NotFound, UnknownRecipe
from vancetope_brain.recipes.loader import BundledRecipes, bundled
from vancetope_brain.recipes.model import AppliedRecipe, Recipe, RecipeCategory, RecipeSource

if TYPE_CHECKING:
    from vancetope_brain.store import RecipeStore

# Module-level aliases: inside RecipeResolver, ``list`` is the method.
_Levels = list[tuple[RecipeSource, "str | None"]]
_Entries = list["CatalogEntry"]


@dataclass(frozen=True)
class CatalogEntry:
    """A recipe as the cascade sees it: where it comes from, and which outer levels it hides."""

    recipe: Recipe
    source: RecipeSource
    shadows: tuple[RecipeSource, ...] = ()

    def describe(self) -> dict[str, Any]:
        """The whole recipe document plus ``source`` and ``shadows`` (``recipe_describe``)."""
        return {**self.recipe.dump(), "source": self.source.value,
                "shadows": [s.value for s in self.shadows]}


def effective_tools(engine_default: frozenset[str], applied: AppliedRecipe) -> frozenset[str]:
    """The process's tool pool: the engine's default + the recipe's adds − its removes.

    Plain set arithmetic over names and patterns: removing ``inbox_post``
    does not carve it out of a ``*`` in the default.
    """
    return (engine_default | frozenset(applied.allowed_tools_add)) - \
        frozenset(applied.allowed_tools_remove)


class RecipeResolver:
    """Reads the recipe cascade. ``project_id=None`` looks at tenant and bundled recipes only.

    Each lookup reads the store (at most two point reads); nothing is cached,
    so an edit is visible to the next spawn. A process keeps the snapshot it
    got at spawn (``AppliedRecipe``).
    """

    def __init__(self, store: RecipeStore, bundled_recipes: BundledRecipes | None = None) -> None:
        self._store = store
        self._bundled = bundled_recipes if bundled_recipes is not None else bundled()

    def lookup(self, tenant_id: str, project_id: str | None, name: str) -> CatalogEntry | None:
        """The innermost recipe named ``name``, or None."""
        found: list[tuple[Recipe, RecipeSource]] = []
        for source, scope in self._stored_levels(project_id):
            with contextlib.suppress(NotFound):
                found.append((self._store.get_recipe(tenant_id, scope, name), source))
        bundled_recipe = self._bundled.get(name)
        if bundled_recipe is not None:
            found.append((bundled_recipe, RecipeSource.BUNDLED))
        if not found:
            return None
        (recipe, source), *outer = found
        return CatalogEntry(recipe, source, tuple(s for _, s in outer))

    def get(self, tenant_id: str, project_id: str | None, name: str) -> CatalogEntry:
        """The innermost recipe named ``name``; raises ``UnknownRecipe`` suggesting the closest."""
        entry = self.lookup(tenant_id, project_id, name)
        if entry is None:
            names = [e.recipe.name for e in self.list(tenant_id, project_id)]
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else \
                f"; known recipes: {', '.join(names)}" if names else ""
            raise UnknownRecipe(f"no recipe named {name!r}{hint}")
        return entry

    def resolve(self, tenant_id: str, project_id: str | None, *, recipe: str | None = None,
                engine: str | None = None,
                caller_params: dict[str, Any] | None = None) -> AppliedRecipe:
        """The snapshot to copy into a process being spawned.

        With ``recipe``: that recipe from the cascade (``UnknownRecipe`` if none);
        its engine drives the process, and an ``engine`` that differs is refused
        (``InvalidInput``) rather than silently ignored. With only ``engine``:
        the recipe named like the engine (if it runs that engine), else a bare
        snapshot (source ``engine``). Params: the recipe's defaults overlaid, key by key,
        with ``caller_params``. Engine names are not checked here; the spawner
        checks them against the registry.
        """
        if recipe is None:
            if engine is None:
                raise InvalidInput("name a recipe or an engine to spawn")
            entry = self.lookup(tenant_id, project_id, engine)
            if entry is None or entry.recipe.engine != engine:
                return AppliedRecipe.bare(engine, caller_params)
        else:
            entry = self.get(tenant_id, project_id, recipe)
            if engine is not None and engine != entry.recipe.engine:
                raise InvalidInput(f"recipe {recipe!r} runs engine {entry.recipe.engine!r}, not "
                                   f"{engine!r}; name only the recipe")
        return AppliedRecipe.of(entry.recipe, entry.source, caller_params)

    def variant(self, tenant_id: str, project_id: str | None, engine: str,
                suffix: str) -> str | None:
        """``<engine>-<suffix>`` if the cascade has a recipe of that name running ``engine``."""
        name = f"{engine}-{suffix}"
        entry = self.lookup(tenant_id, project_id, name)
        return name if entry is not None and entry.recipe.engine == engine else None

    def list(self, tenant_id: str, project_id: str | None = None, *,
             category: RecipeCategory | None = None) -> _Entries:
        """The effective catalogue by name: per name the innermost recipe, with its source."""
        levels: builtins.list[tuple[RecipeSource, builtins.list[Recipe]]] = [
            (source, self._store.list_recipes(tenant_id, scope))
            for source, scope in self._stored_levels(project_id)]
        levels.append((RecipeSource.BUNDLED, list(self._bundled.recipes.values())))
        found: dict[str, builtins.list[tuple[Recipe, RecipeSource]]] = {}
        for source, recipes in levels:
            for item in recipes:
                found.setdefault(item.name, []).append((item, source))
        entries = [CatalogEntry(chain[0][0], chain[0][1], tuple(s for _, s in chain[1:]))
                   for _, chain in sorted(found.items())]
        return [e for e in entries if category is None or e.recipe.category is category]

    def describe(self, tenant_id: str, project_id: str | None, name: str) -> dict[str, Any]:
        """The full recipe document with ``source`` (``recipe_describe``)."""
        return self.get(tenant_id, project_id, name).describe()

    def manual(self, path: str) -> str:
        """A manual named in ``manualPaths`` (bundled manuals only, for now)."""
        return self._bundled.manual(path)

    @staticmethod
    def _stored_levels(project_id: str | None) -> _Levels:
        levels: _Levels = [(RecipeSource.TENANT, None)]
        if project_id is not None:
            levels.insert(0, (RecipeSource.PROJECT, project_id))
        return levels
