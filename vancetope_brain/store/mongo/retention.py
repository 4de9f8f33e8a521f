"""MongoDB ``RetentionStore``: deletes from the collections of the sessions, lanes, journal,
event outbox, deliveries and audit adapters.

Which sessions are due: first the sessions held back by the Inbox (``_held``: those a PENDING
item came from, or an item whose answer is still in its ``_outbox``, directly or through
one of their processes), then the CLOSED sessions of the tenant closed before the cutoff
that are not held (index ``closed_by_age`` of ``sessions``: tenant, status, ``updatedAt``),
longest closed first, a page at a time; a page's sessions that still have a process that is
not CLOSED, or closed after the cutoff, are skipped (one ``distinct`` on ``by_session``).
One purge reads at most ``MAX_SCANNED`` candidates, so a tenant with more than that many
closed sessions kept by a process that never closed waits for them (none is ever deleted by
mistake; the dry run counts them all).

Atomicity (no multi-document transactions): a session goes children first — for each of
its processes its messages, chat, turn records, timers, journal and events, then the
process document —, the session document last. A crash part way leaves a session that is
still CLOSED and due, missing part of its records (a reader of an archived session sees
part of its chat); the next purge finds it again and finishes it. Deliveries: the ids of the
oldest due records, then one ``delete_many`` of them; audit records the same way (the audit
adapter's index ``by_tenant``: tenantId, at, _id, read backwards).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from pymongo import ASCENDING
from pymongo.collection import Collection

from vancetope_brain.models import ProcessStatus, SessionStatus
from vancetope_brain.models.inbox import DeliveryStatus, ItemStatus
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import naive_utc, translated
from vancetope_brain.store.mongo.lanes import MESSAGES
from vancetope_brain.store.mongo.sessions import PROCESS_OWNED, PROCESSES
from vancetope_brain.store.retention import SESSION_KINDS, Due, RetentionStore

MAX_SCANNED = 2000
"""The most candidate sessions one ``purge_closed_sessions`` reads."""
_PAGE = 100
_OWNED_KINDS = dict(zip(PROCESS_OWNED, ("chat", "turns", "timers", "journal", "event_outbox",
                                        "turn_inspections"),
                        strict=True))
"""The kind of ``SESSION_KINDS`` each collection a process owns holds."""


class MongoRetention(MongoAdapter, RetentionStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        database = db.database
        self._sessions = database["sessions"]
        self._processes = database[PROCESSES]
        self._items = database["inbox_items"]
        self._deliveries = database["notification_deliveries"]
        self._audit = database["audit_log"]
        self._inspections = database["turn_inspections"]
        self._sessions.create_index(
            [("tenantId", ASCENDING), ("status", ASCENDING), ("updatedAt", ASCENDING)],
            name="closed_by_age")
        self._deliveries.create_index([("tenantId", ASCENDING), ("createdAt", ASCENDING)],
                                      name="by_age")
        database["process_timers"].create_index(
            [("tenantId", ASCENDING), ("processId", ASCENDING)], name="by_process")

    @translated
    def purge_closed_sessions(self, tenant_id: str, closed_before: datetime, *,
                              limit: int = 20) -> dict[str, int]:
        gone = dict.fromkeys(SESSION_KINDS, 0)
        if limit <= 0:
            return gone
        for page in self._due(tenant_id, closed_before, MAX_SCANNED):
            for session_id in page[:limit - gone["sessions"]]:
                for kind, count in self._delete_session(tenant_id, session_id).items():
                    gone[kind] += count
            if gone["sessions"] >= limit:
                break
        return gone

    @translated
    def closed_sessions_due(self, tenant_id: str, closed_before: datetime) -> dict[str, Due]:
        counts = dict.fromkeys(SESSION_KINDS, 0)
        oldest: datetime | None = None
        database = self.db.database
        for page in self._due(tenant_id, closed_before, None):
            first = self._sessions.find_one({"_id": page[0], "tenantId": tenant_id},
                                            {"updatedAt": True})
            if oldest is None and first is not None:
                oldest = first["updatedAt"].replace(tzinfo=UTC)
            counts["sessions"] += len(page)
            ids = self._processes.distinct("_id", {"tenantId": tenant_id,
                                                   "sessionId": {"$in": page}})
            counts["processes"] += len(ids)
            counts["messages"] += database[MESSAGES].count_documents(
                {"tenantId": tenant_id, "targetProcessId": {"$in": ids}})
            for collection, kind in _OWNED_KINDS.items():
                counts[kind] += database[collection].count_documents(
                    {"tenantId": tenant_id, "processId": {"$in": ids}})
        return {kind: Due(count, oldest if kind == "sessions" else None)
                for kind, count in counts.items()}

    @translated
    def purge_deliveries(self, tenant_id: str, created_before: datetime, *,
                         limit: int = 500) -> int:
        return _purge_oldest(self._deliveries, tenant_id,
                             _deliveries_due(tenant_id, created_before), "createdAt", limit)

    @translated
    def deliveries_due(self, tenant_id: str, created_before: datetime) -> Due:
        return _oldest_due(self._deliveries, _deliveries_due(tenant_id, created_before),
                           "createdAt")

    @translated
    def purge_audit(self, tenant_id: str, before: datetime, *, limit: int = 500) -> int:
        return _purge_oldest(self._audit, tenant_id, _audit_due(tenant_id, before), "at", limit)

    @translated
    def audit_due(self, tenant_id: str, before: datetime) -> Due:
        return _oldest_due(self._audit, _audit_due(tenant_id, before), "at")

    @translated
    def purge_inspections(self, tenant_id: str, before: datetime, *, limit: int = 500) -> int:
        return _purge_oldest(self._inspections, tenant_id, _inspections_due(tenant_id, before),
                             "startedAt", limit)

    @translated
    def inspections_due(self, tenant_id: str, before: datetime) -> Due:
        return _oldest_due(self._inspections, _inspections_due(tenant_id, before), "startedAt")

    def _due(self, tenant_id: str, cutoff: datetime,
             scanned: int | None) -> Iterator[list[str]]:
        """Pages of the ids of the tenant's due sessions, longest closed first, from at most
        ``scanned`` candidates (None: all)."""
        before = naive_utc(cutoff)
        cursor = self._sessions.find(
            {"tenantId": tenant_id, "status": SessionStatus.CLOSED.value,
             "updatedAt": {"$lt": before}, "_id": {"$nin": sorted(self._held(tenant_id))}},
            {"_id": True}).sort([("updatedAt", ASCENDING), ("_id", ASCENDING)])
        if scanned is not None:
            cursor = cursor.limit(scanned)
        page: list[str] = []
        for raw in cursor:
            page.append(raw["_id"])
            if len(page) == _PAGE:
                yield from self._settled(tenant_id, page, before)
                page = []
        if page:
            yield from self._settled(tenant_id, page, before)

    def _settled(self, tenant_id: str, page: list[str], before: datetime) -> Iterator[list[str]]:
        """``page`` without the sessions having a process not CLOSED or closed since
        ``before`` (as a one-page list, none if nothing is left)."""
        busy = set(self._processes.distinct("sessionId", {
            "tenantId": tenant_id, "sessionId": {"$in": page},
            "$or": [{"status": {"$ne": ProcessStatus.CLOSED.value}},
                    {"updatedAt": {"$gte": before}}]}))
        left = [session_id for session_id in page if session_id not in busy]
        if left:
            yield left

    def _held(self, tenant_id: str) -> set[str]:
        """The tenant's sessions a PENDING Inbox item came from (or one whose answer is still
        on its way), directly or through one of their processes."""
        held: set[str] = set()
        processes: set[str] = set()
        for raw in self._items.find(
                {"tenantId": tenant_id, "$or": [{"status": ItemStatus.PENDING.value},
                                                {"_outbox": {"$exists": True}}]},
                {"originSessionId": True, "originProcessId": True}):
            if raw.get("originSessionId"):
                held.add(raw["originSessionId"])
            if raw.get("originProcessId"):
                processes.add(raw["originProcessId"])
        if processes:
            held |= set(self._processes.distinct("sessionId", {
                "tenantId": tenant_id, "_id": {"$in": sorted(processes)}}))
        return held

    def _delete_session(self, tenant_id: str, session_id: str) -> dict[str, int]:
        """Delete the session, children first (see the module docstring)."""
        database = self.db.database
        gone = dict.fromkeys(SESSION_KINDS, 0)
        for raw in self._processes.find({"tenantId": tenant_id, "sessionId": session_id},
                                        {"_id": True}):
            process_id = raw["_id"]
            gone["messages"] += database[MESSAGES].delete_many(
                {"tenantId": tenant_id, "targetProcessId": process_id}).deleted_count
            for collection, kind in _OWNED_KINDS.items():
                gone[kind] += database[collection].delete_many(
                    {"tenantId": tenant_id, "processId": process_id}).deleted_count
            gone["processes"] += self._processes.delete_one(
                {"_id": process_id, "tenantId": tenant_id}).deleted_count
        gone["sessions"] = self._sessions.delete_one(
            {"_id": session_id, "tenantId": tenant_id, "status": SessionStatus.CLOSED.value}
        ).deleted_count
        return gone


def _deliveries_due(tenant_id: str, created_before: datetime) -> dict[str, Any]:
    return {"tenantId": tenant_id, "createdAt": {"$lt": naive_utc(created_before)},
            "status": {"$ne": DeliveryStatus.QUEUED.value}}


def _audit_due(tenant_id: str, before: datetime) -> dict[str, Any]:
    return {"tenantId": tenant_id, "at": {"$lt": naive_utc(before)}}


def _inspections_due(tenant_id: str, before: datetime) -> dict[str, Any]:
    return {"tenantId": tenant_id, "startedAt": {"$lt": naive_utc(before)}}


def _purge_oldest(collection: Collection[Any], tenant_id: str, found: dict[str, Any],
                  field: str, limit: int) -> int:
    """Delete the oldest (by ``field``) ``limit`` records of the tenant that ``found`` matches:
    one page of ids, then one ``delete_many`` of them."""
    if limit <= 0:
        return 0
    ids = [raw["_id"] for raw in collection.find(found, {"_id": True})
           .sort(field, ASCENDING).limit(limit)]
    if not ids:
        return 0
    return int(collection.delete_many({"tenantId": tenant_id,
                                       "_id": {"$in": ids}}).deleted_count)


def _oldest_due(collection: Collection[Any], found: dict[str, Any], field: str) -> Due:
    """How many records ``found`` matches, and the oldest one's ``field``."""
    first = next(iter(collection.find(found, {field: True}).sort(field, ASCENDING).limit(1)),
                 None)
    return Due(collection.count_documents(found),
               None if first is None else first[field].replace(tzinfo=UTC))
