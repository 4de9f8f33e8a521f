"""PostgreSQL ``AuditStore``: table ``audit_log``.

Atomicity: an append is one ``INSERT``. A page is read newest first by the index
``audit_by_tenant`` (tenant, ``at_ms``, id), or ``audit_by_time`` for every tenant; ``id``
is ``COLLATE "C"`` so ties order by bytes, as on SQLite.
"""

from __future__ import annotations

from vancetope_brain.models.audit import AuditRecord
from vancetope_brain.store.audit import MAX_LISTED, AuditPosition, AuditStore
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import doc_json, load_all
from vancetope_brain.store.sql import newest_page, to_ms

_TABLES = """
CREATE TABLE IF NOT EXISTS audit_log (
    id TEXT COLLATE "C" PRIMARY KEY, tenant_id TEXT NOT NULL, at_ms BIGINT NOT NULL,
    doc JSONB NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_by_tenant ON audit_log (tenant_id, at_ms, id);
CREATE INDEX IF NOT EXISTS audit_by_time ON audit_log (at_ms, id);
"""


class PostgresAudit(PostgresAdapter, AuditStore):
    tables = _TABLES

    def append_audit(self, record: AuditRecord) -> None:
        self.db.execute("INSERT INTO audit_log (id, tenant_id, at_ms, doc) "
                        "VALUES (%s, %s, %s, %s)",
                        (record.id, record.tenant_id, to_ms(record.at), doc_json(record)))

    def list_audit(self, tenant_id: str | None, before: AuditPosition | None = None,
                   limit: int = 100) -> list[AuditRecord]:
        return load_all(AuditRecord, self.db.read(*newest_page(
            "%s", "doc", "audit_log", {} if tenant_id is None else {"tenant_id": tenant_id},
            before, limit, MAX_LISTED)))
