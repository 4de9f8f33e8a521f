"""Managing tenant and project definitions (admin CLI, protocol): create, replace, delete,
list — for recipes and every other definition kind.

Writes validate first: a stored definition is always a valid dump of its kind's model with its
schema version, at most ``MAX_DEFINITION_BYTES`` as JSON, whose templates rendered once with
sample values inside the render bounds. A tenant holds at most ``max_per_tenant`` definitions
of each kind, counted across its levels (``VANCETOPE_MAX_DEFINITIONS``). A project-level write
checks that the project exists; the tenant is the caller's (authenticated, or checked by the
CLI). A recipe's engine must be registered, and only the operator writes engine roles
(``RecipeAdmin``). A refused write stores nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from vancetope_brain.errors import LimitExceeded, NotFound, OperatorOnly, UnknownEngine
from vancetope_brain.models.recipe import Definition, Recipe
from vancetope_brain.recipes.loader import MAX_DEFINITION_BYTES
from vancetope_brain.store import Backend, IdentityStore, RecipeStore

D = TypeVar("D", bound=Definition)

DEFAULT_MAX_PER_TENANT = 100
"""Definitions of one kind a tenant may store across its levels, unless configured
(``VANCETOPE_MAX_DEFINITIONS``)."""


class DefinitionAdmin(Generic[D]):
    """One kind's tenant- and project-level definitions; tenant-level ones have
    ``project_id=None``."""

    def __init__(self, store: RecipeStore, identity: IdentityStore, kind: type[D],
                 max_per_tenant: int = DEFAULT_MAX_PER_TENANT) -> None:
        self._store = store
        self._identity = identity
        self.kind = kind
        self.max_per_tenant = max_per_tenant

    def create(self, tenant_id: str, project_id: str | None, definition: D) -> None:
        """Raises ``Conflict`` if one of that name exists at this level, ``LimitExceeded`` if
        the tenant has ``max_per_tenant`` of this kind, ``RecipeError`` for a template that does
        not render with sample values."""
        self._check(tenant_id, project_id, definition)
        self._store.create_definition(tenant_id, project_id, definition, self.max_per_tenant)

    def update(self, tenant_id: str, project_id: str | None, definition: D) -> None:
        """Replace the one of that name at this level; raises ``NotFound``, and as ``create``."""
        self._check(tenant_id, project_id, definition)
        self._store.update_definition(tenant_id, project_id, definition)

    def put(self, tenant_id: str, project_id: str | None, definition: D) -> bool:
        """Create or replace; returns whether it was created."""
        self._check(tenant_id, project_id, definition)
        try:
            self._store.update_definition(tenant_id, project_id, definition)
            return False
        except NotFound:
            self._store.create_definition(tenant_id, project_id, definition,
                                          self.max_per_tenant)
            return True

    def _check(self, tenant_id: str, project_id: str | None, definition: D) -> None:
        self.check_project(tenant_id, project_id)
        # The document as JSON (what a frame carries), less the fields left at their defaults:
        # the record adds only those, a bounded few.
        size = len(definition.model_dump_json(by_alias=True, exclude_defaults=True).encode())
        if size > MAX_DEFINITION_BYTES:
            raise LimitExceeded(f"{definition.KIND} {definition.name}: {size:,} bytes as JSON; a "
                                f"{definition.KIND} has at most {MAX_DEFINITION_BYTES:,}")
        definition.check_render()

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
        """The admin of another kind over the same store (and with the same cap)."""
        return DefinitionAdmin(self._store, self._identity, kind, self.max_per_tenant)


E = TypeVar("E", bound=Definition)


class RecipeAdmin(DefinitionAdmin[Recipe]):
    """Recipe writes, as one kind of writer: a tenant's users (the protocol's
    ``recipe-create`` / ``recipe-update``), or with ``operator`` the deployment's operator
    (the admin CLI, which reaches the store directly).

    Engine ``roles`` are grants: a tool that requires a role (agrajag's ``tool_health_write``,
    an MCP tool the operator gated) is offered to a process only if its recipe carries the
    role. So only the operator writes roles, and bundled recipes carry them; a user's
    recipe that names one is refused (``OperatorOnly``). Which roles gate what is the
    deployment's (its MCP servers' file may gain a role tomorrow), so every role is the
    operator's, not a list of special ones. ``engine``: the registry's lookup
    (``EngineRegistry.get``), which refuses a recipe whose engine is not registered,
    naming the engines; None leaves the engine unchecked until a spawn (tests of the
    store's side)."""

    def __init__(self, store: RecipeStore, identity: IdentityStore,
                 max_per_tenant: int = DEFAULT_MAX_PER_TENANT, *,
                 engine: Callable[[str], object] | None = None,
                 operator: bool = False) -> None:
        super().__init__(store, identity, Recipe, max_per_tenant)
        self._engine = engine
        self.operator = operator

    @classmethod
    def on(cls, store: Backend, max_per_tenant: int = DEFAULT_MAX_PER_TENANT, *,
           engine: Callable[[str], object] | None = None,
           operator: bool = False) -> RecipeAdmin:
        return cls(store.port(RecipeStore), store.port(IdentityStore), max_per_tenant,
                   engine=engine, operator=operator)

    def _check(self, tenant_id: str, project_id: str | None, definition: Recipe) -> None:
        if definition.roles and not self.operator:
            raise OperatorOnly(
                f"recipe {definition.name}: roles: {', '.join(definition.roles)}: engine roles "
                "unlock tools that other recipes do not see, so only the operator grants them "
                "(`vancetope admin recipe put`); write the recipe without roles, or ask your "
                "operator")
        if self._engine is not None:
            try:
                self._engine(definition.engine)
            except UnknownEngine as e:
                raise UnknownEngine(f"recipe {definition.name}: engine: {e}") from e
        super()._check(tenant_id, project_id, definition)
