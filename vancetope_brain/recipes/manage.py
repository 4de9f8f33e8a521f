"""Managing tenant and project recipes (admin CLI, protocol): create, replace, delete, list.

Writes validate first: a stored recipe is always a valid ``Recipe`` dump
with its schema version. A project-level write checks that the project
exists; the tenant is the caller's (authenticated, or checked by the CLI).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vancetope_brain.errors import NotFound
from vancetope_brain.recipes.model import Recipe

if TYPE_CHECKING:
    from vancetope_brain.store import Backend, IdentityStore, RecipeStore


class RecipeAdmin:
    """Tenant-level recipes have ``project_id=None``."""

    def __init__(self, store: RecipeStore, identity: IdentityStore) -> None:
        self._store = store
        self._identity = identity

    @classmethod
    def on(cls, store: Backend) -> RecipeAdmin:
        from vancetope_brain.store import IdentityStore, RecipeStore

        return cls(store.port(RecipeStore), store.port(IdentityStore))

    def create(self, tenant_id: str, project_id: str | None, recipe: Recipe) -> None:
        """Raises ``Conflict`` if a recipe of that name exists at this level."""
        self.check_project(tenant_id, project_id)
        self._store.create_recipe(tenant_id, project_id, recipe)

    def update(self, tenant_id: str, project_id: str | None, recipe: Recipe) -> None:
        """Replace the recipe of that name at this level; raises ``NotFound``."""
        self.check_project(tenant_id, project_id)
        self._store.update_recipe(tenant_id, project_id, recipe)

    def put(self, tenant_id: str, project_id: str | None, recipe: Recipe) -> bool:
        """Create or replace; returns whether it was created."""
        self.check_project(tenant_id, project_id)
        try:
            self._store.update_recipe(tenant_id, project_id, recipe)
            return False
        except NotFound:
            self._store.create_recipe(tenant_id, project_id, recipe)
            return True

    def delete(self, tenant_id: str, project_id: str | None, name: str) -> None:
        """Raises ``NotFound`` if there is no such recipe at this level."""
        self._store.delete_recipe(tenant_id, project_id, name)

    def stored(self, tenant_id: str, project_id: str | None) -> list[Recipe]:
        """The recipes stored at exactly this level, by name."""
        return self._store.list_recipes(tenant_id, project_id)

    def check_project(self, tenant_id: str, project_id: str | None) -> None:
        """Raises ``NotFound`` unless the project (if named) exists in the tenant."""
        if project_id is not None:
            self._identity.get_project(tenant_id, project_id)
