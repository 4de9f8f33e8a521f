"""SQLite ``AuditStore``: table ``audit_log``.

Atomicity: an append is one ``INSERT``. A page is read newest first by the index
``audit_by_tenant`` (tenant, ``at_ms``, id), or ``audit_by_time`` for every tenant.
"""

from __future__ import annotations

from vancetope_brain.models.audit import AuditRecord
from vancetope_brain.store.audit import MAX_LISTED, AuditPosition, AuditStore
from vancetope_brain.store.sql import newest_page, to_ms
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import load_all

_TABLES = """
CREATE TABLE IF NOT EXISTS audit_log (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, at_ms INTEGER NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_by_tenant ON audit_log (tenant_id, at_ms, id);
CREATE INDEX IF NOT EXISTS audit_by_time ON audit_log (at_ms, id);
"""


class SqliteAudit(SqliteAdapter, AuditStore):
    tables = _TABLES

    def append_audit(self, record: AuditRecord) -> None:
        self.db.execute("INSERT INTO audit_log (id, tenant_id, at_ms, doc) VALUES (?, ?, ?, ?)",
                        (record.id, record.tenant_id, to_ms(record.at),
                         record.model_dump_json(by_alias=True)))

    def list_audit(self, tenant_id: str | None, before: AuditPosition | None = None,
                   limit: int = 100) -> list[AuditRecord]:
        return load_all(AuditRecord, self.db.read(*newest_page(
            "?", "doc", "audit_log", {} if tenant_id is None else {"tenant_id": tenant_id},
            before, limit, MAX_LISTED)))
