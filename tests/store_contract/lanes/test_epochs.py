"""acquire_epoch: the fencing epoch, and the status a turn starts from."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import NotFound
from vancetope_brain.models import ProcessStatus
from vancetope_brain.store import LaneStore, SessionStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import World

S = ProcessStatus


def test_acquire_epoch_of_a_missing_process_is_not_found(lanes: LaneStore) -> None:
    with pytest.raises(NotFound):
        lanes.acquire_epoch("ten_1", "proc_missing")


def test_acquire_epoch_increments_and_returns_the_prior_status(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = world.process("ten_1")
    first = lanes.acquire_epoch("ten_1", process.id)
    assert (first.epoch, first.status) == (1, S.INIT)
    second = lanes.acquire_epoch("ten_1", process.id)
    assert (second.epoch, second.status) == (2, S.RUNNING)
    stored = sessions.get_process("ten_1", process.id)
    assert (stored.epoch, stored.status) == (2, S.RUNNING)


@pytest.mark.parametrize(("prior", "after"), [
    (S.IDLE, S.RUNNING), (S.BLOCKED, S.RUNNING),  # a turn starts
    (S.PAUSED, S.PAUSED), (S.SUSPENDED, S.SUSPENDED), (S.CLOSED, S.CLOSED),  # kept
])
def test_acquire_epoch_starts_a_turn_from_idle_and_blocked_only(
    sessions: SessionStore, lanes: LaneStore, world: World, prior: ProcessStatus, after: ProcessStatus
) -> None:
    process = world.process("ten_1")
    world.set_status(process, prior)
    acquired = lanes.acquire_epoch("ten_1", process.id)
    assert (acquired.epoch, acquired.status) == (2, prior)
    stored = sessions.get_process("ten_1", process.id)
    assert (stored.epoch, stored.status) == (2, after)


def test_acquire_epoch_keeps_the_rest_of_the_document(lanes: LaneStore, world: World) -> None:
    process = world.process("ten_1", engine_state={"step": 3})
    acquired = lanes.acquire_epoch("ten_1", process.id)
    assert acquired.engine_state == {"step": 3}
    assert acquired.model_copy(update={"epoch": 0}) == process


def test_unsettled_lists_init_and_running_processes_only(
    lanes: LaneStore, world: World
) -> None:
    fresh = world.process("ten_1")
    running = world.process("ten_2")
    lanes.acquire_epoch("ten_2", running.id)  # a turn that never committed
    for status in (S.IDLE, S.BLOCKED, S.PAUSED, S.SUSPENDED, S.CLOSED):
        world.set_status(world.process("ten_1"), status)
    assert sorted(lanes.unsettled()) == sorted([("ten_1", fresh.id), ("ten_2", running.id)])
    assert len(lanes.unsettled(limit=1)) == 1
