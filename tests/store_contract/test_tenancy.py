"""A foreign tenant's record is indistinguishable from a missing one, for every read and write."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import NotFound
from vancetope_brain.models import ChatRole
from vancetope_brain.store import IdentityStore, LaneStore, SessionStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import World


@pytest.fixture
def owned(lanes: LaneStore, world: World) -> dict[str, str]:
    """Records of tenant ``ten_a`` with a message, a chat line and a turn record each."""
    user = world.user("ten_a")
    session = world.session("ten_a", user)
    process = world.process("ten_a", session.id)
    message = world.append("ten_a", process.id)
    epoch = lanes.acquire_epoch("ten_a", process.id).epoch
    line = world.line(process, "hi", role=ChatRole.USER, source=message.id)
    assert None is not lanes.commit_turn("ten_a", process.id, epoch, world.turn(process, epoch, chat=[line]))
    world.append("ten_a", process.id, "still pending")
    return {"user": user, "session": session.id, "process": process.id}


def test_foreign_reads_raise_not_found(
    identity: IdentityStore, sessions: SessionStore, owned: dict[str, str]
) -> None:
    with pytest.raises(NotFound):
        identity.get_user("ten_b", owned["user"])
    with pytest.raises(NotFound):
        sessions.get_session("ten_b", owned["session"])
    with pytest.raises(NotFound):
        sessions.get_process("ten_b", owned["process"])


def test_foreign_lists_are_empty(
    sessions: SessionStore, lanes: LaneStore, owned: dict[str, str]
) -> None:
    assert sessions.list_sessions("ten_b", owned["user"], limit=10).sessions == []
    assert sessions.list_processes("ten_b", owned["session"]) == []
    assert lanes.pending_messages("ten_b", owned["process"]) == []
    assert lanes.chat_history("ten_b", owned["process"]) == []
    assert lanes.turn_records("ten_b", owned["process"]) == []


def test_foreign_writes_raise_not_found_and_change_nothing(
    sessions: SessionStore, lanes: LaneStore, world: World, owned: dict[str, str]
) -> None:
    pid = owned["process"]
    process = sessions.get_process("ten_a", pid)
    pending = lanes.pending_messages("ten_a", pid)
    with pytest.raises(NotFound):
        sessions.set_chat_process("ten_b", owned["session"], "proc_x")
    with pytest.raises(NotFound):
        lanes.acquire_epoch("ten_b", pid)
    with pytest.raises(NotFound):
        lanes.append_message(world.message("ten_b", pid))
    foreign = process.model_copy(update={"tenant_id": "ten_b"})
    with pytest.raises(NotFound):
        lanes.commit_turn("ten_b", pid, process.epoch,
                          world.turn(foreign, process.epoch, drained=[pending[0].id]))
    assert sessions.get_process("ten_a", pid) == process
    assert lanes.pending_messages("ten_a", pid) == pending
    assert sessions.get_session("ten_a", owned["session"]).chat_process_id is None
    assert len(lanes.turn_records("ten_a", pid)) == 1
