"""No lost wake-up without the sweeper: a message that arrives while its lane is busy, or
while its process holds messages (PAUSED) as the turn that resumes it begins."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Embedded
from tests.helpers import wait_for
from vancetope_brain import keys
from vancetope_brain.lanes import runner as runner_module
from vancetope_brain.lanes import shard_for
from vancetope_brain.lanes.lease import TAKE_OVER_MARGIN, LeaseKeeper
from vancetope_brain.lanes.runner import TurnOutcome
from vancetope_brain.lanes.sweeper import sweep
from vancetope_brain.lanes.waker import ready_member
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ProcessStatus, ThinkProcess
from vancetope_brain.models.lifecycle import LifecycleCall
from vancetope_brain.store import LaneStore


@pytest.fixture
def without_beat(tmp_path: Path) -> Iterator[Embedded]:
    """The embedded shape whose sweeper never runs within a test."""
    emb = Embedded(tmp_path, VANCETOPE_SWEEP_INTERVAL="3600",
                   VANCETOPE_HOUSEKEEPING_INTERVAL="3600")
    yield emb
    emb.stop()


def test_a_message_sent_during_a_turn_gets_a_turn_of_its_own(without_beat: Embedded) -> None:
    emb = without_beat
    entered, release = threading.Event(), threading.Event()

    def reply(messages, tools):  # type: ignore[no-untyped-def]
        if messages[-1].content == "slow":
            entered.set()
            assert release.wait(20)
        return f"re: {messages[-1].content}"

    emb.model = FunctionModel(reply)
    pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id
    assert pid is not None
    wait_for(lambda: emb.brain.sessions.process(emb.who, pid).status is ProcessStatus.IDLE)
    emb.brain.sessions.steer(emb.who, pid, "slow")
    assert entered.wait(20)
    emb.brain.sessions.steer(emb.who, pid, "quick")
    # Its task met the lease of the running turn and asked the holder to look again.
    wait_for(lambda: emb.brain.redis.exists(keys.recheck(pid)), what="a re-check request")
    release.set()
    wait_for(lambda: any(line.content == "re: quick" for line in
                         emb.brain.store.port(LaneStore).chat_history("acme", pid)),
             timeout=20, what="the reply to the message sent during the turn")
    assert not emb.brain.redis.exists(keys.recheck(pid))


def test_a_message_queued_while_paused_as_the_resume_turn_starts_is_not_stranded(
        without_beat: Embedded, monkeypatch: pytest.MonkeyPatch) -> None:
    emb = without_beat
    emb.model = FunctionModel(lambda messages, tools: f"re: {messages[-1].content}")
    pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id
    assert pid is not None
    wait_for(lambda: emb.brain.sessions.process(emb.who, pid).status is ProcessStatus.IDLE)
    emb.brain.sessions.control(emb.who, pid, LifecycleCall.PAUSE)
    wait_for(lambda: emb.brain.sessions.process(emb.who, pid).status is ProcessStatus.PAUSED)
    lanes = emb.worker_parts.runner._lanes
    acquire = lanes.acquire_epoch

    def steer_first(tenant_id: str, process_id: str, message_ids=()) -> ThinkProcess:
        # After the resume turn read the inbox: queued without a wake, the process is PAUSED.
        monkeypatch.setattr(lanes, "acquire_epoch", acquire)
        emb.brain.sessions.steer(emb.who, pid, "late")
        return acquire(tenant_id, process_id, message_ids)

    monkeypatch.setattr(lanes, "acquire_epoch", steer_first)
    emb.brain.sessions.control(emb.who, pid, LifecycleCall.RESUME)
    wait_for(lambda: any(line.content == "re: late" for line in
                         emb.brain.store.port(LaneStore).chat_history("acme", pid)),
             timeout=20, what="the reply to the message queued while the resume began")


def test_a_lease_whose_holder_died_is_taken_over_when_it_runs_out(without_beat: Embedded) -> None:
    emb = without_beat
    emb.model = FunctionModel(lambda messages, tools: f"re: {messages[-1].content}")
    pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id
    assert pid is not None
    wait_for(lambda: emb.brain.sessions.process(emb.who, pid).status is ProcessStatus.IDLE)
    # A worker that died holding the lane: its lease lives on, and nobody will release it.
    emb.brain.redis.set(keys.lease(pid), "a-dead-worker's-token", px=1500)
    emb.brain.sessions.steer(emb.who, pid, "hello")
    wait_for(lambda: emb.brain.redis.exists(keys.wake_later(pid)), what="a delayed turn")
    wait_for(lambda: any(line.content == "re: hello" for line in
                         emb.brain.store.port(LaneStore).chat_history("acme", pid)),
             timeout=20, what="the reply once the dead holder's lease ran out")


@pytest.mark.parametrize("leased", [False, True], ids=["lost-task", "dead-holder"])
def test_the_sweeper_finds_work_whose_task_sits_with_a_dead_worker(
        without_beat: Embedded, leased: bool) -> None:
    emb = without_beat
    emb.model = FunctionModel(lambda messages, tools: f"re: {messages[-1].content}")
    pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id
    assert pid is not None
    wait_for(lambda: emb.brain.sessions.process(emb.who, pid).status is ProcessStatus.IDLE)
    emb.worker.join()  # no shard task runs on that could take the process in passing
    # A shard task queued with a worker that then died: its flag holds every wake back (of
    # the process-wide fakeredis, which later tests share: taken away at the end).
    flag = keys.shard_queued(shard_for(pid, emb.brain.config.lane_shards))
    emb.brain.redis.set(flag, 1, px=60_000)
    if leased:  # ... and that worker held the lane when it died
        emb.brain.redis.set(keys.lease(pid), "a-dead-worker's-token", px=1500)
    emb.brain.sessions.steer(emb.who, pid, "hello")
    sweep_age = emb.worker_parts.config.sweep_age
    wait_for(lambda: emb.worker_parts.sweep() > 0, timeout=sweep_age + 5,
             what="a sweep that wakes the lane")
    wait_for(lambda: any(line.content == "re: hello" for line in
                         emb.brain.store.port(LaneStore).chat_history("acme", pid)),
             timeout=20, what="the reply")
    emb.brain.redis.delete(flag)


def test_the_sweeper_leaves_a_running_turn_alone_until_its_lease_nears_its_end(
        without_beat: Embedded) -> None:
    """A lease that outlives the next sweep is a live holder's as far as a sweep can tell:
    no delayed turn for it (one per running turn per sweep, for nothing). Once a lease
    runs out before the next sweep, its holder may be dead: a turn is due for then."""
    emb = without_beat
    emb.model = FunctionModel(lambda messages, tools: f"re: {messages[-1].content}")
    pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id
    assert pid is not None
    wait_for(lambda: emb.brain.sessions.process(emb.who, pid).status is ProcessStatus.IDLE)
    emb.worker.join()
    lanes, client, waker = emb.brain.store.port(LaneStore), emb.brain.redis, emb.brain.waker
    # A shard task counted as queued: the steer wakes no task, only the sweep acts.
    flag = keys.shard_queued(shard_for(pid, emb.brain.config.lane_shards))
    client.set(flag, 1, px=60_000)
    try:
        emb.brain.sessions.steer(emb.who, pid, "hello")
        client.set(keys.lease(pid), "a-running-turn's-token", px=60_000)
        assert sweep(lanes, client, waker, age=0, interval=1.0) == 0
        assert not client.exists(keys.wake_later(pid))
        client.set(keys.lease(pid), "a-running-turn's-token", px=500)
        assert sweep(lanes, client, waker, age=0, interval=1.0) == 1
        assert client.exists(keys.wake_later(pid))
    finally:
        client.delete(keys.lease(pid), keys.wake_later(pid), flag)


def test_workers_schedule_the_sweeper_themselves(tmp_path: Path) -> None:
    """No beat plays the sweep: the worker's ``SweepSchedule`` does, once per interval."""
    emb = Embedded(tmp_path, VANCETOPE_HOUSEKEEPING_INTERVAL="3600")
    try:
        emb.model = FunctionModel(lambda messages, tools: f"re: {messages[-1].content}")
        pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id
        assert pid is not None
        wait_for(lambda: emb.brain.sessions.process(emb.who, pid).status is ProcessStatus.IDLE)
        emb.worker.join()  # no shard task runs on that could take the process in passing
        # Its shard's queued task sits with a dead worker.
        flag = keys.shard_queued(shard_for(pid, emb.brain.config.lane_shards))
        emb.brain.redis.set(flag, 1, px=60_000)
        emb.brain.sessions.steer(emb.who, pid, "hello")
        wait_for(lambda: any(line.content == "re: hello" for line in
                             emb.brain.store.port(LaneStore).chat_history("acme", pid)),
                 timeout=20, what="the reply, found by a sweep")
        assert emb.brain.redis.exists(keys.SWEEP_SLOT)
        emb.brain.redis.delete(flag)
    finally:
        emb.stop()


