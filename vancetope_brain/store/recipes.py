"""The recipes port: tenant and project definitions of every catalogued kind — recipes,
strategies, … (bundled ones are package data)."""

from __future__ import annotations

from abc import abstractmethod
from typing import TypeVar

from vancetope_brain.errors import LimitExceeded
from vancetope_brain.models.recipe import Definition, Recipe
from vancetope_brain.store.backend import Port

D = TypeVar("D", bound=Definition)


class RecipeStore(Port):
    """A definition of a kind (``kind.KIND``: ``recipe``, ``strategy``, …) lives at the tenant
    level (``project_id=None``) or in a project; names are unique per kind and level. Each call
    is one atomic write or read. The ``*_recipe`` methods are the ``recipe`` kind's shorthand."""

    @abstractmethod
    def create_definition(self, tenant_id: str, project_id: str | None,
                          definition: Definition, limit: int | None = None) -> None:
        """Insert a definition (its kind is its class's). Raises ``Conflict`` if the name
        exists for that kind at this level, ``LimitExceeded`` if the tenant already holds
        ``limit`` definitions of that kind across its levels (tenant and projects)."""

    @abstractmethod
    def update_definition(self, tenant_id: str, project_id: str | None,
                          definition: Definition) -> None:
        """Replace the definition of that kind and name at this level whole. Raises
        ``NotFound``."""

    @abstractmethod
    def delete_definition(self, kind: type[Definition], tenant_id: str, project_id: str | None,
                          name: str) -> None:
        """Delete the definition at this level (others of that name stay). Raises ``NotFound``."""

    @abstractmethod
    def get_definition(self, kind: type[D], tenant_id: str, project_id: str | None,
                       name: str) -> D:
        """The definition stored at exactly this level. Raises ``NotFound``."""

    @abstractmethod
    def list_definitions(self, kind: type[D], tenant_id: str, project_id: str | None) -> list[D]:
        """The definitions of that kind stored at exactly this level, by name."""

    def create_recipe(self, tenant_id: str, project_id: str | None, recipe: Recipe,
                      limit: int | None = None) -> None:
        self.create_definition(tenant_id, project_id, recipe, limit)

    def update_recipe(self, tenant_id: str, project_id: str | None, recipe: Recipe) -> None:
        self.update_definition(tenant_id, project_id, recipe)

    def delete_recipe(self, tenant_id: str, project_id: str | None, name: str) -> None:
        self.delete_definition(Recipe, tenant_id, project_id, name)

    def get_recipe(self, tenant_id: str, project_id: str | None, name: str) -> Recipe:
        return self.get_definition(Recipe, tenant_id, project_id, name)

    def list_recipes(self, tenant_id: str, project_id: str | None) -> list[Recipe]:
        return self.list_definitions(Recipe, tenant_id, project_id)


def recipe_level(tenant_id: str, project_id: str | None) -> str:
    """How adapters' errors name a definition level."""
    return f"project {project_id}" if project_id is not None else f"tenant {tenant_id}"


def over_limit(kind: str, tenant_id: str, limit: int) -> LimitExceeded:
    """The adapters' error for a tenant at its cap of definitions of ``kind``."""
    return LimitExceeded(f"tenant {tenant_id} already has {limit} {kind} definitions (the cap, "
                         "VANCETOPE_MAX_DEFINITIONS); delete one first")
