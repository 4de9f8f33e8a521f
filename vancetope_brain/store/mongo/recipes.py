"""MongoDB ``RecipeStore``: collection ``recipes``.

A document is the validated ``Recipe`` dump (with its schema version) plus
``tenantId`` and ``projectId`` (``''`` for a tenant-level recipe), ``_id`` =
``{tenantId, projectId, name}``. Atomicity: each call is one single-document
operation (``update_recipe`` one ``replace_one``).
"""

from __future__ import annotations

from typing import Any

from pymongo import ASCENDING
from pymongo.errors import DuplicateKeyError

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.recipes.model import Recipe
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import translated
from vancetope_brain.store.recipes import RecipeStore, recipe_level


def _recipe_key(tenant_id: str, project_id: str | None, name: str) -> dict[str, str]:
    # An embedded _id compares field by field in order, so it is built here only.
    return {"tenantId": tenant_id, "projectId": project_id or "", "name": name}


def _recipe_doc(tenant_id: str, project_id: str | None, recipe: Recipe) -> dict[str, Any]:
    return {**recipe.dump(), "_id": _recipe_key(tenant_id, project_id, recipe.name),
            "tenantId": tenant_id, "projectId": project_id or ""}


def _recipe(raw: dict[str, Any]) -> Recipe:
    for ours in ("_id", "tenantId", "projectId"):
        raw.pop(ours, None)
    return Recipe.load(raw)


class MongoRecipes(MongoAdapter, RecipeStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._recipes = db.database["recipes"]
        self._recipes.create_index(
            [("tenantId", ASCENDING), ("projectId", ASCENDING), ("name", ASCENDING)],
            name="by_scope")

    @translated
    def create_recipe(self, tenant_id: str, project_id: str | None, recipe: Recipe) -> None:
        try:
            self._recipes.insert_one(_recipe_doc(tenant_id, project_id, recipe))
        except DuplicateKeyError as e:
            raise Conflict(f"recipe {recipe.name} already exists in "
                           f"{recipe_level(tenant_id, project_id)}") from e

    @translated
    def update_recipe(self, tenant_id: str, project_id: str | None, recipe: Recipe) -> None:
        result = self._recipes.replace_one(
            {"_id": _recipe_key(tenant_id, project_id, recipe.name)},
            _recipe_doc(tenant_id, project_id, recipe))
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
