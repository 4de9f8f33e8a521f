"""SQLite ``SettingStore``: table ``settings``.

A row holds a ``StoredSetting`` under (tenant, level, scope id or ``''``, key).
Atomicity: each call is one statement, a write in its own ``BEGIN IMMEDIATE``
transaction (``set_setting`` is one upsert; ``setting_values`` and ``cascade_settings``
one query for all scopes).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from vancetope_brain.errors import NotFound
from vancetope_brain.models.settings import SettingScope, StoredSetting
from vancetope_brain.store.settings import SettingStore
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import load_all

_TABLES = """
CREATE TABLE IF NOT EXISTS settings (
    tenant_id TEXT NOT NULL, level TEXT NOT NULL, scope_id TEXT NOT NULL, key TEXT NOT NULL,
    doc TEXT NOT NULL, PRIMARY KEY (tenant_id, level, scope_id, key)
);
"""


class SqliteSettings(SqliteAdapter, SettingStore):
    tables = _TABLES

    def setting_values(self, tenant_id: str, scopes: Sequence[SettingScope],
                       key: str) -> list[Any | None]:
        if not scopes:
            return []
        rows = self.db.read(
            "SELECT level, scope_id, doc FROM settings WHERE tenant_id = ? AND key = ? AND "
            f"(level, scope_id) IN (VALUES {', '.join(['(?, ?)'] * len(scopes))})",
            (tenant_id, key, *(part for s in scopes for part in (s.level.value, s.id))))
        found = {(level, scope_id): doc for level, scope_id, doc in rows}
        docs = [found.get((s.level.value, s.id)) for s in scopes]
        return [None if doc is None else StoredSetting.load(json.loads(doc)).value
                for doc in docs]

    def cascade_settings(self, tenant_id: str,
                         scopes: Sequence[SettingScope]) -> list[dict[str, Any]]:
        if not scopes:
            return []
        rows = self.db.read(
            "SELECT level, scope_id, doc FROM settings WHERE tenant_id = ? AND "
            f"(level, scope_id) IN (VALUES {', '.join(['(?, ?)'] * len(scopes))}) ORDER BY key",
            (tenant_id, *(part for s in scopes for part in (s.level.value, s.id))))
        found: dict[tuple[str, str], dict[str, Any]] = {(s.level.value, s.id): {}
                                                        for s in scopes}
        for level, scope_id, doc in rows:
            stored = StoredSetting.load(json.loads(doc))
            found[(level, scope_id)][stored.key] = stored.value
        return [found[(s.level.value, s.id)] for s in scopes]

    def set_setting(self, tenant_id: str, scope: SettingScope, key: str, value: Any) -> None:
        stored = StoredSetting(tenant_id=tenant_id, level=scope.level, scope_id=scope.id,
                               key=key, value=value)
        self.db.execute(
            "INSERT INTO settings (tenant_id, level, scope_id, key, doc) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant_id, level, scope_id, key) DO UPDATE SET doc = excluded.doc",
            (tenant_id, scope.level.value, scope.id, key, stored.model_dump_json(by_alias=True)))

    def delete_setting(self, tenant_id: str, scope: SettingScope, key: str) -> None:
        cursor = self.db.execute(
            "DELETE FROM settings WHERE tenant_id = ? AND level = ? AND scope_id = ? AND key = ?",
            (tenant_id, scope.level.value, scope.id, key))
        if cursor.rowcount == 0:
            raise NotFound(f"setting {key} is not set for {scope}")

    def list_settings(self, tenant_id: str, scope: SettingScope) -> dict[str, Any]:
        stored = load_all(StoredSetting, self.db.read(
            "SELECT doc FROM settings WHERE tenant_id = ? AND level = ? AND scope_id = ? "
            "ORDER BY key", (tenant_id, scope.level.value, scope.id)))
        return {s.key: s.value for s in stored}
