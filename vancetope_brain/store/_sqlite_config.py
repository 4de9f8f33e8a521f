"""The SQLite adapter's tenant configuration: recipes and settings (tables of schema 4).

A recipe row holds the validated ``Recipe`` dump (with its schema version)
under (tenant, project or ``''``, name); a setting row holds a
``StoredSetting`` under (tenant, level, scope id or ``''``, key). Each write
is one statement in its own ``BEGIN IMMEDIATE`` transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.recipes.model import Recipe
from vancetope_brain.settings import SettingScope, StoredSetting
from vancetope_brain.store._sqlite_db import load_one


def recipe_level(tenant_id: str, project_id: str | None) -> str:
    """How errors name a recipe level."""
    return f"project {project_id}" if project_id is not None else f"tenant {tenant_id}"


class SqliteConfigMixin:
    """Recipes and settings for ``SqliteStore`` (which provides ``_read`` and ``_execute``)."""

    _read: Callable[[str, tuple[Any, ...]], list[Any]]
    _execute: Callable[[str, tuple[Any, ...]], sqlite3.Cursor]

    # ── recipes ───────────────────────────────────────────────────────────
    def create_recipe(self, tenant_id: str, project_id: str | None, recipe: Recipe) -> None:
        try:
            self._execute(
                "INSERT INTO recipes (tenant_id, project_id, name, doc) VALUES (?, ?, ?, ?)",
                (tenant_id, project_id or "", recipe.name, recipe.model_dump_json(by_alias=True)))
        except Conflict as e:
            raise Conflict(f"recipe {recipe.name} already exists in "
                           f"{recipe_level(tenant_id, project_id)}") from e

    def update_recipe(self, tenant_id: str, project_id: str | None, recipe: Recipe) -> None:
        cursor = self._execute(
            "UPDATE recipes SET doc = ? WHERE tenant_id = ? AND project_id = ? AND name = ?",
            (recipe.model_dump_json(by_alias=True), tenant_id, project_id or "", recipe.name))
        if cursor.rowcount == 0:
            raise NotFound(f"recipe {recipe.name} not found in "
                           f"{recipe_level(tenant_id, project_id)}")

    def delete_recipe(self, tenant_id: str, project_id: str | None, name: str) -> None:
        cursor = self._execute(
            "DELETE FROM recipes WHERE tenant_id = ? AND project_id = ? AND name = ?",
            (tenant_id, project_id or "", name))
        if cursor.rowcount == 0:
            raise NotFound(f"recipe {name} not found in {recipe_level(tenant_id, project_id)}")

    def get_recipe(self, tenant_id: str, project_id: str | None, name: str) -> Recipe:
        return load_one(Recipe, self._read(
            "SELECT doc FROM recipes WHERE tenant_id = ? AND project_id = ? AND name = ?",
            (tenant_id, project_id or "", name)),
            f"recipe {name} not found in {recipe_level(tenant_id, project_id)}")

    def list_recipes(self, tenant_id: str, project_id: str | None) -> list[Recipe]:
        rows = self._read(
            "SELECT doc FROM recipes WHERE tenant_id = ? AND project_id = ? ORDER BY name",
            (tenant_id, project_id or ""))
        return [Recipe.load(json.loads(doc)) for (doc,) in rows]

    # ── settings ──────────────────────────────────────────────────────────
    def get_setting(self, tenant_id: str, scope: SettingScope, key: str) -> Any | None:
        rows = self._read(
            "SELECT doc FROM settings WHERE tenant_id = ? AND level = ? AND scope_id = ? "
            "AND key = ?", (tenant_id, scope.level.value, scope.id, key))
        return StoredSetting.load(json.loads(rows[0][0])).value if rows else None

    def set_setting(self, tenant_id: str, scope: SettingScope, key: str, value: Any) -> None:
        stored = StoredSetting(tenant_id=tenant_id, level=scope.level, scope_id=scope.id,
                               key=key, value=value)
        self._execute(
            "INSERT INTO settings (tenant_id, level, scope_id, key, doc) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant_id, level, scope_id, key) DO UPDATE SET doc = excluded.doc",
            (tenant_id, scope.level.value, scope.id, key, stored.model_dump_json(by_alias=True)))

    def delete_setting(self, tenant_id: str, scope: SettingScope, key: str) -> None:
        cursor = self._execute(
            "DELETE FROM settings WHERE tenant_id = ? AND level = ? AND scope_id = ? AND key = ?",
            (tenant_id, scope.level.value, scope.id, key))
        if cursor.rowcount == 0:
            raise NotFound(f"setting {key} is not set for {scope}")

    def list_settings(self, tenant_id: str, scope: SettingScope) -> dict[str, Any]:
        rows = self._read(
            "SELECT doc FROM settings WHERE tenant_id = ? AND level = ? AND scope_id = ? "
            "ORDER BY key", (tenant_id, scope.level.value, scope.id))
        stored = [StoredSetting.load(json.loads(doc)) for (doc,) in rows]
        return {s.key: s.value for s in stored}
