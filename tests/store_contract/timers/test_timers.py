"""Timers: committed with a turn (fenced), due by time, fired once, dropped for CLOSED;
a tenant's timers of one key brought due early."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from vancetope_brain.models import (
    ExternalCommand,
    InboxMessage,
    ProcessStatus,
    ThinkProcess,
    Timer,
    new_id,
    utcnow,
)
from vancetope_brain.store import LaneStore, TimerStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import World


def _timer(process: ThinkProcess, key: str, seconds: float) -> Timer:
    return Timer(id=f"{process.id}:{key}", tenant_id=process.tenant_id, process_id=process.id,
                 key=key, due_at=utcnow() + timedelta(seconds=seconds))


def _message(timer: Timer) -> InboxMessage:
    return InboxMessage(id=new_id("msg"), tenant_id=timer.tenant_id,
                        target_process_id=timer.process_id,
                        idempotency_key=f"timer:{timer.id}:{timer.due_at.timestamp()}",
                        message=ExternalCommand(command="timer", params={"key": timer.key}))


def _arm(lanes: LaneStore, world: World, process: ThinkProcess, *timers: Timer,
         epoch: int | None = None) -> bool:
    epoch = epoch if epoch is not None else lanes.acquire_epoch(process.tenant_id,
                                                                process.id).epoch
    return lanes.commit_turn(process.tenant_id, process.id, epoch,
                             world.turn(process, epoch, timers=list(timers))) is not None


def test_a_committed_timer_is_due_once_its_time_has_come(lanes: LaneStore, timers: TimerStore, world: World) -> None:
    process = world.process("ten_1")
    soon, later = _timer(process, "a", 10), _timer(process, "b", 20)
    assert _arm(lanes, world, process, later, soon)
    assert timers.due_timers(utcnow()) == []
    assert timers.due_timers(utcnow() + timedelta(seconds=15)) == [soon]
    assert timers.due_timers(utcnow() + timedelta(seconds=30)) == [soon, later]
    assert timers.due_timers(utcnow() + timedelta(seconds=30), limit=1) == [soon]


def test_a_fenced_turn_arms_nothing(lanes: LaneStore, timers: TimerStore, world: World) -> None:
    process = world.process("ten_1")
    stale = lanes.acquire_epoch("ten_1", process.id).epoch
    lanes.acquire_epoch("ten_1", process.id)
    assert not _arm(lanes, world, process, _timer(process, "a", 0), epoch=stale)
    assert timers.due_timers(utcnow() + timedelta(days=1)) == []


def test_arming_a_key_again_replaces_its_due_time(lanes: LaneStore, timers: TimerStore, world: World) -> None:
    process = world.process("ten_1")
    first = _timer(process, "a", 10)
    assert _arm(lanes, world, process, first)
    again = _timer(process, "a", 100)
    assert _arm(lanes, world, process, again)
    assert timers.due_timers(utcnow() + timedelta(seconds=50)) == []
    assert timers.due_timers(utcnow() + timedelta(seconds=200)) == [again]
    # The first arming's fire finds its due time gone and leaves the new one alone.
    assert not timers.fire_timer(first, _message(first))
    assert timers.due_timers(utcnow() + timedelta(seconds=200)) == [again]


def test_firing_appends_the_message_once_and_removes_the_timer(
    lanes: LaneStore, timers: TimerStore, world: World
) -> None:
    process = world.process("ten_1")
    timer = _timer(process, "a", 0)
    assert _arm(lanes, world, process, timer)
    message = _message(timer)
    assert timers.fire_timer(timer, message)
    assert not timers.fire_timer(timer, message)  # a second beat fires it too: no-op
    pending = lanes.pending_messages("ten_1", process.id)
    assert [m.message for m in pending] == [message.message]
    assert timers.due_timers(utcnow() + timedelta(days=1)) == []


def test_a_closed_process_gets_no_timer_message(lanes: LaneStore, timers: TimerStore, world: World) -> None:
    process = world.process("ten_1")
    timer = _timer(process, "a", 0)
    assert _arm(lanes, world, process, timer)
    world.set_status(process, ProcessStatus.CLOSED)
    assert not timers.fire_timer(timer, _message(timer))
    assert lanes.pending_messages("ten_1", process.id) == []
    assert timers.due_timers(utcnow() + timedelta(days=1)) == []


def test_a_timer_fired_without_a_message_is_removed_and_only_reports_it(
    lanes: LaneStore, timers: TimerStore, world: World
) -> None:
    process, closed = world.process("ten_1"), world.process("ten_1")
    timer, gone = _timer(process, "vt.quota", 0), _timer(closed, "vt.quota", 0)
    assert _arm(lanes, world, process, timer) and _arm(lanes, world, closed, gone)
    world.set_status(closed, ProcessStatus.CLOSED)
    assert timers.fire_timer(timer, None)
    assert not timers.fire_timer(timer, None)  # a second beat: already removed
    assert not timers.fire_timer(gone, None)
    assert lanes.pending_messages("ten_1", process.id) == []
    assert timers.due_timers(utcnow() + timedelta(days=1)) == []


def test_bringing_a_tenants_timers_of_one_key_due_leaves_the_others_alone(
    lanes: LaneStore, timers: TimerStore, world: World
) -> None:
    held, other_key = world.process("ten_1"), world.process("ten_1")
    elsewhere = world.process("ten_2")
    late = [_timer(held, "vt.quota", 3600), _timer(other_key, "nudge", 3600),
            _timer(elsewhere, "vt.quota", 3600)]
    for process, timer in zip((held, other_key, elsewhere), late, strict=True):
        assert _arm(lanes, world, process, timer)
    now = utcnow()
    assert timers.bring_timers_due("ten_1", "vt.quota", now, limit=100) == 1
    [due] = timers.due_timers(now)
    assert (due.id, due.key, due.due_at) == (late[0].id, "vt.quota", now)
    assert timers.fire_timer(due, None)  # the moved timer fires at its new due time
    assert timers.bring_timers_due("ten_1", "vt.quota", now, limit=100) == 0
    assert sorted(t.id for t in timers.due_timers(now + timedelta(hours=2))) == \
        sorted(t.id for t in late[1:])
