"""Schedules with real Redis and real Celery worker processes (issue 33 part 1, acceptance):
a schedule ticking every 2 s (a seconds field, allowed by the test's minimum interval;
production ticks a minute apart at least) runs vogon-cron at each tick through the real path
— the workers' sweeps fire it — while two more firing processes race them for every tick:
each tick runs once, each run posts one OUTPUT_TEXT synthesis to the owner's Inbox. And a
worker SIGKILLed inside a run's vogon turn still gives one run of that tick, DONE."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.integration.conftest import REPO, Cluster, stop_process
from vancetope_brain.models import ProcessStatus, SessionType
from vancetope_brain.models.inbox import InboxQuery, ItemType
from vancetope_brain.models.schedule import FINISHED, RunStatus, ScheduleRun
from vancetope_brain.store import ScheduleStore, SessionStore, UserInboxStore

EVERY_2S = "* * * * * */2"  # the sixth field: seconds
ONE_PHASE = {"strategy": {"name": "one", "phases": [{"name": "a", "recipe": "ford",
                                                     "goal": "brief {{ input }}"}]}}
FAST_SCHEDULES = {"VANCETOPE_SCHEDULE_MIN_INTERVAL": "1"}


def _runs(cluster: Cluster, schedule_id: str) -> list[ScheduleRun]:
    return cluster.brain.store.port(ScheduleStore).list_runs("acme", schedule_id, limit=1000)


def _check_each_run_once(cluster: Cluster, runs: list[ScheduleRun]) -> None:
    """Every run: one tick, one AUTONOMOUS session of the owner holding one vogon-cron
    process (and its phase worker, once), one OUTPUT_TEXT synthesis in the owner's Inbox."""
    assert len({run.tick for run in runs}) == len(runs)
    sessions = cluster.brain.store.port(SessionStore)
    items = cluster.brain.store.port(UserInboxStore)
    for run in runs:
        assert run.status is RunStatus.DONE, run
        session = sessions.get_session("acme", run.session_id)
        assert (session.user_id, session.type) == ("ada", SessionType.AUTONOMOUS)
        processes = sessions.list_processes("acme", run.session_id)
        (top,) = [p for p in processes if p.parent_process_id is None]
        assert (top.id, top.recipe["name"], top.status) == (
            run.process_id, "vogon-cron", ProcessStatus.CLOSED)
        assert sorted(p.name for p in processes if p.parent_process_id == top.id) == ["a"]
        posted = items.list_inbox_items("acme", InboxQuery(origin_process_id=top.id))
        assert [(i.type, i.title, i.assigned_to_user_id) for i in posted] == [
            (ItemType.OUTPUT_TEXT, "one: completed", "ada")]


@pytest.mark.slow
def test_a_schedule_runs_once_per_tick_with_several_firing_processes(tmp_path: Path,
                                                                     redis_url: str):
    cluster = Cluster(tmp_path, redis_url, **FAST_SCHEDULES)
    firers: list[subprocess.Popen[bytes]] = []
    logs = [open(tmp_path / f"firer{n}.log", "wb") for n in range(2)]  # noqa: SIM115
    try:
        cluster.start_workers("vogon-flow", "vogon-flow", sweeping=True)
        for log in logs:
            firers.append(subprocess.Popen(
                [sys.executable, "-m", "tests.integration.firer_main"], cwd=REPO,
                env=cluster.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        schedule = cluster.brain.schedules.create(cluster.who, name="brief", cron=EVERY_2S,
                                                  recipe="vogon-cron", goal="the launch",
                                                  params=ONE_PHASE)
        wait_for(lambda: len(_runs(cluster, schedule.id)) >= 3, timeout=60,
                 what="three runs")
        cluster.brain.schedules.pause(cluster.who, schedule.id)
        runs = wait_for(lambda: (r := _runs(cluster, schedule.id)) and all(
            run.status in FINISHED for run in r) and r, timeout=60, what="the runs to end")
        assert len(runs) >= 3
        _check_each_run_once(cluster, runs)
        for n in range(2):
            assert "fire failed" not in (tmp_path / f"firer{n}.log").read_text()
    finally:
        for firer in firers:
            stop_process(firer)
        for log in logs:
            log.close()
        cluster.close()


@pytest.mark.slow
def test_a_worker_killed_inside_a_run_still_gives_one_run(tmp_path: Path, redis_url: str):
    holds = tmp_path / "holds"
    holds.mkdir()
    cluster = Cluster(tmp_path, redis_url, VT_TEST_VOGON_HOLD=str(holds), **FAST_SCHEDULES)
    try:
        (doomed,) = cluster.start_workers("vogon-flow", sweeping=True)
        schedule = cluster.brain.schedules.create(cluster.who, name="brief", cron=EVERY_2S,
                                                  recipe="vogon-cron", goal="the launch",
                                                  params=ONE_PHASE)
        # The first run's vogon turn that takes phase a's report, held before its commit.
        wait_for(lambda: (holds / "h1.held").exists(), timeout=60, what="the held vogon turn")
        (first,) = [r for r in _runs(cluster, schedule.id) if r.status is RunStatus.STARTED
                    and r.tick == min(x.tick for x in _runs(cluster, schedule.id))]
        doomed.signal(signal.SIGKILL)
        doomed.popen.wait(timeout=10)
        (holds / "h1.release").touch()
        cluster.start_workers("vogon-flow", sweeping=True)
        wait_for(lambda: next(r for r in _runs(cluster, schedule.id) if r.id == first.id)
                 .status is RunStatus.DONE, timeout=60, what="the killed run to finish")
        cluster.brain.schedules.pause(cluster.who, schedule.id)
        runs = wait_for(lambda: (r := _runs(cluster, schedule.id)) and all(
            run.status in FINISHED for run in r) and r, timeout=60, what="the runs to end")
        assert [r for r in runs if r.tick == first.tick] == \
            [next(r for r in runs if r.id == first.id)]
        _check_each_run_once(cluster, runs)
    finally:
        cluster.close()
