"""MongoDB ``ScheduleStore``: collections ``schedules`` and ``schedule_runs``.

A record with ``_id`` = its id; indexes put ``tenantId`` first, except those of the
firing's system queries. The claim of a tick is the run's ``_id`` (it follows from tenant,
schedule and tick): of two inserts one raises a duplicate key and claims nothing.
``advance_schedule`` and ``mark_run`` are compare-and-set updates of one document (the
filter holds the value read), so a concurrent change is never overwritten.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.errors import DuplicateKeyError

from vancetope_brain.models.schedule import FINISHED, RunStatus, Schedule, ScheduleRun
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import (
    OLDEST_FIRST,
    from_bson,
    load_one,
    naive_utc,
    to_bson,
    translated,
)
from vancetope_brain.store.schedules import ScheduleStore


class MongoSchedules(MongoAdapter, ScheduleStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._schedules = db.database["schedules"]
        self._runs = db.database["schedule_runs"]
        self._schedules.create_index(
            [("tenantId", ASCENDING), ("projectId", ASCENDING), ("createdAt", ASCENDING)],
            name="by_project")
        self._schedules.create_index([("nextRunAt", ASCENDING)], name="due")
        self._runs.create_index(
            [("tenantId", ASCENDING), ("scheduleId", ASCENDING), ("tick", DESCENDING)],
            unique=True, name="by_tick")
        self._runs.create_index([("status", ASCENDING), ("createdAt", ASCENDING)],
                                name="claimed")

    @translated
    def put_schedule(self, schedule: Schedule) -> None:
        self._schedules.replace_one({"_id": schedule.id, "tenantId": schedule.tenant_id},
                                    to_bson(schedule), upsert=True)

    @translated
    def get_schedule(self, tenant_id: str, schedule_id: str) -> Schedule:
        return load_one(Schedule, self._schedules.find_one(
            {"_id": schedule_id, "tenantId": tenant_id}), f"schedule {schedule_id!r} not found")

    @translated
    def list_schedules(self, tenant_id: str, *, project_id: str | None = None,
                       user_id: str | None = None) -> list[Schedule]:
        query: dict[str, Any] = {"tenantId": tenant_id}
        if project_id is not None:
            query["projectId"] = project_id
        if user_id is not None:
            query["userId"] = user_id
        return [from_bson(Schedule, raw)
                for raw in self._schedules.find(query).sort(OLDEST_FIRST)]

    @translated
    def delete_schedule(self, tenant_id: str, schedule_id: str) -> bool:
        self._runs.delete_many({"tenantId": tenant_id, "scheduleId": schedule_id})
        return self._schedules.delete_one(
            {"_id": schedule_id, "tenantId": tenant_id}).deleted_count > 0

    @translated
    def due_schedules(self, now: datetime, limit: int = 100) -> list[Schedule]:
        if limit <= 0:  # Mongo reads limit(0) as "no limit"
            return []
        cursor = self._schedules.find(
            {"paused": False, "nextRunAt": {"$ne": None, "$lte": naive_utc(now)}})
        return [from_bson(Schedule, raw)
                for raw in cursor.sort("nextRunAt", ASCENDING).limit(limit)]

    @translated
    def advance_schedule(self, tenant_id: str, schedule_id: str, last_tick: datetime,
                         next_run_at: datetime | None) -> bool:
        raw = self._schedules.find_one({"_id": schedule_id, "tenantId": tenant_id})
        if raw is None:
            return False
        schedule = from_bson(Schedule, raw)
        if schedule.last_tick is not None and schedule.last_tick >= last_tick:
            return False
        read = None if schedule.last_tick is None else naive_utc(schedule.last_tick)
        after = None if schedule.paused or next_run_at is None else naive_utc(next_run_at)
        return self._schedules.update_one(
            {"_id": schedule_id, "tenantId": tenant_id, "lastTick": read,
             "paused": schedule.paused},
            {"$set": {"lastTick": naive_utc(last_tick), "nextRunAt": after}}).modified_count > 0

    @translated
    def claim_run(self, run: ScheduleRun) -> bool:
        try:
            self._runs.insert_one(to_bson(run))
        except DuplicateKeyError:
            return False
        return True

    @translated
    def mark_run(self, tenant_id: str, run_id: str, status: RunStatus,
                 at: datetime) -> ScheduleRun | None:
        for _ in range(3):  # a concurrent mark won the compare-and-set: read it again
            raw = self._runs.find_one({"_id": run_id, "tenantId": tenant_id})
            if raw is None:
                return None
            run = from_bson(ScheduleRun, raw)
            if run.status in FINISHED or run.status is status:
                return run
            marked = run.marked(status, at)
            if self._runs.replace_one({"_id": run_id, "tenantId": tenant_id,
                                       "status": run.status.value},
                                      to_bson(marked)).modified_count:
                return marked
        return run

    @translated
    def list_runs(self, tenant_id: str, schedule_id: str, limit: int = 20) -> list[ScheduleRun]:
        if limit <= 0:
            return []
        cursor = self._runs.find({"tenantId": tenant_id, "scheduleId": schedule_id})
        return [from_bson(ScheduleRun, raw)
                for raw in cursor.sort("tick", DESCENDING).limit(limit)]

    @translated
    def unstarted_runs(self, claimed_before: datetime, limit: int = 100) -> list[ScheduleRun]:
        if limit <= 0:
            return []
        cursor = self._runs.find({"status": RunStatus.CLAIMED.value,
                                  "createdAt": {"$lt": naive_utc(claimed_before)}})
        return [from_bson(ScheduleRun, raw) for raw in cursor.sort(OLDEST_FIRST).limit(limit)]

    @translated
    def prune_runs(self, tenant_id: str, schedule_id: str, keep: int) -> int:
        mine = {"tenantId": tenant_id, "scheduleId": schedule_id}
        kept = [raw["_id"] for raw in self._runs.find(mine, projection={"_id": True})
                .sort("tick", DESCENDING).limit(max(0, keep))] if keep > 0 else []
        return self._runs.delete_many({**mine, "_id": {"$nin": kept}}).deleted_count
