"""Processes: insert, read, list."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import ProcessStatus, utcnow
from vancetope_brain.store import SessionStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import World

S = ProcessStatus


def test_new_process_round_trips_in_init_at_epoch_zero(
    sessions: SessionStore, world: World
) -> None:
    process = world.process("ten_1", engine_params={"k": [1, 2]}, goal="find things")
    loaded = sessions.get_process("ten_1", process.id)
    assert loaded == process
    assert (loaded.status, loaded.epoch, loaded.next_seq) == (S.INIT, 0, 0)


def test_duplicate_process_id_conflicts(sessions: SessionStore, world: World) -> None:
    process = world.process("ten_1")
    with pytest.raises(Conflict):
        sessions.create_process(process)


def test_missing_process_is_not_found(sessions: SessionStore) -> None:
    with pytest.raises(NotFound):
        sessions.get_process("ten_1", "proc_missing")


def test_list_processes_is_oldest_first_and_only_the_sessions(
    sessions: SessionStore, world: World
) -> None:
    start = utcnow()
    ids = [world.process("ten_1", "ses_a", created_at=start + timedelta(seconds=i)).id
           for i in (1, 0, 2)]
    world.process("ten_1", "ses_b")
    assert [p.id for p in sessions.list_processes("ten_1", "ses_a")] == [ids[1], ids[0], ids[2]]
    assert sessions.list_processes("ten_1", "ses_c") == []
