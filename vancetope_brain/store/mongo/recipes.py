"""MongoDB ``RecipeStore``: one collection per kind (``kind.COLLECTION``: ``recipes``,
``strategies``, …).

A document is the validated definition's dump (with its schema version) plus
``tenantId`` and ``projectId`` (``''`` for a tenant-level one), ``_id`` =
``{tenantId, projectId, name}``. Atomicity: each call is one single-document
operation (``update_definition`` one ``replace_one``); ``create_definition``'s cap is counted
just before the insert, so writers racing at the cap may pass it by one each.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pymongo import ASCENDING
from pymongo.collection import Collection
from pymongo.errors import DuplicateKeyError

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models.recipe import Definition
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import translated
from vancetope_brain.store.recipes import RecipeStore, over_limit, recipe_level

D = TypeVar("D", bound=Definition)


def _key(tenant_id: str, project_id: str | None, name: str) -> dict[str, str]:
    # An embedded _id compares field by field in order, so it is built here only.
    return {"tenantId": tenant_id, "projectId": project_id or "", "name": name}


def _doc(tenant_id: str, project_id: str | None, definition: Definition) -> dict[str, Any]:
    return {**definition.dump(), "_id": _key(tenant_id, project_id, definition.name),
            "tenantId": tenant_id, "projectId": project_id or ""}


def _load(kind: type[D], raw: dict[str, Any]) -> D:
    for ours in ("_id", "tenantId", "projectId"):
        raw.pop(ours, None)
    return kind.load(raw)


class MongoRecipes(MongoAdapter, RecipeStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._indexed: set[str] = set()

    def _collection(self, kind: type[Definition]) -> Collection[dict[str, Any]]:
        collection = self.db.database[kind.COLLECTION]
        if kind.COLLECTION not in self._indexed:
            collection.create_index(
                [("tenantId", ASCENDING), ("projectId", ASCENDING), ("name", ASCENDING)],
                name="by_scope")
            self._indexed.add(kind.COLLECTION)
        return collection

    @translated
    def create_definition(self, tenant_id: str, project_id: str | None,
                          definition: Definition, limit: int | None = None) -> None:
        collection = self._collection(type(definition))
        if limit is not None and collection.count_documents({"tenantId": tenant_id}) >= limit:
            raise over_limit(definition.KIND, tenant_id, limit)
        try:
            self._collection(type(definition)).insert_one(_doc(tenant_id, project_id, definition))
        except DuplicateKeyError as e:
            raise Conflict(f"{definition.KIND} {definition.name} already exists in "
                           f"{recipe_level(tenant_id, project_id)}") from e

    @translated
    def update_definition(self, tenant_id: str, project_id: str | None,
                          definition: Definition) -> None:
        result = self._collection(type(definition)).replace_one(
            {"_id": _key(tenant_id, project_id, definition.name)},
            _doc(tenant_id, project_id, definition))
        if result.matched_count == 0:
            raise NotFound(f"{definition.KIND} {definition.name} not found in "
                           f"{recipe_level(tenant_id, project_id)}")

    @translated
    def delete_definition(self, kind: type[Definition], tenant_id: str, project_id: str | None,
                          name: str) -> None:
        result = self._collection(kind).delete_one({"_id": _key(tenant_id, project_id, name)})
        if result.deleted_count == 0:
            raise NotFound(f"{kind.KIND} {name} not found in "
                           f"{recipe_level(tenant_id, project_id)}")

    @translated
    def get_definition(self, kind: type[D], tenant_id: str, project_id: str | None,
                       name: str) -> D:
        raw = self._collection(kind).find_one({"_id": _key(tenant_id, project_id, name)})
        if raw is None:
            raise NotFound(f"{kind.KIND} {name} not found in "
                           f"{recipe_level(tenant_id, project_id)}")
        return _load(kind, raw)

    @translated
    def list_definitions(self, kind: type[D], tenant_id: str, project_id: str | None) -> list[D]:
        cursor = self._collection(kind).find({"tenantId": tenant_id, "projectId": project_id or ""})
        return [_load(kind, raw) for raw in cursor.sort("name", ASCENDING)]
