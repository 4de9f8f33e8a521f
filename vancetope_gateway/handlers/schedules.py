"""Schedule frames (issue 33 part 1): a user's schedules of a project — create, list, get
(with the next run times and the latest runs), update, pause, resume, run now, delete. Each is the
caller's own: another user's or tenant's schedule reads as missing (``not_found``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from vancetope_brain.models.base import Wire
from vancetope_brain.models.schedule import MissedPolicy, RunStatus, Schedule, ScheduleRun
from vancetope_gateway.handlers.declare import Context, Id, frame

NEXT_RUNS = 5
"""Next run times ``schedule-get`` shows."""
RUNS_SHOWN = 20
"""Latest runs ``schedule-get`` shows."""
ProjectId = Field(default="default", min_length=1, max_length=64)


class RunView(Wire):
    """One run of a schedule: its tick (UTC), its status (CLAIMED, STARTED, then its outcome:
    DONE, FAILED, STOPPED, STALE, or BLOCKED while it waits for an Inbox answer) and the
    session and process it ran in (the owner opens them like any of theirs)."""

    id: str
    tick: datetime
    status: RunStatus
    session_id: str
    process_id: str
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, run: ScheduleRun) -> RunView:
        return cls(id=run.id, tick=run.tick, status=run.status, session_id=run.session_id,
                   process_id=run.process_id, started_at=run.started_at,
                   finished_at=run.finished_at)


class ScheduleView(Wire):
    """A schedule as its owner sees it; ``nextRunAt`` is null while paused, ``lastRun`` the
    latest run (null before the first)."""

    id: str
    project_id: str
    name: str
    cron: str
    timezone: str
    recipe: str
    goal: str
    params: dict[str, Any]
    missed: MissedPolicy
    paused: bool
    next_run_at: datetime | None
    created_at: datetime
    last_run: RunView | None

    @classmethod
    def of(cls, schedule: Schedule, last_run: ScheduleRun | None) -> ScheduleView:
        return cls(id=schedule.id, project_id=schedule.project_id, name=schedule.name,
                   cron=schedule.cron, timezone=schedule.timezone, recipe=schedule.recipe,
                   goal=schedule.goal, params=schedule.params, missed=schedule.missed,
                   paused=schedule.paused, next_run_at=schedule.next_run_at,
                   created_at=schedule.created_at,
                   last_run=None if last_run is None else RunView.of(last_run))


class ScheduleCreate(Wire):
    """A new schedule in one of the tenant's projects, owned by the caller: at each tick of
    ``cron`` (five fields, in ``timezone``, an IANA name) it starts an AUTONOMOUS session
    running the worker recipe ``recipe`` with ``goal`` and ``params``; ``missed`` says what
    ticks missed while nothing ran become (``skip``: none; ``runOnce``: one run)."""

    project_id: str = ProjectId
    name: str = Field(min_length=1, max_length=100)
    cron: str = Field(min_length=1, max_length=100)
    timezone: str = Field(default="UTC", min_length=1, max_length=64)
    recipe: str = Field(min_length=1, max_length=64)
    goal: str = Field(default="", max_length=32_000)
    params: dict[str, Any] = Field(default_factory=dict)
    missed: MissedPolicy = MissedPolicy.SKIP
    paused: bool = False


class ScheduleList(Wire):
    """The caller's schedules, of one project if ``projectId`` is given."""

    project_id: str | None = Field(default=None, min_length=1, max_length=64)


class ScheduleRef(Wire):
    """Names a schedule of the caller (``schedule-get`` / ``-pause`` / ``-resume`` /
    ``-run-now`` / ``-delete``)."""

    schedule_id: str = Id


class ScheduleUpdate(Wire):
    """Change some fields of a schedule of the caller (those given); checked as on create."""

    schedule_id: str = Id
    name: str | None = Field(default=None, min_length=1, max_length=100)
    cron: str | None = Field(default=None, min_length=1, max_length=100)
    timezone: str | None = Field(default=None, min_length=1, max_length=64)
    recipe: str | None = Field(default=None, min_length=1, max_length=64)
    goal: str | None = Field(default=None, max_length=32_000)
    params: dict[str, Any] | None = None
    missed: MissedPolicy | None = None


class ScheduleDetail(Wire):
    """Reply to every schedule frame but list and delete: the schedule, its next run times
    (none while paused) and its latest runs, newest first."""

    schedule: ScheduleView
    next_runs: list[datetime]
    runs: list[RunView]


class SchedulesListed(Wire):
    """Reply to ``schedule-list``, oldest first."""

    schedules: list[ScheduleView]


class ScheduleDeleted(Wire):
    """Reply to ``schedule-delete``: it runs no more; its runs' sessions stay."""

    schedule_id: str


def _detail(conn: Context, schedule: Schedule) -> ScheduleDetail:
    service = conn.gateway.schedules
    runs = service.runs(conn.who, schedule.id, RUNS_SHOWN)
    return ScheduleDetail(schedule=ScheduleView.of(schedule, runs[0] if runs else None),
                          next_runs=service.next_runs(schedule, NEXT_RUNS),
                          runs=[RunView.of(run) for run in runs])


@frame("schedule-create")
def schedule_create(conn: Context, data: ScheduleCreate) -> ScheduleDetail:
    return _detail(conn, conn.gateway.schedules.create(
        conn.who, project_id=data.project_id, name=data.name, cron=data.cron,
        timezone=data.timezone, recipe=data.recipe, goal=data.goal, params=data.params,
        missed=data.missed, paused=data.paused))


@frame("schedule-list")
def schedule_list(conn: Context, data: ScheduleList) -> SchedulesListed:
    service = conn.gateway.schedules
    return SchedulesListed(schedules=[
        ScheduleView.of(s, next(iter(service.runs(conn.who, s.id, 1)), None))
        for s in service.of_user(conn.who, data.project_id)])


@frame("schedule-get")
def schedule_get(conn: Context, data: ScheduleRef) -> ScheduleDetail:
    return _detail(conn, conn.gateway.schedules.get(conn.who, data.schedule_id))


@frame("schedule-update")
def schedule_update(conn: Context, data: ScheduleUpdate) -> ScheduleDetail:
    changes = data.model_dump(exclude_none=True, exclude={"schedule_id"})
    return _detail(conn, conn.gateway.schedules.update(conn.who, data.schedule_id, **changes))


@frame("schedule-pause")
def schedule_pause(conn: Context, data: ScheduleRef) -> ScheduleDetail:
    return _detail(conn, conn.gateway.schedules.pause(conn.who, data.schedule_id))


@frame("schedule-resume")
def schedule_resume(conn: Context, data: ScheduleRef) -> ScheduleDetail:
    return _detail(conn, conn.gateway.schedules.resume(conn.who, data.schedule_id))


class ScheduleRunStarted(Wire):
    """Reply to ``schedule-run-now``: the run it started (its tick: now)."""

    run: RunView


@frame("schedule-run-now")
def schedule_run_now(conn: Context, data: ScheduleRef) -> ScheduleRunStarted:
    return ScheduleRunStarted(run=RunView.of(
        conn.gateway.schedules.run_now(conn.who, data.schedule_id)))


@frame("schedule-delete")
def schedule_delete(conn: Context, data: ScheduleRef) -> ScheduleDeleted:
    conn.gateway.schedules.delete(conn.who, data.schedule_id)
    return ScheduleDeleted(schedule_id=data.schedule_id)
