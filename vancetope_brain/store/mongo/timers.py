"""MongoDB ``TimerStore``: the collection ``process_timers`` that ``LaneStore.commit_turn`` arms. A fire removes
the timer (only at the due time it was read with) and appends its message through the
lane adapter's ``append_in``: append first, then remove (the message's idempotency key keeps a repeated delivery single)."""

from __future__ import annotations

from datetime import datetime

from pymongo import ASCENDING

from vancetope_brain.models import InboxMessage, ProcessStatus, Timer
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import from_bson, naive_utc, translated
from vancetope_brain.store.mongo.lanes import append_in
from vancetope_brain.store.mongo.sessions import PROCESSES
from vancetope_brain.store.timers import TimerStore


class MongoTimers(MongoAdapter, TimerStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._processes = db.database[PROCESSES]
        self._timers = db.database["process_timers"]
        self._timers.create_index([("dueAt", ASCENDING)], name="due")

    @translated
    def due_timers(self, now: datetime, limit: int = 100) -> list[Timer]:
        if limit <= 0:
            return []
        cursor = self._timers.find({"dueAt": {"$lte": naive_utc(now)}}).sort(
            "dueAt", ASCENDING).limit(limit)
        return [from_bson(Timer, raw) for raw in cursor]

    @translated
    def fire_timer(self, timer: Timer, message: InboxMessage | None) -> bool:
        mine = {"_id": timer.id, "dueAt": naive_utc(timer.due_at)}
        if self._timers.find_one(mine, projection={"_id": True}) is None:
            return False
        process = self._processes.find_one(
            {"_id": timer.process_id, "tenantId": timer.tenant_id}, projection={"status": True})
        created = process is not None and process["status"] != ProcessStatus.CLOSED.value \
            and (message is None or append_in(self.db.database, message)[1])
        deleted = self._timers.delete_one(mine).deleted_count
        return created and (message is not None or deleted == 1)

    @translated
    def bring_timers_due(self, tenant_id: str, key: str, due_at: datetime, *,
                         limit: int) -> int:
        found = [raw["_id"] for raw in self._timers.find(
            {"tenantId": tenant_id, "key": key, "dueAt": {"$gt": naive_utc(due_at)}},
            projection={"_id": True}).limit(limit)]
        if not found:
            return 0
        return self._timers.update_many(
            {"_id": {"$in": found}, "dueAt": {"$gt": naive_utc(due_at)}},
            {"$set": {"dueAt": naive_utc(due_at)}}).modified_count
