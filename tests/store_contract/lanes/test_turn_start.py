"""The turn's first read: the process, its outbox's first events and its pending messages,
each as its own read returns it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import NotFound
from vancetope_brain.models import ProcessStatus, ThinkProcess, TurnEvent
from vancetope_brain.store import EventOutboxStore, LaneStore, SessionStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import World

STATUS = TurnEvent("status-changed", {"from": "RUNNING", "to": "IDLE"})


def _busy(lanes: LaneStore, world: World, tenant_id: str) -> ThinkProcess:
    """A process whose committed turns left 2 × 3 events unpublished, with a drained message,
    3 pending ones (attempts counted on two), a pending control call and a state."""
    session = world.session(tenant_id)
    process = world.process(tenant_id, session.id)
    for turn in range(2):
        epoch = lanes.acquire_epoch(tenant_id, process.id).epoch
        drained = world.append(tenant_id, process.id, f"drained {turn}")
        assert None is not lanes.commit_turn(tenant_id, process.id, epoch, world.turn(
            process, epoch, drained=[drained.id], events=[STATUS],
            engine_state={"turn": turn}, chat=[world.line(process, f"one {turn}"),
                                               world.line(process, f"two {turn}")]))
    pending = [world.append(tenant_id, process.id, f"m{i}") for i in range(3)]
    lanes.acquire_epoch(tenant_id, process.id, [m.id for m in pending[:2]])
    lanes.request_control(tenant_id, process.id, "pause", frozenset(ProcessStatus))
    return process


@pytest.mark.parametrize(("messages", "events"), [(1000, 500), (2, 4), (0, 0)])
def test_turn_start_reads_what_the_separate_reads_do(
    lanes: LaneStore, sessions: SessionStore, event_outbox: EventOutboxStore, world: World,
    messages: int, events: int,
) -> None:
    process = _busy(lanes, world, "ten_1")
    other = _busy(lanes, world, "ten_1")  # another lane's rows stay out
    start = lanes.turn_start("ten_1", process.id, messages=messages, events=events)
    assert start.process == sessions.get_process("ten_1", process.id)
    assert start.process.pending_control == "pause" and start.process.epoch == 3
    assert start.events == event_outbox.pending_events("ten_1", process.id, limit=events)
    assert start.pending == lanes.pending_messages("ten_1", process.id, limit=messages)
    assert len(start.events) == min(events, 6) and len(start.pending) == min(messages, 3)
    assert [m.attempts for m in start.pending] == [1, 1, 0][:messages]
    assert other.id not in {e.process_id for e in start.events} | {
        m.target_process_id for m in start.pending}


def test_turn_start_of_a_quiet_process_reads_it_alone(
    lanes: LaneStore, sessions: SessionStore, world: World
) -> None:
    process = world.process("ten_1")
    start = lanes.turn_start("ten_1", process.id, messages=1000, events=500)
    assert (start.process, start.events, start.pending) == (
        sessions.get_process("ten_1", process.id), [], [])


def test_turn_start_of_a_missing_or_foreign_process_raises(
    lanes: LaneStore, world: World
) -> None:
    process = _busy(lanes, world, "ten_1")
    with pytest.raises(NotFound):
        lanes.turn_start("ten_2", process.id, messages=1000, events=500)
    with pytest.raises(NotFound):
        lanes.turn_start("ten_1", "proc_missing", messages=1000, events=500)
