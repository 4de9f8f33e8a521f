"""MongoDB ``InspectorStore``: collection ``turn_inspections``, one document per record
(``startedAt`` a BSON datetime: whole milliseconds).

Atomicity: a put is one ``update_one(…, $setOnInsert, upsert)``: a record already there
stays. A listing reads without ``tools`` and ``steps`` (a projection), newest first by the
index ``by_process`` (tenantId, processId, startedAt, _id); the retention purge reads
``by_age`` (tenantId, startedAt).
"""

from __future__ import annotations

from typing import Any

from pymongo import ASCENDING, DESCENDING

from vancetope_brain.errors import NotFound
from vancetope_brain.models.inspector import TurnInspection
from vancetope_brain.store.inspector import MAX_LISTED, InspectionPosition, InspectorStore
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import from_bson, naive_utc, to_bson, translated
from vancetope_brain.store.sql import from_ms

INSPECTIONS = "turn_inspections"
_NEWEST_FIRST = [("startedAt", DESCENDING), ("_id", DESCENDING)]


class MongoInspector(MongoAdapter, InspectorStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._records = db.database[INSPECTIONS]
        self._records.create_index([("tenantId", ASCENDING), ("processId", ASCENDING),
                                    *_NEWEST_FIRST], name="by_process")
        self._records.create_index([("tenantId", ASCENDING), ("startedAt", ASCENDING)],
                                   name="by_age")

    @translated
    def put_inspection(self, record: TurnInspection) -> None:
        doc = to_bson(record)
        self._records.update_one({"_id": doc.pop("_id")}, {"$setOnInsert": doc}, upsert=True)

    @translated
    def get_inspection(self, tenant_id: str, turn_id: str) -> TurnInspection:
        raw = self._records.find_one({"_id": turn_id, "tenantId": tenant_id})
        if raw is None:
            raise NotFound(f"turn {turn_id} not found")
        return from_bson(TurnInspection, raw)

    @translated
    def list_inspections(self, tenant_id: str, process_id: str,
                         before: InspectionPosition | None = None,
                         limit: int = 50) -> list[TurnInspection]:
        query: dict[str, Any] = {"tenantId": tenant_id, "processId": process_id}
        if before is not None:
            at = naive_utc(from_ms(before.at_ms))
            query["$or"] = [{"startedAt": {"$lt": at}},
                            {"startedAt": at, "_id": {"$lt": before.id}}]
        count = max(0, min(limit, MAX_LISTED))
        if count == 0:
            return []
        cursor = self._records.find(query, {"tools": False, "steps": False}) \
            .sort(_NEWEST_FIRST).limit(count)
        return [from_bson(TurnInspection, raw) for raw in cursor]
