"""MongoDB ``AuditStore``: collection ``audit_log``, one document per record (``at`` a BSON
datetime: whole milliseconds).

Atomicity: an append is one ``insert_one``. A page is read newest first by the index
``by_tenant`` (tenantId, at, _id), or ``by_time`` for every tenant.
"""

from __future__ import annotations

from typing import Any

from pymongo import DESCENDING

from vancetope_brain.models.audit import AuditRecord
from vancetope_brain.store.audit import MAX_LISTED, AuditPosition, AuditStore
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import from_bson, naive_utc, to_bson, translated
from vancetope_brain.store.sql import from_ms

_NEWEST_FIRST = [("at", DESCENDING), ("_id", DESCENDING)]


class MongoAudit(MongoAdapter, AuditStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._log = db.database["audit_log"]
        self._log.create_index([("tenantId", DESCENDING), *_NEWEST_FIRST], name="by_tenant")
        self._log.create_index(_NEWEST_FIRST, name="by_time")

    @translated
    def append_audit(self, record: AuditRecord) -> None:
        self._log.insert_one(to_bson(record))

    @translated
    def list_audit(self, tenant_id: str | None, before: AuditPosition | None = None,
                   limit: int = 100) -> list[AuditRecord]:
        query: dict[str, Any] = {} if tenant_id is None else {"tenantId": tenant_id}
        if before is not None:
            at = naive_utc(from_ms(before.at_ms))
            query["$or"] = [{"at": {"$lt": at}}, {"at": at, "_id": {"$lt": before.id}}]
        count = max(0, min(limit, MAX_LISTED))
        if count == 0:
            return []
        cursor = self._log.find(query).sort(_NEWEST_FIRST).limit(count)
        return [from_bson(AuditRecord, raw) for raw in cursor]
