"""Managing tenant and project definitions (admin CLI, protocol): create, replace, delete,
list — for recipes and every other definition kind.

Writes validate first: a stored definition is always a valid dump of its kind's model with its
schema version. A project-level write checks that the project exists; the tenant is the
caller's (authenticated, or checked by the CLI).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

from vancetope_brain.errors import NotFound
from vancetope_brain.recipes.model import Definition, Recipe

if TYPE_CHECKING:
    from vancetope_brain.store import Backend, IdentityStore, RecipeStore

D = TypeVar("D", bound=Definition)


class DefinitionAdmin(Generic[D]):
    """One kind's tenant- and project-level definitions; tenant-level ones have
    ``project_id=None``."""

    def __init__(self, store: RecipeStore, identity: IdentityStore, kind: type[D]) -> None:
        self._store = store
        self._identity = identity
        self.kind = kind

    def create(self, tenant_id: str, project_id: str | None, definition: D) -> None:
        """Raises ``Conflict`` if one of that name exists at this level."""
        self.check_project(tenant_id, project_id)
        self._store.create_definition(tenant_id, project_id, definition)

    def update(self, tenant_id: str, project_id: str | None, definition: D) -> None:
        """Replace the one of that name at this level; raises ``NotFound``."""
        self.check_project(tenant_id, project_id)
        self._store.update_definition(tenant_id, project_id, definition)

    def put(self, tenant_id: str, project_id: str | None, definition: D) -> bool:
        """Create or replace; returns whether it was created."""
        self.check_project(tenant_id, project_id)
        try:
            self._store.update_definition(tenant_id, project_id, definition)
            return False
        except NotFound:
            self._store.create_definition(tenant_id, project_id, definition)
            return True

    def delete(self, tenant_id: str, project_id: str | None, name: str) -> None:
        """Raises ``NotFound`` if there is none of that name at this level."""
        self._store.delete_definition(self.kind, tenant_id, project_id, name)

    def stored(self, tenant_id: str, project_id: str | None) -> list[D]:
        """The definitions stored at exactly this level, by name."""
        return self._store.list_definitions(self.kind, tenant_id, project_id)

    def check_project(self, tenant_id: str, project_id: str | None) -> None:
        """Raises ``NotFound`` unless the project (if named) exists in the tenant."""
        if project_id is not None:
            self._identity.get_project(tenant_id, project_id)

    def of(self, kind: type[E]) -> DefinitionAdmin[E]:
        """The admin of another kind over the same store."""
        return DefinitionAdmin(self._store, self._identity, kind)


E = TypeVar("E", bound=Definition)


class RecipeAdmin(DefinitionAdmin[Recipe]):
    def __init__(self, store: RecipeStore, identity: IdentityStore) -> None:
        super().__init__(store, identity, Recipe)

    @classmethod
    def on(cls, store: Backend) -> RecipeAdmin:
        from vancetope_brain.store import IdentityStore, RecipeStore

        return cls(store.port(RecipeStore), store.port(IdentityStore))
