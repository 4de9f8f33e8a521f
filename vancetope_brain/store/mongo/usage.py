"""MongoDB ``UsageStore``: collection ``llm_usage``, one document per (tenantId, day,
sessionId, model, userId, projectId) — its ``_id``, those fields in that order, and the
same fields beside it for the index ``by_day`` (tenantId, day) that reads use; ``day`` is
``YYYY-MM-DD`` (UTC).

Atomicity: each row of a turn is one upsert with ``$inc`` (``add_usage``), made by the lane
commit right after it inserts the turn's record, and only when that insert was not a
duplicate: a commit retried after a crash adds nothing twice, while a crash between the
record and the upserts loses that turn's tokens (MongoDB has no multi-document
transaction here). Two first upserts of one key racing: the loser's duplicate-key error is
retried once, as an update of the row the winner made. A read is one ``find`` by
``by_day``.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from pymongo import ASCENDING
from pymongo.errors import DuplicateKeyError

from vancetope_brain.models.usage import UsageKey, UsageRow
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import translated
from vancetope_brain.store.usage import MAX_READ, UsageStore

USAGE = "llm_usage"
KEY_FIELDS = ("tenantId", "day", "sessionId", "model", "userId", "projectId")
"""The fields of a row's ``_id``, in order (the SQL key's columns, in the same order)."""


def usage_id(tenant_id: str, day: str, session_id: str, model: str, user_id: str,
             project_id: str) -> dict[str, str]:
    """A row's ``_id``."""
    return dict(zip(KEY_FIELDS, (tenant_id, day, session_id, model, user_id, project_id),
                    strict=True))


def add_usage(database: Any, rows: list[UsageRow]) -> None:
    """Add ``rows`` to the stored totals, one upsert each."""
    for row in rows:
        k = row.key
        key = usage_id(k.tenant_id, k.day.isoformat(), k.session_id, k.model, k.user_id,
                       k.project_id)
        inc = {"$inc": {"tokensIn": row.tokens_in, "tokensOut": row.tokens_out,
                        "calls": row.calls, "estimatedCalls": row.estimated_calls},
               "$setOnInsert": key}
        try:
            database[USAGE].update_one({"_id": key}, inc, upsert=True)
        except DuplicateKeyError:
            database[USAGE].update_one({"_id": key}, inc)


class MongoUsage(MongoAdapter, UsageStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._usage = db.database[USAGE]
        self._usage.create_index([("tenantId", ASCENDING), ("day", ASCENDING)], name="by_day")

    @translated
    def read_usage(self, tenant_id: str, first_day: date, last_day: date, *,
                   user_id: str | None = None, session_id: str | None = None
                   ) -> list[UsageRow]:
        query: dict[str, Any] = {"tenantId": tenant_id, "day": {
            "$gte": first_day.isoformat(), "$lte": last_day.isoformat()}}
        if user_id is not None:
            query["userId"] = user_id
        if session_id is not None:
            query["sessionId"] = session_id
        cursor = self._usage.find(query).sort(
            [("day", ASCENDING), ("sessionId", ASCENDING), ("model", ASCENDING)]
        ).limit(MAX_READ)
        return [UsageRow(UsageKey(raw["tenantId"], raw["userId"], raw["projectId"],
                                  raw["sessionId"], raw["model"], date.fromisoformat(raw["day"])),
                         raw["tokensIn"], raw["tokensOut"], raw["calls"], raw["estimatedCalls"])
                for raw in cursor]
