"""Schedules in the embedded shape (``vancetope serve``: a Celery worker on threads, no Redis
server): the worker's sweep fires a seconds-cron schedule (allowed by a test's minimum
interval) through the real path, each run's vogon-cron posts its synthesis to the owner's
Inbox and its outcome is recorded; ``fire`` with an explicit ``now`` shows the missed-tick
policies, one claim per tick among racing firers, and a claimed run whose firer died
started once; bad input is refused with stable codes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.conftest import Embedded
from tests.engines.test_arthur import respond
from tests.helpers import wait_for
from tests.webhooks.receiver import receiving
from vancetope_brain.errors import InvalidInput, InvalidSchedule, LimitExceeded, NotFound
from vancetope_brain.identity import Principal
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import SessionStatus, SessionType, utcnow
from vancetope_brain.models.inbox import InboxQuery, ItemType
from vancetope_brain.models.schedule import MissedPolicy, RunStatus, ScheduleRun, run_ids
from vancetope_brain.models.webhooks import WebhookEvent
from vancetope_brain.services.schedules import START_GRACE
from vancetope_brain.store import (
    IdentityStore,
    ScheduleStore,
    SessionStore,
    UserInboxStore,
    WebhookStore,
)
from vancetope_brain.webhooks import WebhookService

ONE_PHASE = {"strategy": {"name": "one", "phases": [{"name": "a", "recipe": "ford",
                                                     "goal": "brief {{ input }}"}]}}
YEARLY = "0 3 1 1 *"


def _worker(messages, tools):
    goal = next(m.content for m in messages if m.role == "user").splitlines()[0]
    return respond(f"out({goal})")


@pytest.fixture(scope="module")
def emb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Embedded]:
    e = Embedded(tmp_path_factory.mktemp("schedules"), VANCETOPE_SCHEDULE_MIN_INTERVAL="1",
                 VANCETOPE_SWEEP_INTERVAL="0.2",
                 VANCETOPE_WEBHOOK_ALLOW_PRIVATE="true")
    e.model = FunctionModel(_worker)
    yield e
    e.stop()


def _runs(emb: Embedded, schedule_id: str) -> list[ScheduleRun]:
    return emb.brain.store.port(ScheduleStore).list_runs("acme", schedule_id, limit=1000)


def _outputs(emb: Embedded, process_id: str) -> list[str]:
    return [i.title for i in emb.brain.store.port(UserInboxStore).list_inbox_items(
        "acme", InboxQuery(origin_process_id=process_id)) if i.type is ItemType.OUTPUT_TEXT]


def test_the_sweep_runs_a_schedule_each_tick_into_the_owners_inbox(emb: Embedded) -> None:
    schedules = emb.brain.schedules
    schedule = schedules.create(emb.who, name="brief", cron="* * * * * */1",
                                recipe="vogon-cron", goal="the launch", params=ONE_PHASE)
    wait_for(lambda: len(_runs(emb, schedule.id)) >= 3, timeout=30, what="three runs")
    schedules.pause(emb.who, schedule.id)
    runs = _runs(emb, schedule.id)
    wait_for(lambda: all(r.status is RunStatus.DONE for r in _runs(emb, schedule.id)),
             timeout=30, what="every run done")
    assert len({r.tick for r in runs}) == len(runs) >= 3
    sessions = emb.brain.store.port(SessionStore)
    # A run is marked DONE, then its session closed (ScheduleService.run_ended).
    wait_for(lambda: all(sessions.get_session("acme", r.session_id).status is
                         SessionStatus.CLOSED for r in runs), timeout=30,
             what="every run's session closed")
    for run in runs:
        session = sessions.get_session("acme", run.session_id)
        assert (session.user_id, session.type, session.status) == (
            "ada", SessionType.AUTONOMOUS, SessionStatus.CLOSED)
        (process,) = [p for p in sessions.list_processes("acme", run.session_id)
                      if p.parent_process_id is None]
        assert (process.id, process.user_id, process.recipe["name"]) == (
            run.process_id, "ada", "vogon-cron")
        assert _outputs(emb, run.process_id) == ["one: completed"]
    shown = schedules.get(emb.who, schedule.id)
    assert shown.paused and schedules.next_runs(shown) == []
    assert len(_runs(emb, schedule.id)) == len(runs)  # paused: no run since


def _yearly(emb: Embedded, missed: MissedPolicy):
    schedule = emb.brain.schedules.create(emb.who, name=f"yearly {missed}", cron=YEARLY,
                                          recipe="vogon-cron", params=ONE_PHASE, missed=missed)
    assert schedule.next_run_at is not None
    return schedule, schedule.next_run_at


def test_a_missed_tick_is_skipped_under_skip(emb: Embedded) -> None:
    schedule, first = _yearly(emb, MissedPolicy.SKIP)
    assert emb.brain.schedules.fire(first + timedelta(minutes=5)) == 0
    assert _runs(emb, schedule.id) == []
    stored = emb.brain.schedules.get(emb.who, schedule.id)
    assert stored.last_tick == first and stored.next_run_at is not None \
        and stored.next_run_at > first
    # On time (within ON_TIME of it), the next tick fires.
    assert emb.brain.schedules.fire(stored.next_run_at + timedelta(seconds=2)) >= 1
    assert [r.tick for r in _runs(emb, schedule.id)] == [stored.next_run_at]


def test_missed_ticks_run_once_under_run_once(emb: Embedded) -> None:
    schedule, first = _yearly(emb, MissedPolicy.RUN_ONCE)
    three_years_on = first.replace(year=first.year + 3) + timedelta(minutes=5)
    assert emb.brain.schedules.fire(three_years_on) >= 1
    assert [r.tick for r in _runs(emb, schedule.id)] == [first.replace(year=first.year + 3)]
    emb.brain.schedules.fire(three_years_on + timedelta(minutes=1))
    assert len(_runs(emb, schedule.id)) == 1


def test_racing_firers_claim_a_tick_once(emb: Embedded) -> None:
    schedule, first = _yearly(emb, MissedPolicy.SKIP)
    at = first + timedelta(seconds=1)
    barrier = threading.Barrier(8)
    started: list[int] = []

    def fire() -> None:
        barrier.wait()
        started.append(emb.brain.schedules.fire(at))

    threads = [threading.Thread(target=fire) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(started) == 1  # one firer won the claim; the others started nothing
    (run,) = _runs(emb, schedule.id)
    assert run.tick == first
    assert [p.id for p in emb.brain.store.port(SessionStore).list_processes(
        "acme", run.session_id) if p.parent_process_id is None] == [run.process_id]


def test_a_run_claimed_by_a_firer_that_died_is_started_once(emb: Embedded) -> None:
    schedule, first = _yearly(emb, MissedPolicy.SKIP)
    run_id, session_id, process_id = run_ids("acme", schedule.id, first)
    claimed = ScheduleRun(id=run_id, tenant_id="acme", schedule_id=schedule.id, user_id="ada",
                          tick=first, session_id=session_id, process_id=process_id,
                          created_at=utcnow() - timedelta(seconds=START_GRACE + 1))
    store = emb.brain.store.port(ScheduleStore)
    assert store.claim_run(claimed)  # the firer died here, before starting it
    emb.brain.schedules.fire()
    wait_for(lambda: _runs(emb, schedule.id)[0].status is RunStatus.DONE, timeout=30)
    emb.brain.schedules.fire()
    (run,) = _runs(emb, schedule.id)
    assert run.id == run_id
    assert [p.id for p in emb.brain.store.port(SessionStore).list_processes(
        "acme", session_id) if p.parent_process_id is None] == [process_id]
    assert _outputs(emb, process_id) == ["one: completed"]


def test_bad_input_is_refused_with_stable_codes(emb: Embedded) -> None:
    create = emb.brain.schedules.create
    cases = [({"cron": "every minute"}, InvalidSchedule, "no cron expression"),
             ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, InvalidSchedule,
              "unknown time zone 'Mars/Olympus'"),
             ({"cron": "* * * * * */1", "recipe": "nope"}, NotFound, "nope"),
             ({"cron": "* * * * *", "recipe": "arthur"}, InvalidInput, "worker recipe")]
    for fields, error, text in cases:
        with pytest.raises(error, match=text) as caught:
            create(emb.who, **{"name": "x", "recipe": "vogon-cron", **fields})
        assert caught.value.code == error.code
    assert InvalidSchedule.code == "invalid_schedule"
    emb.brain.schedules.min_interval = 120
    try:
        with pytest.raises(InvalidSchedule, match="60 s apart; schedules tick 120 s apart"):
            create(emb.who, name="x", cron="* * * * *", recipe="vogon-cron")
        with pytest.raises(InvalidSchedule, match="field of seconds"):
            create(emb.who, name="x", cron="* * * * * */5", recipe="vogon-cron")
    finally:
        emb.brain.schedules.min_interval = 1
    cap = emb.brain.schedules.max_per_project
    emb.brain.schedules.max_per_project = len(emb.brain.schedules.of_user(emb.who))
    try:
        with pytest.raises(LimitExceeded, match="delete one first"):
            create(emb.who, name="x", cron=YEARLY, recipe="vogon-cron")
    finally:
        emb.brain.schedules.max_per_project = cap


def test_another_user_can_neither_see_nor_touch_a_schedule(emb: Embedded) -> None:
    schedule, _ = _yearly(emb, MissedPolicy.SKIP)
    emb.brain.identity.create_user("acme", "bob", "bob")
    bob = Principal("acme", "bob")
    assert emb.brain.schedules.of_user(bob) == []
    for act in (emb.brain.schedules.get, emb.brain.schedules.pause,
                emb.brain.schedules.resume, emb.brain.schedules.delete):
        with pytest.raises(NotFound):
            act(bob, schedule.id)
    assert emb.brain.schedules.get(emb.who, schedule.id) == schedule


def test_an_outcome_the_lanes_hook_missed_is_read_when_the_schedule_next_fires(
        emb: Embedded) -> None:
    schedule, first = _yearly(emb, MissedPolicy.SKIP)
    ended: list[tuple[str, RunStatus]] = []
    def tell(run: ScheduleRun, of: object) -> None:
        if run.schedule_id == schedule.id:
            ended.append((run.id, run.status))

    emb.brain.schedules.on_run_ended.append(tell)
    emb.worker_parts.schedules.on_run_ended.append(tell)
    runner = emb.worker_parts.runner
    hook, runner._on_ended = runner._on_ended, None  # the worker dies after the commit
    try:
        emb.brain.schedules.fire(first + timedelta(seconds=1))
        (run,) = _runs(emb, schedule.id)
        wait_for(lambda: emb.brain.store.port(SessionStore).get_process(
            "acme", run.process_id).status.value == "CLOSED", timeout=30)
    finally:
        runner._on_ended = hook
    assert _runs(emb, schedule.id)[0].status is RunStatus.STARTED
    second = emb.brain.schedules.get(emb.who, schedule.id).next_run_at
    assert second is not None
    emb.brain.schedules.fire(second + timedelta(seconds=1))
    assert [r.status for r in _runs(emb, schedule.id)][1] is RunStatus.DONE
    wait_for(lambda: _runs(emb, schedule.id)[0].status is RunStatus.DONE, timeout=30)
    emb.brain.schedules.fire(second + timedelta(seconds=2))  # nothing new to tell
    emb.brain.schedules.on_run_ended.remove(tell)
    emb.worker_parts.schedules.on_run_ended.remove(tell)
    assert sorted(ended) == sorted((r.id, RunStatus.DONE) for r in _runs(emb, schedule.id))


def test_a_finished_run_is_told_to_the_projects_webhooks(emb: Embedded) -> None:
    """``schedule.run.finished``, signed, from the embedded worker's sweep: the run's ids
    and outcome, once."""
    hooks = WebhookService(emb.brain.store.port(WebhookStore),
                           emb.brain.store.port(IdentityStore), allow_private=True)
    schedule, first = _yearly(emb, MissedPolicy.SKIP)
    with receiving() as receiver:
        sub = hooks.create(emb.who, "default", receiver.url,
                           [WebhookEvent.SCHEDULE_RUN_FINISHED])
        try:
            emb.brain.schedules.fire(first + timedelta(seconds=1))
            (post,) = receiver.wait(1, timeout=30)
        finally:
            hooks.delete(emb.who, sub.id)
        (run,) = _runs(emb, schedule.id)
        body = receiver.verified(sub.secret, post)
    assert body["type"] == "schedule.run.finished"
    assert {k: body["data"][k] for k in ("scheduleId", "runId", "outcome", "processId",
                                         "sessionId", "projectId")} == {
        "scheduleId": schedule.id, "runId": run.id, "outcome": "DONE",
        "processId": run.process_id, "sessionId": run.session_id, "projectId": "default"}
    assert len(receiver.posts) == 1
