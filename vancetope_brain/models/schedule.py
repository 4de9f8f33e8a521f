"""Schedules (issue 33 part 1): a project's recurring autonomous runs of a worker recipe.

A ``Schedule`` fires at the ticks of its cron expression in its time zone; each tick it
fires is one ``ScheduleRun``, whose id follows from (tenant, schedule, tick): the run's
record is the claim (``ScheduleStore.claim_run`` inserts it once), and the session and
process it starts carry the same digest (``run_ids``), so starting a claimed run again
re-creates nothing (``vancetope_brain/services/schedules.py``).
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from vancetope_brain.models.base import Document, utcnow


class MissedPolicy(StrEnum):
    """What a schedule does with ticks that passed while nothing fired them (every worker
    down, the schedule paused): ``skip`` fires none of them (only ticks on time),
    ``runOnce`` fires the latest of them, once."""

    SKIP = "skip"
    RUN_ONCE = "runOnce"


class RunStatus(StrEnum):
    """A run's state: CLAIMED (its record written, its process not started yet), STARTED
    (its process started), then its outcome when the process ends or blocks: the close
    reason of a CLOSED process (DONE, FAILED, STOPPED, STALE) or BLOCKED (it waits for its
    owner's answer in the Inbox; it moves on to its close reason later)."""

    CLAIMED = "CLAIMED"
    STARTED = "STARTED"
    BLOCKED = "BLOCKED"
    DONE = "DONE"
    FAILED = "FAILED"
    STOPPED = "STOPPED"
    STALE = "STALE"


FINISHED = frozenset({RunStatus.DONE, RunStatus.FAILED, RunStatus.STOPPED, RunStatus.STALE})
"""The outcomes after which a run changes no more."""


class Schedule(Document):
    """A project's schedule, owned by the user who created it: each run's session and
    process are theirs, and what the recipe posts lands in their Inbox.

    ``next_run_at``: the first tick after ``last_tick`` (or after its creation), null while
    paused (the due query's column). ``last_tick``: the latest tick decided (fired, or
    skipped under ``skip``): the cursor the firing moves forward only."""

    id: str
    tenant_id: str
    project_id: str
    user_id: str
    name: str
    cron: str
    timezone: str = "UTC"
    recipe: str
    goal: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    missed: MissedPolicy = MissedPolicy.SKIP
    paused: bool = False
    last_tick: datetime | None = None
    next_run_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class ScheduleRun(Document):
    """One fired tick of a schedule (``tick``, UTC) and what became of it."""

    id: str
    tenant_id: str
    schedule_id: str
    user_id: str
    tick: datetime
    status: RunStatus = RunStatus.CLAIMED
    session_id: str
    process_id: str
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None

    def marked(self, status: RunStatus, at: datetime) -> ScheduleRun:
        """The run moved to ``status`` at ``at`` (``ScheduleStore.mark_run``'s change)."""
        update: dict[str, Any] = {"status": status}
        if status is RunStatus.STARTED:
            update["started_at"] = at
        elif status is not RunStatus.CLAIMED:
            update["finished_at"] = at
        return self.model_copy(update=update)


def run_ids(tenant_id: str, schedule_id: str, tick: datetime) -> tuple[str, str, str]:
    """The (run, session, process) ids of a schedule's tick: one digest of the three, with
    an ``s`` first — not a hex digit, so no random id (``new_id``) is ever one of them and a
    process id tells by itself whether a schedule started it (``run_of``)."""
    digest = "s" + hashlib.sha256(
        f"{tenant_id}\0{schedule_id}\0{int(tick.timestamp() * 1000)}".encode()).hexdigest()[:19]
    return f"run_{digest}", f"ses_{digest}", f"proc_{digest}"


def run_of(process_id: str) -> str | None:
    """The id of the run that started ``process_id``, or None when no schedule did."""
    head, _, digest = process_id.partition("_")
    return f"run_{digest}" if head == "proc" and digest.startswith("s") else None
