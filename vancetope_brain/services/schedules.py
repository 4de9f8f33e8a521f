"""Schedules (issue 33 part 1): a project's recurring AUTONOMOUS runs of a worker recipe.

Exactly once per tick, whoever fires: the sweep (``fire``) reads the due schedules and, for
the tick it decides to run, *claims* it by inserting the run's record
(``ScheduleStore.claim_run``: its id follows from tenant, schedule and tick, so of any
number of sweeps racing, one inserts it). Everything after the claim is idempotent: the
run's session and process carry ids derived from the same digest (``run_ids``), so a
second start of the same run finds them instead of making new ones, and a run left CLAIMED
by a firer that died before starting it is started by a later sweep
(``unstarted_runs``). A run's outcome is written when its process closes or blocks, by the
lane that commits that status (``run_ended``, the runner's hook) — the one place a run
finishes, where other reactions (a webhook) attach; an outcome that hook missed (its worker
died right after the commit) is read from the process when the schedule next fires.

Ticks missed while nothing fired (every worker down): ``skip`` fires the latest due tick
only if it is at most ``ON_TIME`` seconds old, ``runOnce`` fires the latest due tick
whatever its age; older ones are never fired. Either way the cursor (``lastTick``) moves
past them.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from vancetope_brain.engines.spawning import ProcessFactory
from vancetope_brain.errors import (
    Conflict,
    InvalidInput,
    InvalidSchedule,
    LimitExceeded,
    NotFound,
    UserError,
)
from vancetope_brain.identity import Principal
from vancetope_brain.models import (
    CloseReason,
    OnDisconnect,
    ProcessStatus,
    Session,
    SessionType,
    ThinkProcess,
    new_id,
    utcnow,
)
from vancetope_brain.models.recipe import RecipeCategory
from vancetope_brain.models.schedule import (
    MissedPolicy,
    RunStatus,
    Schedule,
    ScheduleRun,
    run_ids,
    run_of,
)
from vancetope_brain.models.wake import ProcessWaker
from vancetope_brain.sessions.lifecycle import SessionLifecycle
from vancetope_brain.store import IdentityStore, ScheduleStore, SessionStore

log = logging.getLogger(__name__)

MAX_SCHEDULES_PER_PROJECT = 50
"""Schedules one project may hold (``limit_exceeded`` past it)."""
RUNS_KEPT = 100
"""Run records kept per schedule (the latest ticks); older ones are pruned as runs are claimed
(their sessions stay, under the tenant's retention)."""
ON_TIME = 60.0
"""Seconds after its time a tick still fires under ``skip`` (or two sweep intervals, if
longer): later, it counts as missed."""
RECONCILED = 5
"""Latest runs of a schedule whose outcome a firing checks against their processes."""
START_GRACE = 30.0
"""Seconds a run may stay CLAIMED before a sweep starts it (its firer died in between)."""
DUE_PER_SWEEP = 100
"""Most schedules one sweep fires; the rest wait for the next sweep."""
CHECKED_TICKS = 50
"""Ticks of a new cron expression whose gaps are checked against the minimum interval."""

RunEnded = Callable[[ScheduleRun, Schedule | None], object]
"""Called once per outcome a run records (its webhook's point)."""


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(f"unknown time zone {name!r}; give an IANA name such as "
                              "'Europe/Berlin' or 'UTC'") from None


def _after(schedule: Schedule, moment: datetime) -> datetime:
    """The schedule's first tick after ``moment`` (UTC)."""
    local = moment.astimezone(_zone(schedule.timezone))
    return croniter(schedule.cron, local).get_next(datetime).astimezone(moment.tzinfo)


def _latest(schedule: Schedule, now: datetime) -> datetime:
    """The schedule's latest tick at or before ``now`` (UTC)."""
    local = (now + timedelta(milliseconds=1)).astimezone(_zone(schedule.timezone))
    return croniter(schedule.cron, local).get_prev(datetime).astimezone(now.tzinfo)


def check_cron(cron: str, timezone: str, min_interval: float) -> None:
    """Raise ``InvalidSchedule`` unless ``cron`` is a cron expression of five fields (six,
    the last of seconds, where ``min_interval`` is under a minute) whose ticks in
    ``timezone`` are ``min_interval`` seconds apart at least."""
    zone = _zone(timezone)
    fields = cron.split()
    if len(fields) not in (5, 6) or not croniter.is_valid(cron):
        raise InvalidSchedule(f"{cron!r} is no cron expression; give five fields: minute "
                              "hour day-of-month month day-of-week, e.g. '0 7 * * 1-5'")
    if len(fields) == 6 and min_interval >= 60:
        raise InvalidSchedule(f"{cron!r} has a field of seconds; schedules tick at most once "
                              "a minute: give five fields")
    ticks = croniter(cron, utcnow().astimezone(zone))
    last = ticks.get_next(datetime)
    for _ in range(CHECKED_TICKS):
        tick = ticks.get_next(datetime)
        if (tick - last).total_seconds() < min_interval:
            raise InvalidSchedule(f"{cron!r} ticks {int((tick - last).total_seconds())} s "
                                  f"apart; schedules tick {int(min_interval)} s apart at least")
        last = tick


def paused(schedule: Schedule, now: datetime) -> Schedule:
    """The schedule paused at ``now``: no run until resumed; ticks meanwhile are not missed
    ones, none fires later. (The service's and the admin CLI's pause.)"""
    return schedule.model_copy(update={"paused": True, "next_run_at": None, "updated_at": now})


def resumed(schedule: Schedule, now: datetime) -> Schedule:
    """The schedule resumed at ``now``: it runs from its first tick after now."""
    cursor = max(now, schedule.last_tick or now)
    schedule = schedule.model_copy(update={"paused": False, "updated_at": now,
                                           "last_tick": cursor})
    return schedule.model_copy(update={"next_run_at": _after(schedule, cursor)})


class ScheduleService:
    def __init__(self, *, store: ScheduleStore, sessions: SessionStore, identity: IdentityStore,
                 factory: ProcessFactory, waker: ProcessWaker, lifecycle: SessionLifecycle,
                 min_interval: float = 60.0, sweep_interval: float = 5.0,
                 max_per_project: int = MAX_SCHEDULES_PER_PROJECT) -> None:
        self._store = store
        self._sessions = sessions
        self._identity = identity
        self._factory = factory
        self._waker = waker
        self._lifecycle = lifecycle
        self.min_interval = min_interval
        self._on_time = max(ON_TIME, 2 * sweep_interval)
        self.max_per_project = max_per_project
        self.on_run_ended: list[RunEnded] = []
        """Called with each outcome recorded (webhooks attach here)."""

    # ── a user's schedules ──────────────────────────────────────────────
    def create(self, who: Principal, *, name: str, cron: str, recipe: str,
               timezone: str = "UTC", goal: str = "", params: dict[str, Any] | None = None,
               missed: MissedPolicy = MissedPolicy.SKIP, paused: bool = False,
               project_id: str = "default") -> Schedule:
        """A new schedule of the caller in one of the tenant's projects; its first run is its
        first tick after now. Refused: a bad cron expression or time zone, ticks closer than
        the minimum interval (``invalid_schedule``), a recipe that is not a worker recipe
        (``not_found`` / ``invalid_input``), a project full (``limit_exceeded``)."""
        self._identity.get_project(who.tenant_id, project_id)
        count = len(self._store.list_schedules(who.tenant_id, project_id=project_id))
        if count >= self.max_per_project:
            raise LimitExceeded(f"project {project_id!r} has {count} schedules, the most it "
                                "may have; delete one first (schedule-delete)")
        now = utcnow()
        schedule = Schedule(id=new_id("sch"), tenant_id=who.tenant_id, project_id=project_id,
                            user_id=who.user_id, name=name, cron=cron, timezone=timezone,
                            recipe=recipe, goal=goal, params=params or {}, missed=missed,
                            paused=paused, last_tick=now, created_at=now, updated_at=now)
        schedule = self._checked(schedule, now)
        self._store.put_schedule(schedule)
        return schedule

    def of_user(self, who: Principal, project_id: str | None = None) -> list[Schedule]:
        """The caller's schedules (of one project, if given), oldest first."""
        return self._store.list_schedules(who.tenant_id, project_id=project_id,
                                          user_id=who.user_id)

    def get(self, who: Principal, schedule_id: str) -> Schedule:
        """The caller's schedule; ``not_found`` for another user's or tenant's."""
        schedule = self._store.get_schedule(who.tenant_id, schedule_id)
        if schedule.user_id != who.user_id:
            raise NotFound(f"schedule {schedule_id!r} not found")
        return schedule

    def runs(self, who: Principal, schedule_id: str, limit: int = 20) -> list[ScheduleRun]:
        """The schedule's latest runs, newest first."""
        return self._store.list_runs(who.tenant_id, self.get(who, schedule_id).id, limit)

    def next_runs(self, schedule: Schedule, count: int = 5) -> list[datetime]:
        """The schedule's next ``count`` ticks (none while paused)."""
        if schedule.paused or schedule.next_run_at is None:
            return []
        found = [schedule.next_run_at]
        while len(found) < count:
            found.append(_after(schedule, found[-1]))
        return found

    def update(self, who: Principal, schedule_id: str, **changes: Any) -> Schedule:
        """Change the schedule's name, cron, timezone, recipe, goal, params or missed
        policy (checked as ``create`` checks them); its next run follows the new cron."""
        allowed = {"name", "cron", "timezone", "recipe", "goal", "params", "missed"}
        if unknown := set(changes) - allowed:
            raise InvalidInput(f"a schedule has no field {sorted(unknown)[0]!r} to change")
        schedule = self.get(who, schedule_id)
        now = utcnow()
        schedule = self._checked(schedule.model_copy(update={**changes, "updated_at": now}),
                                 schedule.last_tick or now)
        self._store.put_schedule(schedule)
        return schedule

    def pause(self, who: Principal, schedule_id: str) -> Schedule:
        """No run until resumed (``paused``)."""
        schedule = paused(self.get(who, schedule_id), utcnow())
        self._store.put_schedule(schedule)
        return schedule

    def resume(self, who: Principal, schedule_id: str) -> Schedule:
        """Runs again from the first tick after now (``resumed``)."""
        schedule = resumed(self.get(who, schedule_id), utcnow())
        self._store.put_schedule(schedule)
        return schedule

    def run_now(self, who: Principal, schedule_id: str) -> ScheduleRun:
        """A run of the schedule now, outside its cron (paused or not): its tick is this
        millisecond; the schedule's cursor and next run stay as they are."""
        schedule = self.get(who, schedule_id)
        now = utcnow()
        run_id, session_id, process_id = run_ids(schedule.tenant_id, schedule.id, now)
        run = ScheduleRun(id=run_id, tenant_id=schedule.tenant_id, schedule_id=schedule.id,
                          user_id=schedule.user_id, tick=now, session_id=session_id,
                          process_id=process_id, created_at=now)
        if not self._store.claim_run(run):
            raise Conflict("a run of this schedule started this very millisecond; look at "
                           "its runs (schedule-get)")
        self._start(run, schedule)
        self._store.prune_runs(schedule.tenant_id, schedule.id, RUNS_KEPT)
        return self._store.list_runs(schedule.tenant_id, schedule.id, 1)[0]

    def delete(self, who: Principal, schedule_id: str) -> None:
        """Delete the schedule and its runs' records; the sessions they ran in stay."""
        self._store.delete_schedule(who.tenant_id, self.get(who, schedule_id).id)

    def _checked(self, schedule: Schedule, since: datetime) -> Schedule:
        check_cron(schedule.cron, schedule.timezone, self.min_interval)
        applied = self._factory.resolver.resolve(schedule.tenant_id, schedule.project_id,
                                                 recipe=schedule.recipe,
                                                 caller_params=schedule.params)
        if applied.category is not RecipeCategory.WORKER:
            raise InvalidInput(f"recipe {schedule.recipe!r} is a {applied.category.value} "
                               "recipe; a schedule runs a worker recipe (e.g. vogon-cron)")
        return schedule.model_copy(update={
            "next_run_at": None if schedule.paused else _after(schedule, since)})

    # ── the firing (the sweep) ──────────────────────────────────────────
    def fire(self, now: datetime | None = None) -> int:
        """Fire every due schedule's tick (at most one run per schedule and sweep) and start
        runs a dead firer left CLAIMED; returns how many runs were started. Safe in any
        number of processes at once: a tick's run is claimed once."""
        now = now or utcnow()
        started = 0
        for run in self._store.unstarted_runs(now - timedelta(seconds=START_GRACE)):
            started += self._start_claimed(run)
        for schedule in self._store.due_schedules(now, limit=DUE_PER_SWEEP):
            try:
                started += self._fire_one(schedule, now)
            except Exception:  # one broken schedule must not stop the others
                log.exception("schedule %s of tenant %s did not fire", schedule.id,
                              schedule.tenant_id)
        return started

    def _fire_one(self, schedule: Schedule, now: datetime) -> int:
        latest = _latest(schedule, now)
        cursor = schedule.last_tick or schedule.created_at
        fired = 0
        on_time = (now - latest).total_seconds() <= self._on_time
        if latest > cursor and (on_time or schedule.missed is MissedPolicy.RUN_ONCE):
            run_id, session_id, process_id = run_ids(schedule.tenant_id, schedule.id, latest)
            run = ScheduleRun(id=run_id, tenant_id=schedule.tenant_id, schedule_id=schedule.id,
                              user_id=schedule.user_id, tick=latest, session_id=session_id,
                              process_id=process_id, created_at=now)
            if self._store.claim_run(run):
                fired = self._start(run, schedule)
                self._store.prune_runs(schedule.tenant_id, schedule.id, RUNS_KEPT)
                self._reconcile(schedule, run.id)
        elif latest > cursor:
            log.info("schedule %s missed its tick %s (policy skip)", schedule.id,
                     latest.isoformat())
        self._store.advance_schedule(schedule.tenant_id, schedule.id, max(latest, cursor),
                                     _after(schedule, max(latest, cursor)))
        return fired

    def _reconcile(self, schedule: Schedule, fired: str) -> None:
        """Record the outcome of the schedule's latest runs whose process ended while the
        lane's hook could not (its worker died between the commit and ``run_ended``): read
        from the process itself, once per fired tick, for ``RECONCILED`` runs at most."""
        for run in self._store.list_runs(schedule.tenant_id, schedule.id, RECONCILED + 1):
            if run.id == fired or run.status not in (RunStatus.STARTED, RunStatus.BLOCKED):
                continue
            try:
                process = self._sessions.get_process(schedule.tenant_id, run.process_id)
            except NotFound:
                continue
            if process.status is ProcessStatus.CLOSED or (
                    process.status is ProcessStatus.BLOCKED and run.status is RunStatus.STARTED):
                self.run_ended(process, process.status, process.close_reason)

    def _start_claimed(self, run: ScheduleRun) -> int:
        try:
            schedule = self._store.get_schedule(run.tenant_id, run.schedule_id)
        except NotFound:
            return 0
        log.info("run %s of schedule %s was claimed but not started; starting it", run.id,
                 schedule.id)
        return self._start(run, schedule)

    def _start(self, run: ScheduleRun, schedule: Schedule) -> int:
        """Make the run's session and process (each only if it is not there yet: the ids
        are the run's) and wake the process; then mark the run STARTED. A refused start
        (the recipe deleted meanwhile) records the run FAILED."""
        tenant_id = schedule.tenant_id
        session = Session(id=run.session_id, tenant_id=tenant_id, user_id=schedule.user_id,
                          project_id=schedule.project_id, type=SessionType.AUTONOMOUS,
                          title=f"{schedule.name} · {run.tick:%Y-%m-%d %H:%M} UTC"[:200],
                          on_disconnect=OnDisconnect.KEEP_OPEN)
        with contextlib.suppress(Conflict):  # an earlier start of this run made it
            self._sessions.create_session(session)
        try:
            self._sessions.get_process(tenant_id, run.process_id)
        except NotFound:
            try:
                process = self._factory.build(
                    tenant_id=tenant_id, project_id=schedule.project_id,
                    session_id=run.session_id, user_id=schedule.user_id, siblings=[],
                    recipe=schedule.recipe, name=schedule.name[:200], goal=schedule.goal,
                    params=schedule.params, process_id=run.process_id)
            except UserError as e:
                log.warning("run %s of schedule %s refused: %s", run.id, schedule.id, e)
                self._record(tenant_id, run.id, RunStatus.FAILED)
                return 0
            with contextlib.suppress(Conflict):  # a concurrent start of this run made it
                self._sessions.create_process(process)
        self._waker.wake(tenant_id, run.process_id)
        self._store.mark_run(tenant_id, run.id, RunStatus.STARTED, utcnow())
        return 1

    # ── the outcome (the lane's hook) ───────────────────────────────────
    def run_ended(self, process: ThinkProcess, status: ProcessStatus,
                  reason: CloseReason | None) -> None:
        """The lane committed ``status`` for ``process``: if a schedule started it and the
        status is an outcome (CLOSED with its reason, or BLOCKED), record it on the run,
        and close the run's session once the process is CLOSED (it was the session's only
        process). Never raises: the turn is committed whatever happens here."""
        run_id = run_of(process.id)
        if run_id is None or status not in (ProcessStatus.CLOSED, ProcessStatus.BLOCKED):
            return
        outcome = RunStatus.BLOCKED if status is ProcessStatus.BLOCKED \
            else RunStatus((reason or CloseReason.DONE).value)
        try:
            self._record(process.tenant_id, run_id, outcome)
            if status is ProcessStatus.CLOSED:
                self._lifecycle.close(Principal(process.tenant_id, process.user_id),
                                      process.session_id)
        except Conflict:
            pass  # the session was closed already
        except Exception:
            log.exception("the outcome of run %s (process %s) was not recorded", run_id,
                          process.id)

    def _record(self, tenant_id: str, run_id: str, outcome: RunStatus) -> None:
        """Mark the run with ``outcome`` and, if this call changed it (its ``finishedAt`` is
        this call's time), tell ``on_run_ended``: once per outcome a run records."""
        at = utcnow()
        run = self._store.mark_run(tenant_id, run_id, outcome, at)
        if run is None or run.status is not outcome or run.finished_at != at:
            return
        try:
            schedule: Schedule | None = self._store.get_schedule(tenant_id, run.schedule_id)
        except NotFound:
            schedule = None
        for hook in self.on_run_ended:
            hook(run, schedule)
