"""Schedules and their runs: round trips scoped to the tenant, the due query across tenants,
a cursor that only moves forward, one claim per tick, runs marked once finished, pruning."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vancetope_brain.errors import NotFound
from vancetope_brain.models.schedule import RunStatus, Schedule, ScheduleRun, run_ids
from vancetope_brain.store import ScheduleStore

T0 = datetime(2026, 1, 5, 7, 0, tzinfo=UTC)


def _schedule(tenant_id: str = "ten_1", schedule_id: str = "sch_1", *,
              next_run_at: datetime | None = T0, paused: bool = False,
              project_id: str = "default", user_id: str = "usr_1") -> Schedule:
    return Schedule(id=schedule_id, tenant_id=tenant_id, project_id=project_id,
                    user_id=user_id, name="brief", cron="0 7 * * *", recipe="vogon-cron",
                    next_run_at=next_run_at, paused=paused)


def _run(schedule: Schedule, tick: datetime, *, created_at: datetime | None = None
         ) -> ScheduleRun:
    run_id, session_id, process_id = run_ids(schedule.tenant_id, schedule.id, tick)
    return ScheduleRun(id=run_id, tenant_id=schedule.tenant_id, schedule_id=schedule.id,
                       user_id=schedule.user_id, tick=tick, session_id=session_id,
                       process_id=process_id, created_at=created_at or T0)


def test_schedules_round_trip_replace_and_list_in_creation_order(
        schedules: ScheduleStore) -> None:
    first, second = _schedule(), _schedule(schedule_id="sch_2", project_id="prj_2",
                                           user_id="usr_2")
    schedules.put_schedule(first)
    schedules.put_schedule(second)
    renamed = first.model_copy(update={"name": "renamed"})
    schedules.put_schedule(renamed)
    assert schedules.get_schedule("ten_1", "sch_1") == renamed
    assert schedules.list_schedules("ten_1") == [renamed, second]
    assert schedules.list_schedules("ten_1", project_id="prj_2") == [second]
    assert schedules.list_schedules("ten_1", user_id="usr_1") == [renamed]


def test_another_tenant_neither_reads_nor_deletes_a_schedule(schedules: ScheduleStore) -> None:
    mine = _schedule()
    schedules.put_schedule(mine)
    schedules.claim_run(_run(mine, T0))
    with pytest.raises(NotFound):
        schedules.get_schedule("ten_2", "sch_1")
    assert schedules.list_schedules("ten_2") == []
    assert schedules.list_runs("ten_2", "sch_1") == []
    assert schedules.mark_run("ten_2", _run(mine, T0).id, RunStatus.DONE, T0) is None
    assert not schedules.delete_schedule("ten_2", "sch_1")
    assert not schedules.advance_schedule("ten_2", "sch_1", T0, T0 + timedelta(days=1))
    assert schedules.prune_runs("ten_2", "sch_1", 0) == 0
    assert schedules.get_schedule("ten_1", "sch_1") == mine
    assert [r.status for r in schedules.list_runs("ten_1", "sch_1")] == [RunStatus.CLAIMED]


def test_due_schedules_across_tenants_leave_out_paused_and_later_ones(
        schedules: ScheduleStore) -> None:
    early = _schedule("ten_1", "sch_a", next_run_at=T0 - timedelta(minutes=2))
    due = _schedule("ten_2", "sch_b", next_run_at=T0)
    later = _schedule("ten_1", "sch_c", next_run_at=T0 + timedelta(seconds=1))
    paused = _schedule("ten_1", "sch_d", next_run_at=T0 - timedelta(hours=1), paused=True)
    for schedule in (later, due, paused, early):
        schedules.put_schedule(schedule)
    assert [s.id for s in schedules.due_schedules(T0)] == ["sch_a", "sch_b"]
    assert [s.id for s in schedules.due_schedules(T0, limit=1)] == ["sch_a"]
    assert schedules.due_schedules(T0, limit=0) == []


def test_the_cursor_moves_forward_only(schedules: ScheduleStore) -> None:
    schedules.put_schedule(_schedule())
    day = timedelta(days=1)
    assert schedules.advance_schedule("ten_1", "sch_1", T0, T0 + day)
    assert not schedules.advance_schedule("ten_1", "sch_1", T0, T0 + 5 * day)
    assert not schedules.advance_schedule("ten_1", "sch_1", T0 - day, T0)
    stored = schedules.get_schedule("ten_1", "sch_1")
    assert (stored.last_tick, stored.next_run_at) == (T0, T0 + day)
    assert schedules.due_schedules(T0 + day) == [stored]
    assert schedules.due_schedules(T0 + day - timedelta(milliseconds=1)) == []


def test_a_paused_schedule_advanced_stays_out_of_the_due_query(schedules: ScheduleStore) -> None:
    schedules.put_schedule(_schedule(next_run_at=None, paused=True))
    assert schedules.advance_schedule("ten_1", "sch_1", T0, T0 + timedelta(minutes=1))
    assert schedules.due_schedules(T0 + timedelta(days=9)) == []


def test_a_tick_is_claimed_once(schedules: ScheduleStore) -> None:
    schedule = _schedule()
    schedules.put_schedule(schedule)
    run = _run(schedule, T0)
    assert schedules.claim_run(run)
    assert not schedules.claim_run(run)
    assert not schedules.claim_run(run.model_copy(update={"created_at": T0 + timedelta(1)}))
    assert schedules.list_runs("ten_1", "sch_1") == [run]


def test_marking_moves_a_run_once_and_a_finished_run_stays(schedules: ScheduleStore) -> None:
    schedule = _schedule()
    schedules.put_schedule(schedule)
    run = _run(schedule, T0)
    schedules.claim_run(run)
    at = T0 + timedelta(seconds=3)
    started = schedules.mark_run("ten_1", run.id, RunStatus.STARTED, at)
    assert started is not None and started.status is RunStatus.STARTED
    assert started.started_at == at
    again = schedules.mark_run("ten_1", run.id, RunStatus.STARTED, at + timedelta(1))
    assert again == started
    done = schedules.mark_run("ten_1", run.id, RunStatus.DONE, at + timedelta(minutes=1))
    assert done is not None and done.finished_at == at + timedelta(minutes=1)
    assert schedules.mark_run("ten_1", run.id, RunStatus.FAILED, at) == done
    assert schedules.list_runs("ten_1", "sch_1") == [done]
    assert schedules.mark_run("ten_1", "run_missing", RunStatus.DONE, at) is None


def test_unstarted_runs_are_the_claimed_ones_older_than_asked(schedules: ScheduleStore) -> None:
    schedule = _schedule()
    schedules.put_schedule(schedule)
    old = _run(schedule, T0, created_at=T0)
    fresh = _run(schedule, T0 + timedelta(hours=1), created_at=T0 + timedelta(minutes=5))
    started = _run(schedule, T0 + timedelta(hours=2), created_at=T0)
    for run in (old, fresh, started):
        schedules.claim_run(run)
    schedules.mark_run("ten_1", started.id, RunStatus.STARTED, T0)
    assert schedules.unstarted_runs(T0 + timedelta(minutes=1)) == [old]
    assert schedules.unstarted_runs(T0 + timedelta(minutes=6)) == [old, fresh]
    assert schedules.unstarted_runs(T0 + timedelta(minutes=6), limit=0) == []


def test_runs_list_newest_first_prune_and_go_with_their_schedule(
        schedules: ScheduleStore) -> None:
    schedule = _schedule()
    schedules.put_schedule(schedule)
    runs = [_run(schedule, T0 + timedelta(days=i)) for i in range(5)]
    for run in runs:
        schedules.claim_run(run)
    assert schedules.list_runs("ten_1", "sch_1", limit=2) == [runs[4], runs[3]]
    assert schedules.prune_runs("ten_1", "sch_1", 3) == 2
    assert schedules.list_runs("ten_1", "sch_1") == runs[:1:-1]
    assert schedules.delete_schedule("ten_1", "sch_1")
    assert schedules.list_runs("ten_1", "sch_1") == []
    with pytest.raises(NotFound):
        schedules.get_schedule("ten_1", "sch_1")
    assert schedules.mark_run("ten_1", runs[4].id, RunStatus.DONE, T0) is None
