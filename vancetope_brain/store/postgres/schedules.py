"""PostgreSQL ``ScheduleStore``: tables ``schedules`` and ``schedule_runs``.

A row holds the whole record in ``doc`` (``jsonb``), with copies of the fields the queries
use; ``schedules.next_ms`` is null while the schedule is paused, ``row_no`` (an identity
column) is the creation order a list follows. The claim of a tick is the run's primary key
(its id follows from tenant, schedule and tick): ``INSERT … ON CONFLICT DO NOTHING``
inserts it once, whoever races. ``advance_schedule`` and ``mark_run`` lock their row
(``FOR UPDATE``) and rewrite it in one transaction.
"""

from __future__ import annotations

from datetime import datetime

from vancetope_brain.models.schedule import FINISHED, RunStatus, Schedule, ScheduleRun
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import doc_json, equal_clauses, load_all, load_one
from vancetope_brain.store.schedules import ScheduleStore
from vancetope_brain.store.sql import to_ms

_TABLES = """
CREATE TABLE IF NOT EXISTS schedules (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, project_id TEXT NOT NULL,
    user_id TEXT NOT NULL, next_ms BIGINT, row_no BIGINT GENERATED ALWAYS AS IDENTITY,
    doc JSONB NOT NULL
);
CREATE INDEX IF NOT EXISTS schedules_by_project ON schedules (tenant_id, project_id, row_no);
CREATE INDEX IF NOT EXISTS schedules_due ON schedules (next_ms) WHERE next_ms IS NOT NULL;
CREATE TABLE IF NOT EXISTS schedule_runs (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, schedule_id TEXT NOT NULL,
    tick_ms BIGINT NOT NULL, status TEXT NOT NULL, created_ms BIGINT NOT NULL,
    doc JSONB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS schedule_runs_by_tick
    ON schedule_runs (tenant_id, schedule_id, tick_ms);
CREATE INDEX IF NOT EXISTS schedule_runs_claimed ON schedule_runs (status, created_ms);
"""


def _next_ms(schedule: Schedule) -> int | None:
    return None if schedule.paused or schedule.next_run_at is None \
        else to_ms(schedule.next_run_at)


class PostgresSchedules(PostgresAdapter, ScheduleStore):
    tables = _TABLES

    def put_schedule(self, schedule: Schedule) -> None:
        self.db.execute(
            "INSERT INTO schedules (id, tenant_id, project_id, user_id, next_ms, doc) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET "
            "project_id = excluded.project_id, user_id = excluded.user_id, "
            "next_ms = excluded.next_ms, doc = excluded.doc "
            "WHERE schedules.tenant_id = excluded.tenant_id",
            (schedule.id, schedule.tenant_id, schedule.project_id, schedule.user_id,
             _next_ms(schedule), doc_json(schedule)))

    def get_schedule(self, tenant_id: str, schedule_id: str) -> Schedule:
        return load_one(Schedule, self.db.read(
            "SELECT doc FROM schedules WHERE tenant_id = %s AND id = %s",
            (tenant_id, schedule_id)), f"schedule {schedule_id!r} not found")

    def list_schedules(self, tenant_id: str, *, project_id: str | None = None,
                       user_id: str | None = None) -> list[Schedule]:
        clauses, params = equal_clauses(tenant_id, project_id=project_id, user_id=user_id)
        return load_all(Schedule, self.db.read(
            f"SELECT doc FROM schedules WHERE {' AND '.join(clauses)} ORDER BY row_no", params))

    def delete_schedule(self, tenant_id: str, schedule_id: str) -> bool:
        with self.db.write() as conn:
            conn.execute("DELETE FROM schedule_runs WHERE tenant_id = %s AND schedule_id = %s",
                         (tenant_id, schedule_id))
            return conn.execute("DELETE FROM schedules WHERE tenant_id = %s AND id = %s",
                                (tenant_id, schedule_id)).rowcount > 0

    def due_schedules(self, now: datetime, limit: int = 100) -> list[Schedule]:
        return load_all(Schedule, self.db.read(
            "SELECT doc FROM schedules WHERE next_ms IS NOT NULL AND next_ms <= %s "
            "ORDER BY next_ms LIMIT %s", (to_ms(now), max(0, limit))))

    def advance_schedule(self, tenant_id: str, schedule_id: str, last_tick: datetime,
                         next_run_at: datetime | None) -> bool:
        with self.db.write() as conn:
            row = conn.execute("SELECT doc FROM schedules WHERE tenant_id = %s AND id = %s "
                               "FOR UPDATE", (tenant_id, schedule_id)).fetchone()
            if row is None:
                return False
            schedule = Schedule.load(row[0])
            if schedule.last_tick is not None and schedule.last_tick >= last_tick:
                return False
            schedule = schedule.model_copy(update={"last_tick": last_tick,
                                                   "next_run_at": next_run_at})
            conn.execute("UPDATE schedules SET next_ms = %s, doc = %s WHERE id = %s",
                         (_next_ms(schedule), doc_json(schedule), schedule_id))
        return True

    def claim_run(self, run: ScheduleRun) -> bool:
        return self.db.execute(
            "INSERT INTO schedule_runs (id, tenant_id, schedule_id, tick_ms, status, "
            "created_ms, doc) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (run.id, run.tenant_id, run.schedule_id, to_ms(run.tick), run.status.value,
             to_ms(run.created_at), doc_json(run))) > 0

    def mark_run(self, tenant_id: str, run_id: str, status: RunStatus,
                 at: datetime) -> ScheduleRun | None:
        with self.db.write() as conn:
            row = conn.execute("SELECT doc FROM schedule_runs WHERE tenant_id = %s AND id = %s "
                               "FOR UPDATE", (tenant_id, run_id)).fetchone()
            if row is None:
                return None
            run = ScheduleRun.load(row[0])
            if run.status in FINISHED or run.status is status:
                return run
            run = run.marked(status, at)
            conn.execute("UPDATE schedule_runs SET status = %s, doc = %s WHERE id = %s",
                         (status.value, doc_json(run), run_id))
        return run

    def list_runs(self, tenant_id: str, schedule_id: str, limit: int = 20) -> list[ScheduleRun]:
        return load_all(ScheduleRun, self.db.read(
            "SELECT doc FROM schedule_runs WHERE tenant_id = %s AND schedule_id = %s "
            "ORDER BY tick_ms DESC LIMIT %s", (tenant_id, schedule_id, max(0, limit))))

    def unstarted_runs(self, claimed_before: datetime, limit: int = 100) -> list[ScheduleRun]:
        return load_all(ScheduleRun, self.db.read(
            "SELECT doc FROM schedule_runs WHERE status = %s AND created_ms < %s "
            "ORDER BY created_ms LIMIT %s",
            (RunStatus.CLAIMED.value, to_ms(claimed_before), max(0, limit))))

    def prune_runs(self, tenant_id: str, schedule_id: str, keep: int) -> int:
        return self.db.execute(
            "DELETE FROM schedule_runs WHERE tenant_id = %s AND schedule_id = %s AND id NOT IN "
            "(SELECT id FROM schedule_runs WHERE tenant_id = %s AND schedule_id = %s "
            "ORDER BY tick_ms DESC LIMIT %s)",
            (tenant_id, schedule_id, tenant_id, schedule_id, max(0, keep)))
