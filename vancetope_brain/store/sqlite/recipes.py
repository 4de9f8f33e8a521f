"""SQLite ``RecipeStore``: table ``recipes``.

A row holds the validated ``Recipe`` dump (with its schema version) under
(tenant, project or ``''``, name). Atomicity: each call is one statement, a
write in its own ``BEGIN IMMEDIATE`` transaction.
"""

from __future__ import annotations

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.recipes.model import Recipe
from vancetope_brain.store.recipes import RecipeStore, recipe_level
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import load_all, load_one

_TABLES = """
CREATE TABLE IF NOT EXISTS recipes (
    tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, name TEXT NOT NULL, doc TEXT NOT NULL,
    PRIMARY KEY (tenant_id, project_id, name)
);
"""


class SqliteRecipes(SqliteAdapter, RecipeStore):
    tables = _TABLES

    def create_recipe(self, tenant_id: str, project_id: str | None, recipe: Recipe) -> None:
        try:
            self.db.execute(
                "INSERT INTO recipes (tenant_id, project_id, name, doc) VALUES (?, ?, ?, ?)",
                (tenant_id, project_id or "", recipe.name, recipe.model_dump_json(by_alias=True)))
        except Conflict as e:
            raise Conflict(f"recipe {recipe.name} already exists in "
                           f"{recipe_level(tenant_id, project_id)}") from e

    def update_recipe(self, tenant_id: str, project_id: str | None, recipe: Recipe) -> None:
        cursor = self.db.execute(
            "UPDATE recipes SET doc = ? WHERE tenant_id = ? AND project_id = ? AND name = ?",
            (recipe.model_dump_json(by_alias=True), tenant_id, project_id or "", recipe.name))
        if cursor.rowcount == 0:
            raise NotFound(f"recipe {recipe.name} not found in "
                           f"{recipe_level(tenant_id, project_id)}")

    def delete_recipe(self, tenant_id: str, project_id: str | None, name: str) -> None:
        cursor = self.db.execute(
            "DELETE FROM recipes WHERE tenant_id = ? AND project_id = ? AND name = ?",
            (tenant_id, project_id or "", name))
        if cursor.rowcount == 0:
            raise NotFound(f"recipe {name} not found in {recipe_level(tenant_id, project_id)}")

    def get_recipe(self, tenant_id: str, project_id: str | None, name: str) -> Recipe:
        return load_one(Recipe, self.db.read(
            "SELECT doc FROM recipes WHERE tenant_id = ? AND project_id = ? AND name = ?",
            (tenant_id, project_id or "", name)),
            f"recipe {name} not found in {recipe_level(tenant_id, project_id)}")

    def list_recipes(self, tenant_id: str, project_id: str | None) -> list[Recipe]:
        return load_all(Recipe, self.db.read(
            "SELECT doc FROM recipes WHERE tenant_id = ? AND project_id = ? ORDER BY name",
            (tenant_id, project_id or "")))
