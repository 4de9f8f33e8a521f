"""The schedules port: a project's schedules and the history of their runs.

The claim of a tick is the run's record: ``claim_run`` inserts it once (its id follows from
tenant, schedule and tick, ``models.schedule.run_ids``), so of any number of firing
processes exactly one gets a tick. The firing reads the due schedules across tenants
(``due_schedules``) and moves their cursor forward (``advance_schedule``) only.
"""

from __future__ import annotations

from abc import abstractmethod
from datetime import datetime

from vancetope_brain.models.schedule import RunStatus, Schedule, ScheduleRun
from vancetope_brain.store.backend import Port


class ScheduleStore(Port):
    """Schedules and their runs. Every read and write of a user's record is scoped to its
    tenant; ``due_schedules`` and ``unstarted_runs`` are the firing's system queries."""

    @abstractmethod
    def put_schedule(self, schedule: Schedule) -> None:
        """Insert or replace the schedule (its id and tenant identify it)."""

    @abstractmethod
    def get_schedule(self, tenant_id: str, schedule_id: str) -> Schedule:
        """The schedule; ``NotFound`` when the tenant has none of that id."""

    @abstractmethod
    def list_schedules(self, tenant_id: str, *, project_id: str | None = None,
                       user_id: str | None = None) -> list[Schedule]:
        """The tenant's schedules matching the filters, oldest first (a project holds at most
        a few dozen: the cap of ``ScheduleService``)."""

    @abstractmethod
    def delete_schedule(self, tenant_id: str, schedule_id: str) -> bool:
        """Delete the schedule and its runs' records (not their sessions); whether it
        existed."""

    @abstractmethod
    def due_schedules(self, now: datetime, limit: int = 100) -> list[Schedule]:
        """System query of the firing: schedules not paused whose ``nextRunAt`` is at or
        before ``now``, earliest first, at most ``limit``, across tenants."""

    @abstractmethod
    def advance_schedule(self, tenant_id: str, schedule_id: str, last_tick: datetime,
                         next_run_at: datetime | None) -> bool:
        """Set the schedule's ``lastTick`` and ``nextRunAt`` unless its ``lastTick`` is
        already ``last_tick`` or later (a firing that read it earlier never moves it back);
        a paused schedule keeps ``nextRunAt`` null. Whether it changed."""

    @abstractmethod
    def claim_run(self, run: ScheduleRun) -> bool:
        """Insert the run unless its id is taken; whether this call inserted it (the claim
        of its tick: exactly one caller per tick gets True)."""

    @abstractmethod
    def mark_run(self, tenant_id: str, run_id: str, status: RunStatus,
                 at: datetime) -> ScheduleRun | None:
        """Move the run to ``status``: STARTED sets ``startedAt``, an outcome
        ``finishedAt`` (``at``). A finished run (``FINISHED``) and a run already in
        ``status`` are left alone. The run as stored after the call; None when it is
        gone (deleted with its schedule, or pruned)."""

    @abstractmethod
    def list_runs(self, tenant_id: str, schedule_id: str, limit: int = 20) -> list[ScheduleRun]:
        """The schedule's latest runs, newest tick first, at most ``limit``."""

    @abstractmethod
    def unstarted_runs(self, claimed_before: datetime, limit: int = 100) -> list[ScheduleRun]:
        """System query of the firing: runs still CLAIMED that were claimed before
        ``claimed_before`` (their firer died before starting them), oldest first, across
        tenants."""

    @abstractmethod
    def prune_runs(self, tenant_id: str, schedule_id: str, keep: int) -> int:
        """Delete the schedule's runs but the ``keep`` latest ticks; how many went."""
