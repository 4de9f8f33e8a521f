"""SQLite ``RecipeStore``: table ``recipes``.

A row holds the validated definition's dump (with its schema version) under
(tenant, project or ``''``, kind, name); ``kind`` is ``recipe``, ``strategy``, …
(schema version 6 added it, keeping every older row as a ``recipe``).
Atomicity: each call is one statement, a write in its own ``BEGIN IMMEDIATE``
transaction (``create_definition`` counts the tenant's definitions in the same statement).
"""

from __future__ import annotations

from typing import TypeVar

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models.recipe import Definition
from vancetope_brain.store.recipes import RecipeStore, over_limit, recipe_level
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import load_all, load_one

D = TypeVar("D", bound=Definition)

_TABLES = """
CREATE TABLE IF NOT EXISTS recipes (
    tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
    doc TEXT NOT NULL,
    PRIMARY KEY (tenant_id, project_id, kind, name)
);
"""

_MIGRATIONS = {
    # The key gains ``kind``: rebuild the table (a file from before version 4 has none yet,
    # so make the old shape first), keeping every row as a recipe.
    6: ["CREATE TABLE IF NOT EXISTS recipes (tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, "
        "name TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (tenant_id, project_id, name))",
        "ALTER TABLE recipes RENAME TO recipes_v5",
        _TABLES,
        "INSERT INTO recipes (tenant_id, project_id, kind, name, doc) "
        "SELECT tenant_id, project_id, 'recipe', name, doc FROM recipes_v5",
        "DROP TABLE recipes_v5"],
}


class SqliteRecipes(SqliteAdapter, RecipeStore):
    tables = _TABLES
    migrations = _MIGRATIONS

    def create_definition(self, tenant_id: str, project_id: str | None,
                          definition: Definition, limit: int | None = None) -> None:
        # One statement: the count and the insert see the same rows.
        try:
            cursor = self.db.execute(
                "INSERT INTO recipes (tenant_id, project_id, kind, name, doc) "
                "SELECT ?, ?, ?, ?, ? WHERE ? IS NULL OR "
                "(SELECT COUNT(*) FROM recipes WHERE tenant_id = ? AND kind = ?) < ?",
                (tenant_id, project_id or "", definition.KIND, definition.name,
                 definition.model_dump_json(by_alias=True), limit, tenant_id, definition.KIND,
                 limit))
        except Conflict as e:
            raise Conflict(f"{definition.KIND} {definition.name} already exists in "
                           f"{recipe_level(tenant_id, project_id)}") from e
        if cursor.rowcount == 0:
            raise over_limit(definition.KIND, tenant_id, limit or 0)

    def update_definition(self, tenant_id: str, project_id: str | None,
                          definition: Definition) -> None:
        cursor = self.db.execute(
            "UPDATE recipes SET doc = ? WHERE tenant_id = ? AND project_id = ? AND kind = ? "
            "AND name = ?",
            (definition.model_dump_json(by_alias=True), tenant_id, project_id or "",
             definition.KIND, definition.name))
        if cursor.rowcount == 0:
            raise NotFound(f"{definition.KIND} {definition.name} not found in "
                           f"{recipe_level(tenant_id, project_id)}")

    def delete_definition(self, kind: type[Definition], tenant_id: str, project_id: str | None,
                          name: str) -> None:
        cursor = self.db.execute(
            "DELETE FROM recipes WHERE tenant_id = ? AND project_id = ? AND kind = ? AND name = ?",
            (tenant_id, project_id or "", kind.KIND, name))
        if cursor.rowcount == 0:
            raise NotFound(f"{kind.KIND} {name} not found in "
                           f"{recipe_level(tenant_id, project_id)}")

    def get_definition(self, kind: type[D], tenant_id: str, project_id: str | None,
                       name: str) -> D:
        return load_one(kind, self.db.read(
            "SELECT doc FROM recipes WHERE tenant_id = ? AND project_id = ? AND kind = ? "
            "AND name = ?", (tenant_id, project_id or "", kind.KIND, name)),
            f"{kind.KIND} {name} not found in {recipe_level(tenant_id, project_id)}")

    def list_definitions(self, kind: type[D], tenant_id: str, project_id: str | None) -> list[D]:
        return load_all(kind, self.db.read(
            "SELECT doc FROM recipes WHERE tenant_id = ? AND project_id = ? AND kind = ? "
            "ORDER BY name", (tenant_id, project_id or "", kind.KIND)))
