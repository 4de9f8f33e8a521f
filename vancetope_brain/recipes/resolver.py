"""Resolving recipes (and every other definition kind) over the cascade project → tenant → bundled (innermost wins per name)."""

from __future__ import annotations

import builtins
import contextlib
import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from vancetope_brain.errors import InvalidInput, NotFound, UnknownRecipe
from vancetope_brain.models.recipe import (
    AppliedRecipe,
    Definition,
    Recipe,
    RecipeCategory,
    RecipeSource,
)
from vancetope_brain.recipes.kinds import bundled_of
from vancetope_brain.recipes.loader import BundledDefinitions, BundledRecipes, bundled

if TYPE_CHECKING:
    from vancetope_brain.store import RecipeStore

# Module-level aliases: inside RecipeResolver, ``list`` is the method.
_Levels = list[tuple[RecipeSource, "str | None"]]
_Entries = list["CatalogEntry[Recipe]"]
D = TypeVar("D", bound=Definition)
E = TypeVar("E", bound=Definition)


@dataclass(frozen=True)
class CatalogEntry(Generic[D]):
    """A definition as the cascade sees it: where it comes from, and which outer levels it
    hides."""

    definition: D
    source: RecipeSource
    shadows: tuple[RecipeSource, ...] = ()

    @property
    def recipe(self) -> D:
        """The recipe catalogue's name for ``definition``."""
        return self.definition

    def describe(self) -> dict[str, Any]:
        """The whole document plus ``source`` and ``shadows`` (``recipe_describe``)."""
        return {**self.definition.dump(), "source": self.source.value,
                "shadows": [s.value for s in self.shadows]}


def effective_tools(engine_default: frozenset[str], applied: AppliedRecipe) -> frozenset[str]:
    """The process's tool pool: the engine's default + the recipe's adds − its removes.

    Plain set arithmetic over names and patterns: removing ``inbox_post``
    does not carve it out of a ``*`` in the default.
    """
    return (engine_default | frozenset(applied.allowed_tools_add)) - \
        frozenset(applied.allowed_tools_remove)


class DefinitionResolver(Generic[D]):
    """Reads one kind's cascade. ``project_id=None`` looks at tenant and bundled ones only.

    Each lookup reads the store (at most two point reads); nothing is cached,
    so an edit is visible to the next read.
    """

    def __init__(self, store: RecipeStore, kind: type[D],
                 bundled_definitions: BundledDefinitions[D]) -> None:
        self._store = store
        self._kind = kind
        self._bundled = bundled_definitions

    def lookup(self, tenant_id: str, project_id: str | None,
               name: str) -> CatalogEntry[D] | None:
        """The innermost definition named ``name``, or None."""
        found: builtins.list[tuple[D, RecipeSource]] = []
        for source, scope in self._stored_levels(project_id):
            with contextlib.suppress(NotFound):
                found.append((self._store.get_definition(self._kind, tenant_id, scope, name),
                              source))
        bundled_one = self._bundled.get(name)
        if bundled_one is not None:
            found.append((bundled_one, RecipeSource.BUNDLED))
        if not found:
            return None
        (definition, source), *outer = found
        return CatalogEntry(definition, source, tuple(s for _, s in outer))

    def get(self, tenant_id: str, project_id: str | None, name: str) -> CatalogEntry[D]:
        """The innermost definition named ``name``; raises ``UnknownRecipe`` suggesting the
        closest."""
        entry = self.lookup(tenant_id, project_id, name)
        if entry is None:
            names = [e.definition.name for e in self.list(tenant_id, project_id)]
            close = difflib.get_close_matches(name, names, n=1)
            noun = self._kind.KIND
            plural = self._kind.COLLECTION
            hint = f"; did you mean {close[0]!r}?" if close else \
                f"; known {plural}: {', '.join(names)}" if names else ""
            raise UnknownRecipe(f"no {noun} named {name!r}{hint}")
        return entry

    def list(self, tenant_id: str, project_id: str | None = None) -> builtins.list[
            CatalogEntry[D]]:
        """The effective catalogue by name: per name the innermost definition, with its
        source."""
        levels: builtins.list[tuple[RecipeSource, builtins.list[D]]] = [
            (source, self._store.list_definitions(self._kind, tenant_id, scope))
            for source, scope in self._stored_levels(project_id)]
        levels.append((RecipeSource.BUNDLED, builtins.list(self._bundled.definitions.values())))
        found: dict[str, builtins.list[tuple[D, RecipeSource]]] = {}
        for source, items in levels:
            for item in items:
                found.setdefault(item.name, []).append((item, source))
        return [CatalogEntry(chain[0][0], chain[0][1], tuple(s for _, s in chain[1:]))
                for _, chain in sorted(found.items())]

    def describe(self, tenant_id: str, project_id: str | None, name: str) -> dict[str, Any]:
        """The full document with ``source`` (``recipe_describe``)."""
        return self.get(tenant_id, project_id, name).describe()

    def of(self, kind: type[E]) -> DefinitionResolver[E]:
        """The resolver of another kind over the same store (its bundled catalogue)."""
        return DefinitionResolver(self._store, kind, bundled_of(kind))

    @staticmethod
    def _stored_levels(project_id: str | None) -> _Levels:
        levels: _Levels = [(RecipeSource.TENANT, None)]
        if project_id is not None:
            levels.insert(0, (RecipeSource.PROJECT, project_id))
        return levels


class RecipeResolver(DefinitionResolver[Recipe]):
    """Reads the recipe cascade. A process keeps the snapshot it got at spawn
    (``AppliedRecipe``)."""

    def __init__(self, store: RecipeStore, bundled_recipes: BundledRecipes | None = None) -> None:
        super().__init__(store, Recipe,
                         bundled_recipes if bundled_recipes is not None else bundled())
        self._recipes = bundled_recipes if bundled_recipes is not None else bundled()

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
        entries = super().list(tenant_id, project_id)
        return [e for e in entries if category is None or e.recipe.category is category]

    def manual(self, path: str) -> str:
        """A manual named in ``manualPaths`` (bundled manuals only, for now)."""
        return self._recipes.manual(path)
