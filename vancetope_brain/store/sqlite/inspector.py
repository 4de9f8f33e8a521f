"""SQLite ``InspectorStore``: table ``turn_inspections``, the whole record in ``doc`` and
its listing form (``TurnInspection.head``) in ``head``, so a listing never reads the steps.

Atomicity: a put is one ``INSERT … ON CONFLICT DO NOTHING``. A process's page is read newest
first by ``inspections_by_process`` (tenant, process, ``at_ms``, id); the retention purge
reads ``inspections_by_age`` (tenant, ``at_ms``).
"""

from __future__ import annotations

from vancetope_brain.errors import NotFound
from vancetope_brain.models.inspector import TurnInspection
from vancetope_brain.store.inspector import MAX_LISTED, InspectionPosition, InspectorStore
from vancetope_brain.store.sql import newest_page, to_ms
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import load_all

_TABLES = """
CREATE TABLE IF NOT EXISTS turn_inspections (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, session_id TEXT NOT NULL,
    process_id TEXT NOT NULL, at_ms INTEGER NOT NULL, head TEXT NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS inspections_by_process
    ON turn_inspections (tenant_id, process_id, at_ms, id);
CREATE INDEX IF NOT EXISTS inspections_by_age ON turn_inspections (tenant_id, at_ms);
"""


class SqliteInspector(SqliteAdapter, InspectorStore):
    tables = _TABLES

    def put_inspection(self, record: TurnInspection) -> None:
        self.db.execute(
            "INSERT INTO turn_inspections (id, tenant_id, session_id, process_id, at_ms, head, "
            "doc) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            (record.id, record.tenant_id, record.session_id, record.process_id,
             to_ms(record.started_at), record.head().model_dump_json(by_alias=True),
             record.model_dump_json(by_alias=True)))

    def get_inspection(self, tenant_id: str, turn_id: str) -> TurnInspection:
        found = load_all(TurnInspection, self.db.read(
            "SELECT doc FROM turn_inspections WHERE tenant_id = ? AND id = ?",
            (tenant_id, turn_id)))
        if not found:
            raise NotFound(f"turn {turn_id} not found")
        return found[0]

    def list_inspections(self, tenant_id: str, process_id: str,
                         before: InspectionPosition | None = None,
                         limit: int = 50) -> list[TurnInspection]:
        return load_all(TurnInspection, self.db.read(*newest_page(
            "?", "head", "turn_inspections", {"tenant_id": tenant_id, "process_id": process_id},
            before, limit, MAX_LISTED)))