def test_a_shard_task_that_finds_the_lease_held_asks_its_holder_to_look_again(
        without_beat: Embedded) -> None:
    """The shard task takes a ready process and its lease in one script; a lease another
    worker holds leaves that worker a re-check request and this lane a turn due once the
    lease would run out (a holder that died or froze never looks again)."""
    emb = without_beat
    emb.model = FunctionModel(lambda messages, tools: "hello")
    pid = emb.brain.sessions.create_interactive(emb.who).chat_process_id
    assert pid is not None
    # The start turn, its lease given back too: IDLE is committed before the release.
    emb.worker.join()
    assert emb.brain.sessions.process(emb.who, pid).status is ProcessStatus.IDLE
    holder = LeaseKeeper(emb.brain.redis, ttl=5)
    lease = holder.try_acquire(pid)
    assert lease is not None
    shard = shard_for(pid, emb.brain.config.lane_shards)
    emb.brain.redis.zadd(keys.ready(shard), {ready_member("acme", pid): 0})
    assert emb.worker_parts.runner.drain(shard) == [TurnOutcome.BUSY]
    assert 4_000 < emb.brain.redis.pttl(keys.wake_later(pid)) <= 5_000 + 1000 * TAKE_OVER_MARGIN
    assert holder.release(lease) is True  # the request, read as the holder lets go


