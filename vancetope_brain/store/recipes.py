"""The recipes port: tenant and project recipes (bundled ones are package data)."""

from __future__ import annotations

from abc import abstractmethod

from vancetope_brain.recipes.model import Recipe
from vancetope_brain.store.backend import Port


class RecipeStore(Port):
    """A recipe lives at the tenant level (``project_id=None``) or in a project; names
    are unique per level. Each call is one atomic write or read."""

    @abstractmethod
    def create_recipe(self, tenant_id: str, project_id: str | None, recipe: Recipe) -> None:
        """Insert a recipe. Raises ``Conflict`` if the name exists at this level."""

    @abstractmethod
    def update_recipe(self, tenant_id: str, project_id: str | None, recipe: Recipe) -> None:
        """Replace the recipe of that name at this level whole. Raises ``NotFound``."""

    @abstractmethod
    def delete_recipe(self, tenant_id: str, project_id: str | None, name: str) -> None:
        """Delete the recipe at this level (others of that name stay). Raises ``NotFound``."""

    @abstractmethod
    def get_recipe(self, tenant_id: str, project_id: str | None, name: str) -> Recipe:
        """The recipe stored at exactly this level. Raises ``NotFound``."""

    @abstractmethod
    def list_recipes(self, tenant_id: str, project_id: str | None) -> list[Recipe]:
        """The recipes stored at exactly this level, by name."""


def recipe_level(tenant_id: str, project_id: str | None) -> str:
    """How adapters' errors name a recipe level."""
    return f"project {project_id}" if project_id is not None else f"tenant {tenant_id}"
