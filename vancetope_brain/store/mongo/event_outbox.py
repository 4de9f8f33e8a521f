"""MongoDB ``EventOutboxStore``: collection ``event_outbox`` (``_id`` = the event's id).

Rows are inserted by the lanes adapter's ``commit_turn`` through ``enqueue_in``, right
after the turn's chat lines (see ``lanes.py`` for the steps and what a crash between
them leaves). ``enqueue_in`` inserts in order, so a reader sees a prefix of a commit's
rows, never a later row without the earlier ones; an id already stored is kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pymongo import ASCENDING
from pymongo.errors import BulkWriteError

from vancetope_brain.models import OutboxEvent
from vancetope_brain.store.event_outbox import EventOutboxStore
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import from_bson, naive_utc, to_bson, translated

EVENT_OUTBOX = "event_outbox"
_DUPLICATE_KEY = 11000


def enqueue_in(database: Any, events: Iterable[OutboxEvent]) -> None:
    """Insert outbox rows in order, skipping ids already stored (driver errors are the
    caller's to translate)."""
    docs = [to_bson(event) for event in events]
    while docs:
        try:
            database[EVENT_OUTBOX].insert_many(docs, ordered=True)
            return
        except BulkWriteError as e:
            errors = e.details["writeErrors"]
            if errors[0].get("code") != _DUPLICATE_KEY:
                raise
            docs = docs[errors[0]["index"] + 1:]  # an ordered insert stops at the duplicate


class MongoEventOutbox(MongoAdapter, EventOutboxStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._events = db.database[EVENT_OUTBOX]
        self._events.create_index(
            [("tenantId", ASCENDING), ("processId", ASCENDING), ("epoch", ASCENDING),
             ("index", ASCENDING)], name="by_process")
        self._events.create_index([("createdAt", ASCENDING)], name="by_age")

    @translated
    def pending_events(self, tenant_id: str, process_id: str,
                       limit: int = 500) -> list[OutboxEvent]:
        if limit <= 0:  # Mongo reads limit(0) as "no limit"
            return []
        cursor = self._events.find({"tenantId": tenant_id, "processId": process_id}).sort(
            [("epoch", ASCENDING), ("index", ASCENDING)]).limit(limit)
        return [from_bson(OutboxEvent, raw) for raw in cursor]

    @translated
    def stale_event_processes(self, older_than: datetime,
                              limit: int = 100) -> list[tuple[str, str]]:
        if limit <= 0:
            return []
        rows = self._events.aggregate([
            {"$match": {"createdAt": {"$lt": naive_utc(older_than)}}},
            {"$group": {"_id": {"tenantId": "$tenantId", "processId": "$processId"},
                        "since": {"$min": "$createdAt"}}},
            {"$sort": {"since": 1}},
            {"$limit": limit},
        ])
        return [(raw["_id"]["tenantId"], raw["_id"]["processId"]) for raw in rows]

    @translated
    def remove_events(self, tenant_id: str, event_ids: Iterable[str]) -> None:
        ids = list(event_ids)
        if ids:
            self._events.delete_many({"_id": {"$in": ids}, "tenantId": tenant_id})
