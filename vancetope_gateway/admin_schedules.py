"""``vancetope admin schedule list|show|pause|resume|delete``: an operator's view of a tenant's
schedules (every user's), their next runs and latest runs, and the means to stop one
(pause, delete) or let it run again (resume). Users manage their own over the protocol
(``schedule-*`` frames); creating one is theirs only (it runs as its owner)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from vancetope_brain.models import utcnow
from vancetope_brain.services.schedules import paused, resumed
from vancetope_gateway.admin_text import note, table, when

if TYPE_CHECKING:
    from vancetope_brain.runtime import Administration

RUNS_SHOWN = 20
"""Runs ``schedule show`` lists, newest first."""


def add_schedule(kinds: argparse._SubParsersAction[argparse.ArgumentParser],
                 quiet: argparse.ArgumentParser) -> None:
    """The ``schedule`` commands of ``vancetope admin``."""
    verbs = kinds.add_parser(
        "schedule", help="the tenant's schedules: list, show (next and latest runs), pause, "
                         "resume, delete").add_subparsers(dest="admin_verb", required=True,
                                                          metavar="VERB")
    p = verbs.add_parser("list", help="every schedule of the tenant, oldest first")
    p.add_argument("--tenant", required=True)
    p.add_argument("--project", help="only this project's")
    p = verbs.add_parser("show", help="a schedule, its next run and its latest runs")
    p.add_argument("--tenant", required=True)
    p.add_argument("schedule_id", metavar="SCHEDULE")
    for verb, summary in (("pause", "no run until resumed"),
                          ("resume", "run again from the next tick after now"),
                          ("delete", "delete it and its runs' records (their sessions stay)")):
        p = verbs.add_parser(verb, parents=[quiet], help=summary)
        p.add_argument("--tenant", required=True)
        p.add_argument("schedule_id", metavar="SCHEDULE")


def schedule_list(admin: Administration, args: argparse.Namespace) -> None:
    admin.identity.require_tenant(args.tenant)
    found = admin.schedules.list_schedules(args.tenant, project_id=args.project)
    table(("SCHEDULE", "PROJECT", "OWNER", "CRON", "TZ", "RECIPE", "NEXT", "LAST"),
          [(s.id, s.project_id, s.user_id, s.cron.replace(" ", "_"), s.timezone, s.recipe,
            "paused" if s.paused or s.next_run_at is None else when(s.next_run_at),
            _last(admin, s.tenant_id, s.id)) for s in found])


def _last(admin: Administration, tenant_id: str, schedule_id: str) -> str:
    runs = admin.schedules.list_runs(tenant_id, schedule_id, 1)
    return f"{runs[0].status.value}@{when(runs[0].tick)}" if runs else "-"


def schedule_show(admin: Administration, args: argparse.Namespace) -> None:
    admin.identity.require_tenant(args.tenant)
    s = admin.schedules.get_schedule(args.tenant, args.schedule_id)
    print(f"{s.id} {s.name!r} of {s.user_id} in {s.project_id}: {s.cron} ({s.timezone}), "
          f"recipe {s.recipe}, missed {s.missed.value}, "
          + ("paused" if s.paused or s.next_run_at is None else f"next {when(s.next_run_at)}"))
    table(("RUN", "TICK", "STATUS", "SESSION", "PROCESS"),
          [(r.id, when(r.tick), r.status.value, r.session_id, r.process_id)
           for r in admin.schedules.list_runs(args.tenant, s.id, RUNS_SHOWN)])


def schedule_pause(admin: Administration, args: argparse.Namespace) -> None:
    admin.identity.require_tenant(args.tenant)
    schedule = admin.schedules.get_schedule(args.tenant, args.schedule_id)
    admin.schedules.put_schedule(paused(schedule, utcnow()))
    note(args, f"paused {schedule.id}")


def schedule_resume(admin: Administration, args: argparse.Namespace) -> None:
    admin.identity.require_tenant(args.tenant)
    schedule = resumed(admin.schedules.get_schedule(args.tenant, args.schedule_id), utcnow())
    admin.schedules.put_schedule(schedule)
    note(args, f"resumed {schedule.id}: next run {when(schedule.next_run_at or utcnow())}")


def schedule_delete(admin: Administration, args: argparse.Namespace) -> None:
    admin.identity.require_tenant(args.tenant)
    schedule = admin.schedules.get_schedule(args.tenant, args.schedule_id)
    admin.schedules.delete_schedule(args.tenant, schedule.id)
    note(args, f"deleted {schedule.id}")
