"""MongoDB ``SettingStore``: collection ``settings``.

A ``StoredSetting`` with ``_id`` = ``{tenantId, level, scopeId, key}``.
Atomicity: each call is one single-document operation (``set_setting`` one
upserting ``replace_one``; ``setting_values`` and ``cascade_settings`` one ``find``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pymongo import ASCENDING

from vancetope_brain.errors import NotFound
from vancetope_brain.models.settings import SettingScope, StoredSetting
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import from_bson, naive_utc, translated
from vancetope_brain.store.settings import SettingStore


def _setting_key(tenant_id: str, scope: SettingScope, key: str) -> dict[str, str]:
    return {"tenantId": tenant_id, "level": scope.level.value, "scopeId": scope.id, "key": key}


class MongoSettings(MongoAdapter, SettingStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._settings = db.database["settings"]
        self._settings.create_index(
            [("tenantId", ASCENDING), ("level", ASCENDING), ("scopeId", ASCENDING),
             ("key", ASCENDING)], name="by_scope")

    @translated
    def setting_values(self, tenant_id: str, scopes: Sequence[SettingScope],
                       key: str) -> list[Any | None]:
        ids = [_setting_key(tenant_id, scope, key) for scope in scopes]
        found = {(raw["_id"]["level"], raw["_id"]["scopeId"]): raw
                 for raw in self._settings.find({"_id": {"$in": ids}})} if ids else {}
        raws = [found.get((scope.level.value, scope.id)) for scope in scopes]
        return [None if raw is None else from_bson(StoredSetting, raw).value for raw in raws]

    @translated
    def cascade_settings(self, tenant_id: str,
                         scopes: Sequence[SettingScope]) -> list[dict[str, Any]]:
        if not scopes:
            return []
        cursor = self._settings.find({"tenantId": tenant_id, "$or": [
            {"level": scope.level.value, "scopeId": scope.id} for scope in scopes]}
        ).sort("key", ASCENDING)
        found: dict[tuple[str, str], dict[str, Any]] = {(s.level.value, s.id): {}
                                                        for s in scopes}
        for raw in cursor:
            stored = from_bson(StoredSetting, raw)
            found[(stored.level.value, stored.scope_id)][stored.key] = stored.value
        return [found[(s.level.value, s.id)] for s in scopes]

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