def test_a_shard_task_runs_rounds_and_a_lane_woken_meanwhile_waits_for_the_round(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three ready lanes of one shard, the first steered again during its turn: the task
    runs one turn of each, oldest wake first, and only then the first lane's second turn —
    in the same task, as no other shard's task waits for a worker (the one the first take
    queued is for what this task may leave)."""
    emb = Embedded(tmp_path, VANCETOPE_LANE_SHARDS="1", VANCETOPE_SWEEP_INTERVAL="3600",
                   VANCETOPE_HOUSEKEEPING_INTERVAL="3600")
    try:
        turns: list[str] = []

        def reply(messages, tools):  # type: ignore[no-untyped-def]
            turns.append(messages[-1].content)
            if messages[-1].content == "a1":
                emb.brain.sessions.steer(emb.who, pids[0], "a2")  # woken during the round
            return "ok"

        emb.model = FunctionModel(reply)
        pids = [emb.brain.sessions.create_interactive(emb.who).chat_process_id
                for _ in range(3)]
        for pid in pids:
            assert pid is not None
            wait_for(lambda pid=pid: emb.brain.sessions.process(emb.who, pid).status
                     is ProcessStatus.IDLE)
        emb.worker.join()
        # From here on tasks are recorded, not run: this test runs the shard's tasks itself.
        queued: list[tuple[object, ...]] = []
        monkeypatch.setattr(emb.worker_parts.waker, "_enqueue", lambda *task: queued.append(task))
        monkeypatch.setattr(runner_module, "TASK_SECONDS", 60.0)  # a slow machine: no cut
        emb.brain.redis.set(keys.shard_queued(0), 1, px=60_000)  # the gateway's wakes coalesce
        for pid, text in zip(pids, ("a1", "b1", "c1"), strict=True):
            emb.brain.sessions.steer(emb.who, pid, text)
        turns.clear()
        runner = emb.worker_parts.runner
        assert runner.drain(0) == [TurnOutcome.COMMITTED] * 4
        assert turns == ["a1", "b1", "c1", "a2"]
        assert emb.brain.redis.zrange(keys.ready(0), 0, -1) == []
        assert queued == [(0,)] and emb.brain.redis.exists(keys.shard_queued(0))
    finally:
        emb.stop()
