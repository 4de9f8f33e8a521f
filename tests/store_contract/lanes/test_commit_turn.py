"""commit_turn: all-or-nothing, fenced by epoch, drained once, chat numbered and deduplicated."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from vancetope_brain.errors import NotFound
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus, ThinkProcess
from vancetope_brain.store import LaneStore, SessionStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import World

S = ProcessStatus


def _snapshot(sessions: SessionStore, lanes: LaneStore, process: ThinkProcess) -> dict[str, Any]:
    """Everything a commit can change, as seen through the port."""
    stored = sessions.get_process(process.tenant_id, process.id)
    return {
        "process": stored.model_dump(),
        "pending": lanes.pending_messages(process.tenant_id, process.id),
        "chat": lanes.chat_history(process.tenant_id, process.id),
        "turns": lanes.turn_records(process.tenant_id, process.id),
    }


def test_commit_applies_every_effect(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = world.process("ten_1")
    m1, m2, m3 = (world.append("ten_1", process.id, f"m{i}") for i in range(3))
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    chat = [world.line(process, "m0", role=ChatRole.USER, source=m1.id),
            world.line(process, "answer", source=m1.id)]
    commit = world.turn(process, epoch, status=S.BLOCKED, drained=[m1.id, m2.id], chat=chat,
                        engine_state={"step": 1}, last_error="soft", close_reason=None)
    assert None is not lanes.commit_turn("ten_1", process.id, epoch, commit)
    assert lanes.pending_messages("ten_1", process.id) == [m3]
    stored = sessions.get_process("ten_1", process.id)
    assert (stored.status, stored.epoch, stored.engine_state, stored.last_error) == (
        S.BLOCKED, epoch, {"step": 1}, "soft")
    assert stored.updated_at >= process.updated_at
    lines = lanes.chat_history("ten_1", process.id)
    assert [(c.seq, c.content, c.role) for c in lines] == [
        (1, "m0", ChatRole.USER), (2, "answer", ChatRole.ASSISTANT)]
    assert [c.id for c in lines] == [c.id for c in chat]
    assert lanes.turn_records("ten_1", process.id) == [commit.record]


def test_close_reason_is_set_and_engine_state_kept_when_none(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = world.process("ten_1", engine_state={"keep": True})
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    commit = world.turn(process, epoch, status=S.CLOSED, close_reason=CloseReason.DONE)
    assert None is not lanes.commit_turn("ten_1", process.id, epoch, commit)
    stored = sessions.get_process("ten_1", process.id)
    assert (stored.status, stored.close_reason, stored.engine_state) == (
        S.CLOSED, CloseReason.DONE, {"keep": True})


def test_stale_epoch_is_fenced_and_writes_nothing(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = world.process("ten_1", engine_state={"v": 0})
    message = world.append("ten_1", process.id)
    stale = lanes.acquire_epoch("ten_1", process.id).epoch
    lanes.acquire_epoch("ten_1", process.id)  # a takeover
    before = _snapshot(sessions, lanes, process)
    commit = world.turn(process, stale, status=S.CLOSED, drained=[message.id],
                        chat=[world.line(process, "late", source=message.id)],
                        engine_state={"v": 1}, close_reason=CloseReason.FAILED, last_error="x")
    assert None is lanes.commit_turn("ten_1", process.id, stale, commit)
    assert _snapshot(sessions, lanes, process) == before
    assert before["process"]["status"] == S.RUNNING
    assert before["pending"] == [message]


def test_future_epoch_is_fenced_too(lanes: LaneStore, world: World) -> None:
    process = world.process("ten_1")
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    assert None is lanes.commit_turn("ten_1", process.id, epoch + 1, world.turn(process, epoch + 1))
    assert lanes.turn_records("ten_1", process.id) == []


def test_already_drained_message_fails_the_commit_and_writes_nothing(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = world.process("ten_1")
    m1, m2 = world.append("ten_1", process.id, "a"), world.append("ten_1", process.id, "b")
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    assert None is not lanes.commit_turn("ten_1", process.id, epoch,
                             world.turn(process, epoch, drained=[m1.id]))
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    before = _snapshot(sessions, lanes, process)
    commit = world.turn(process, epoch, status=S.CLOSED, drained=[m2.id, m1.id],
                        chat=[world.line(process, "again", source=m2.id)])
    assert None is lanes.commit_turn("ten_1", process.id, epoch, commit)
    assert _snapshot(sessions, lanes, process) == before
    assert before["pending"] == [m2]


def test_unknown_or_foreign_drained_id_fails_the_commit(lanes: LaneStore, world: World) -> None:
    process, other = world.process("ten_1"), world.process("ten_1")
    elsewhere = world.append("ten_1", other.id)
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    for ids in (["msg_missing"], [elsewhere.id]):
        assert None is lanes.commit_turn("ten_1", process.id, epoch,
                                     world.turn(process, epoch, drained=ids))
    assert lanes.pending_messages("ten_1", other.id) == [elsewhere]
    assert lanes.turn_records("ten_1", process.id) == []


def test_repeated_drained_id_in_one_commit_is_drained_once(lanes: LaneStore, world: World) -> None:
    process = world.process("ten_1")
    message = world.append("ten_1", process.id)
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    commit = world.turn(process, epoch, drained=[message.id, message.id])
    assert None is not lanes.commit_turn("ten_1", process.id, epoch, commit)
    assert lanes.pending_messages("ten_1", process.id) == []


def test_chat_seq_is_consecutive_across_commits(lanes: LaneStore, world: World) -> None:
    process = world.process("ten_1")
    for batch in (["a", "b"], ["c"], [], ["d", "e", "f"]):
        epoch = lanes.acquire_epoch("ten_1", process.id).epoch
        chat = [world.line(process, text) for text in batch]
        assert None is not lanes.commit_turn("ten_1", process.id, epoch, world.turn(process, epoch, chat=chat))
    lines = lanes.chat_history("ten_1", process.id)
    assert [(c.seq, c.content) for c in lines] == list(enumerate("abcdef", start=1))


def test_line_with_existing_source_and_role_is_skipped(lanes: LaneStore, world: World) -> None:
    process = world.process("ten_1")
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    first = [world.line(process, "q", role=ChatRole.USER, source="msg_1")]
    assert None is not lanes.commit_turn("ten_1", process.id, epoch, world.turn(process, epoch, chat=first))
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    second = [world.line(process, "q again", role=ChatRole.USER, source="msg_1"),
              world.line(process, "reply", role=ChatRole.ASSISTANT, source="msg_1"),
              world.line(process, "reply twice", role=ChatRole.ASSISTANT, source="msg_1"),
              world.line(process, "note")]
    written = lanes.commit_turn("ten_1", process.id, epoch, world.turn(process, epoch, chat=second))
    assert written is not None
    assert [(c.seq, c.content) for c in written.lines] == [(2, "reply"), (3, "note")]
    lines = lanes.chat_history("ten_1", process.id)
    assert [(c.seq, c.content) for c in lines] == [(1, "q"), (2, "reply"), (3, "note")]


def test_chat_history_pages_backwards(lanes: LaneStore, world: World) -> None:
    process = world.process("ten_1")
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    chat = [world.line(process, str(i)) for i in range(1, 8)]
    assert None is not lanes.commit_turn("ten_1", process.id, epoch, world.turn(process, epoch, chat=chat))
    assert [c.seq for c in lanes.chat_history("ten_1", process.id, limit=3)] == [5, 6, 7]
    page = lanes.chat_history("ten_1", process.id, before_seq=5, limit=3)
    assert [c.seq for c in page] == [2, 3, 4]
    assert [c.seq for c in lanes.chat_history("ten_1", process.id, before_seq=2)] == [1]
    assert lanes.chat_history("ten_1", process.id, limit=0) == []


def test_turn_records_are_in_epoch_order(lanes: LaneStore, world: World) -> None:
    process = world.process("ten_1")
    records = []
    for _ in range(3):
        epoch = lanes.acquire_epoch("ten_1", process.id).epoch
        commit = world.turn(process, epoch)
        records.append(commit.record)
        assert None is not lanes.commit_turn("ten_1", process.id, epoch, commit)
    assert lanes.turn_records("ten_1", process.id) == records


def test_turn_records_by_lifecycle_and_the_last_ones(lanes: LaneStore, world: World) -> None:
    process = world.process("ten_1")
    records = []
    for lifecycle in ("start", "steer", "suspend", "steer", "suspend", "steer"):
        epoch = lanes.acquire_epoch("ten_1", process.id).epoch
        commit = world.turn(process, epoch)
        commit = replace(commit, record=commit.record.model_copy(update={"lifecycle": lifecycle}))
        records.append(commit.record)
        assert None is not lanes.commit_turn("ten_1", process.id, epoch, commit)
    assert lanes.turn_records("ten_1", process.id, last=2) == records[-2:]
    assert lanes.turn_records("ten_1", process.id, last=10) == records
    assert lanes.turn_records("ten_1", process.id, lifecycle="suspend") == \
        [records[2], records[4]]
    assert lanes.turn_records("ten_1", process.id, lifecycle="suspend", last=1) == [records[4]]
    assert lanes.turn_records("ten_1", process.id, lifecycle="start", last=1) == [records[0]]
    assert lanes.turn_records("ten_1", process.id, lifecycle="reset", last=1) == []
    assert lanes.turn_records("ten_2", process.id, last=1) == []


def test_commit_on_a_missing_process_is_not_found(lanes: LaneStore, world: World) -> None:
    process = world.process("ten_1").model_copy(update={"id": "proc_missing"})
    with pytest.raises(NotFound):
        lanes.commit_turn("ten_1", "proc_missing", 1, world.turn(process, 1))


def test_commit_spawns_children_and_sends_messages_only_when_not_fenced(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    from dataclasses import replace

    from vancetope_brain.models import InboxMessage, UserChatInput, new_id

    parent = world.process("ten_1")
    sibling = world.process("ten_1")
    epoch = lanes.acquire_epoch("ten_1", parent.id).epoch

    def effects(tag: str) -> tuple[ThinkProcess, InboxMessage]:
        child = parent.model_copy(update={"id": new_id("proc"), "parent_process_id": parent.id,
                                          "name": tag, "epoch": 0,
                                          "status": ProcessStatus.INIT})
        note = InboxMessage(id=new_id("msg"), tenant_id="ten_1", target_process_id=sibling.id,
                            sender_process_id=parent.id,
                            message=UserChatInput(from_user="process", content=tag))
        return child, note

    stale_child, stale_note = effects("fenced")
    fenced = replace(world.turn(parent, epoch - 1), spawned=[stale_child], outbox=[stale_note])
    assert lanes.commit_turn("ten_1", parent.id, epoch - 1, fenced) is None
    with pytest.raises(NotFound):
        sessions.get_process("ten_1", stale_child.id)
    assert lanes.pending_messages("ten_1", sibling.id) == []

    child, note = effects("kept")
    commit = replace(world.turn(parent, epoch), spawned=[child], outbox=[note])
    assert lanes.commit_turn("ten_1", parent.id, epoch, commit) is not None
    stored = sessions.get_process("ten_1", child.id)
    assert stored.parent_process_id == parent.id and stored.status is ProcessStatus.INIT
    pending = lanes.pending_messages("ten_1", sibling.id)
    assert [(m.id, m.seq, m.message.content) for m in pending] == [(note.id, 1, "kept")]
