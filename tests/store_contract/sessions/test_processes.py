"""Processes: insert, read, list."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import ProcessStatus, ThinkProcess, new_id, utcnow
from vancetope_brain.store import LaneStore, SessionStore

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


def test_list_processes_open_only_leaves_out_the_closed(
    sessions: SessionStore, world: World
) -> None:
    start = utcnow()
    made = {status: world.process("ten_1", "ses_a", status=status,
                                  created_at=start + timedelta(seconds=i)).id
            for i, status in enumerate((S.RUNNING, S.CLOSED, S.INIT, S.SUSPENDED))}
    world.process("ten_1", "ses_b", status=S.RUNNING)
    assert [p.id for p in sessions.list_processes("ten_1", "ses_a", open_only=True)] == [
        made[S.RUNNING], made[S.INIT], made[S.SUSPENDED]]
    assert len(sessions.list_processes("ten_1", "ses_a")) == 4


def _system_process(world: World, **fields: Any) -> ThinkProcess:
    process = ThinkProcess(id=new_id("proc"), tenant_id="ten_1", session_id="ses_sys",
                           user_id="_system", name="agrajag", engine="echo", engine_version="1",
                           created_at=utcnow() - timedelta(hours=1), **fields)
    world.sessions.create_process(process)
    return process


def test_purge_closed_processes_deletes_the_users_closed_ones_with_what_they_own(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    closed = _system_process(world)
    still_open = _system_process(world)
    users = world.process("ten_1", "ses_a", created_at=utcnow() - timedelta(hours=1))
    world.append("ten_1", closed.id)
    before_closing = utcnow()
    for process in (closed, users):
        world.set_status(process, S.CLOSED, chat=[world.line(process, "verdict")])
    assert sessions.purge_closed_processes("_system", before_closing) == []  # closed after

    gone = sessions.purge_closed_processes("_system", utcnow() + timedelta(seconds=1))
    assert [p.id for p in gone] == [closed.id]
    with pytest.raises(NotFound):
        sessions.get_process("ten_1", closed.id)
    assert lanes.chat_history("ten_1", closed.id) == []
    assert lanes.turn_records("ten_1", closed.id) == []
    assert lanes.pending_messages("ten_1", closed.id) == []
    assert {p.id for p in sessions.list_processes("ten_1", "ses_sys")} == {still_open.id}
    assert sessions.get_process("ten_1", users.id).status is S.CLOSED  # not _system's
    assert len(lanes.chat_history("ten_1", users.id)) == 1
