"""Processes: insert, read, list, and the fencing epoch."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import ProcessStatus, utcnow
from vancetope_brain.store import Store

if TYPE_CHECKING:
    from .conftest import World

S = ProcessStatus


def test_new_process_round_trips_in_init_at_epoch_zero(store: Store, world: World) -> None:
    process = world.process("ten_1", engine_params={"k": [1, 2]}, goal="find things")
    loaded = store.get_process("ten_1", process.id)
    assert loaded == process
    assert (loaded.status, loaded.epoch, loaded.next_seq) == (S.INIT, 0, 0)


def test_duplicate_process_id_conflicts(store: Store, world: World) -> None:
    process = world.process("ten_1")
    with pytest.raises(Conflict):
        store.create_process(process)


def test_missing_process_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        store.get_process("ten_1", "proc_missing")
    with pytest.raises(NotFound):
        store.acquire_epoch("ten_1", "proc_missing")


def test_list_processes_is_oldest_first_and_only_the_sessions(store: Store, world: World) -> None:
    start = utcnow()
    ids = [world.process("ten_1", "ses_a", created_at=start + timedelta(seconds=i)).id
           for i in (1, 0, 2)]
    world.process("ten_1", "ses_b")
    assert [p.id for p in store.list_processes("ten_1", "ses_a")] == [ids[1], ids[0], ids[2]]
    assert store.list_processes("ten_1", "ses_c") == []


def test_acquire_epoch_increments_and_returns_the_prior_status(store: Store, world: World) -> None:
    process = world.process("ten_1")
    first = store.acquire_epoch("ten_1", process.id)
    assert (first.epoch, first.status) == (1, S.INIT)
    second = store.acquire_epoch("ten_1", process.id)
    assert (second.epoch, second.status) == (2, S.RUNNING)
    stored = store.get_process("ten_1", process.id)
    assert (stored.epoch, stored.status) == (2, S.RUNNING)


@pytest.mark.parametrize(("prior", "after"), [
    (S.IDLE, S.RUNNING), (S.BLOCKED, S.RUNNING),  # a turn starts
    (S.PAUSED, S.PAUSED), (S.SUSPENDED, S.SUSPENDED), (S.CLOSED, S.CLOSED),  # kept
])
def test_acquire_epoch_starts_a_turn_from_idle_and_blocked_only(
    store: Store, world: World, prior: ProcessStatus, after: ProcessStatus
) -> None:
    process = world.process("ten_1")
    world.set_status(process, prior)
    acquired = store.acquire_epoch("ten_1", process.id)
    assert (acquired.epoch, acquired.status) == (2, prior)
    stored = store.get_process("ten_1", process.id)
    assert (stored.epoch, stored.status) == (2, after)


def test_acquire_epoch_keeps_the_rest_of_the_document(store: Store, world: World) -> None:
    process = world.process("ten_1", engine_state={"step": 3})
    acquired = store.acquire_epoch("ten_1", process.id)
    assert acquired.engine_state == {"step": 3}
    assert acquired.model_copy(update={"epoch": 0}) == process
