"""The MongoDB adapter's tenant configuration: recipes and settings.

Collection ``recipes``: the validated ``Recipe`` dump (with its schema
version) plus ``tenantId`` and ``projectId`` (``''`` for a tenant-level
recipe), ``_id`` = ``{tenantId, projectId, name}``. Collection ``settings``:
a ``StoredSetting`` with ``_id`` = ``{tenantId, level, scopeId, key}``. Each
write is one single-document operation; indexes put ``tenantId`` first.
"""

from __future__ import annotations

from typing import Any

from pymongo import ASCENDING
from pymongo.errors import DuplicateKeyError

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.recipes.model import Recipe
from vancetope_brain.settings import SettingScope, StoredSetting
from vancetope_brain.store._mongo_codec import from_bson, naive_utc, translated
from vancetope_brain.store._sqlite_config import recipe_level


def _recipe_key(tenant_id: str, project_id: str | None, name: str) -> dict[str, str]:
    # An embedded _id compares field by field in order, so it is built here only.
    return {"tenantId": tenant_id, "projectId": project_id or "", "name": name}


def _setting_key(tenant_id: str, scope: SettingScope, key: str) -> dict[str, str]:
    return {"tenantId": tenant_id, "level": scope.level.value, "scopeId": scope.id, "key": key}


def _recipe(raw: dict[str, Any]) -> Recipe:
    for ours in ("_id", "tenantId", "projectId"):
        raw.pop(ours, None)
    return Recipe.load(raw)


class MongoConfigMixin:
    """Recipes and settings for ``MongoStore``; ``_init_config`` runs in its constructor."""

    _recipes: Any
    _settings: Any

    def _init_config(self, db: Any) -> None:
        self._recipes = db["recipes"]
        self._settings = db["settings"]
        self._recipes.create_index(
            [("tenantId", ASCENDING), ("projectId", ASCENDING), ("name", ASCENDING)],
            name="by_scope")
        self._settings.create_index(
            [("tenantId", ASCENDING), ("level", ASCENDING), ("scopeId", ASCENDING),
             ("key", ASCENDING)], name="by_scope")

    def _recipe_doc(self, tenant_id: str, project_id: str | None,
                    recipe: Recipe) -> dict[str, Any]:
        return {**recipe.dump(), "_id": _recipe_key(tenant_id, project_id, recipe.name),
                "tenantId": tenant_id, "projectId": project_id or ""}

    # ── recipes ───────────────────────────────────────────────────────────
    @translated
    def create_recipe(self, tenant_id: str, project_id: str | None, recipe: Recipe) -> None:
        try:
            self._recipes.insert_one(self._recipe_doc(tenant_id, project_id, recipe))
        except DuplicateKeyError as e:
            raise Conflict(f"recipe {recipe.name} already exists in "
                           f"{recipe_level(tenant_id, project_id)}") from e

    @translated
    def update_recipe(self, tenant_id: str, project_id: str | None, recipe: Recipe) -> None:
        result = self._recipes.replace_one(
            {"_id": _recipe_key(tenant_id, project_id, recipe.name)},
            self._recipe_doc(tenant_id, project_id, recipe))
        if result.matched_count == 0:
            raise NotFound(f"recipe {recipe.name} not found in "
                           f"{recipe_level(tenant_id, project_id)}")

    @translated
    def delete_recipe(self, tenant_id: str, project_id: str | None, name: str) -> None:
        result = self._recipes.delete_one({"_id": _recipe_key(tenant_id, project_id, name)})
        if result.deleted_count == 0:
            raise NotFound(f"recipe {name} not found in {recipe_level(tenant_id, project_id)}")

    @translated
    def get_recipe(self, tenant_id: str, project_id: str | None, name: str) -> Recipe:
        raw = self._recipes.find_one({"_id": _recipe_key(tenant_id, project_id, name)})
        if raw is None:
            raise NotFound(f"recipe {name} not found in {recipe_level(tenant_id, project_id)}")
        return _recipe(raw)

    @translated
    def list_recipes(self, tenant_id: str, project_id: str | None) -> list[Recipe]:
        cursor = self._recipes.find({"tenantId": tenant_id, "projectId": project_id or ""})
        return [_recipe(raw) for raw in cursor.sort("name", ASCENDING)]

    # ── settings ──────────────────────────────────────────────────────────
    @translated
    def get_setting(self, tenant_id: str, scope: SettingScope, key: str) -> Any | None:
        raw = self._settings.find_one({"_id": _setting_key(tenant_id, scope, key)})
        return None if raw is None else from_bson(StoredSetting, raw).value

    @translated
    def set_setting(self, tenant_id: str, scope: SettingScope, key: str, value: Any) -> None:
        stored = StoredSetting(tenant_id=tenant_id, level=scope.level, scope_id=scope.id,
                               key=key, value=value)
        doc = {**stored.dump(), "updatedAt": naive_utc(stored.updated_at),
               "_id": _setting_key(tenant_id, scope, key)}
        self._settings.replace_one({"_id": doc["_id"]}, doc, upsert=True)

    @translated
    def delete_setting(self, tenant_id: str, scope: SettingScope, key: str) -> None:
        result = self._settings.delete_one({"_id": _setting_key(tenant_id, scope, key)})
        if result.deleted_count == 0:
            raise NotFound(f"setting {key} is not set for {scope}")

    @translated
    def list_settings(self, tenant_id: str, scope: SettingScope) -> dict[str, Any]:
        cursor = self._settings.find({"tenantId": tenant_id, "level": scope.level.value,
                                      "scopeId": scope.id}).sort("key", ASCENDING)
        stored = [from_bson(StoredSetting, raw) for raw in cursor]
        return {s.key: s.value for s in stored}
