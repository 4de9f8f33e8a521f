"""Delivery attempts: counted when a turn begins, durable, reset by a commit; dead letters and
the engine failure count are committed with a turn."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vancetope_brain.models import ChatRole, DeadLetter, ProcessStatus
from vancetope_brain.store import LaneStore, SessionStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import Storage, World

S = ProcessStatus


def _attempts(lanes: LaneStore, tenant_id: str, process_id: str) -> dict[str, int]:
    return {m.message.content: m.attempts  # type: ignore[union-attr]
            for m in lanes.pending_messages(tenant_id, process_id)}


def test_acquire_epoch_counts_an_attempt_of_each_listed_pending_message(
    lanes: LaneStore, world: World
) -> None:
    process = world.process("ten_1")
    a, b, _ = (world.append("ten_1", process.id, text) for text in ("a", "b", "c"))
    assert (a.attempts, b.attempts) == (0, 0)
    lanes.acquire_epoch("ten_1", process.id, [a.id, b.id])
    lanes.acquire_epoch("ten_1", process.id, [a.id, a.id])  # a repeated id counts once
    assert _attempts(lanes, "ten_1", process.id) == {"a": 2, "b": 1, "c": 0}


def test_acquire_epoch_counts_no_drained_or_foreign_message(
    lanes: LaneStore, world: World
) -> None:
    process, other = world.process("ten_1"), world.process("ten_1")
    drained = world.append("ten_1", process.id, "drained")
    mine = world.append("ten_1", process.id, "mine")
    theirs = world.append("ten_1", other.id, "theirs")
    world.set_status(process, S.IDLE, drained=[drained.id])
    lanes.acquire_epoch("ten_1", process.id, [drained.id, mine.id, theirs.id, "msg_missing"])
    assert _attempts(lanes, "ten_1", process.id) == {"mine": 1}
    assert _attempts(lanes, "ten_1", other.id) == {"theirs": 0}


def test_turn_attempts_count_turns_begun_since_the_last_commit(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = world.process("ten_1")
    assert [lanes.acquire_epoch("ten_1", process.id).turn_attempts for _ in range(3)] == [0, 1, 2]
    assert sessions.get_process("ten_1", process.id).turn_attempts == 3
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    assert None is not lanes.commit_turn("ten_1", process.id, epoch, world.turn(process, epoch))
    assert sessions.get_process("ten_1", process.id).turn_attempts == 0
    assert lanes.acquire_epoch("ten_1", process.id).turn_attempts == 0


def test_a_fenced_commit_resets_no_count(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = world.process("ten_1")
    message = world.append("ten_1", process.id)
    stale = lanes.acquire_epoch("ten_1", process.id, [message.id]).epoch
    lanes.acquire_epoch("ten_1", process.id, [message.id])  # a takeover
    assert None is lanes.commit_turn("ten_1", process.id, stale,
                                     world.turn(process, stale, drained=[message.id]))
    assert sessions.get_process("ten_1", process.id).turn_attempts == 2
    assert lanes.pending_messages("ten_1", process.id)[0].attempts == 2


def test_attempts_are_durable(storage: Storage, lanes: LaneStore, world: World) -> None:
    process = world.process("ten_1")
    message = world.append("ten_1", process.id)
    lanes.acquire_epoch("ten_1", process.id, [message.id])
    again = storage.open_backend()
    assert again.port(LaneStore).pending_messages("ten_1", process.id)[0].attempts == 1
    assert again.port(SessionStore).get_process("ten_1", process.id).turn_attempts == 1


def test_commit_sets_the_engine_failure_count(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = world.process("ten_1")
    world.set_status(process, S.IDLE, engine_failures=2, last_error="boom")
    stored = sessions.get_process("ten_1", process.id)
    assert (stored.engine_failures, stored.last_error) == (2, "boom")
    world.set_status(process, S.IDLE)
    assert sessions.get_process("ten_1", process.id).engine_failures == 0


def test_commit_dead_letters_a_message_with_its_mark(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = world.process("ten_1")
    poison, later = world.append("ten_1", process.id, "poison"), world.append("ten_1", process.id)
    lanes.acquire_epoch("ten_1", process.id, [poison.id])
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    mark = DeadLetter(reason="its worker died each time", attempts=1)
    notice = world.line(process, "set aside", role=ChatRole.ERROR)
    commit = world.turn(process, epoch, chat=[notice], dead_letters={poison.id: mark})
    written = lanes.commit_turn("ten_1", process.id, epoch, commit)
    assert written is not None and [line.id for line in written.lines] == [notice.id]
    assert [m.id for m in lanes.pending_messages("ten_1", process.id)] == [later.id]
    # Fenced like a drain: the same message cannot be dead-lettered (or drained) twice.
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    assert None is lanes.commit_turn("ten_1", process.id, epoch, world.turn(
        process, epoch, status=S.CLOSED, dead_letters={poison.id: mark}))
    assert None is lanes.commit_turn("ten_1", process.id, epoch, world.turn(
        process, epoch, status=S.CLOSED, drained=[poison.id]))
    assert sessions.get_process("ten_1", process.id).status is S.RUNNING


def test_commit_uncounts_the_messages_it_leaves_pending(
    lanes: LaneStore, world: World
) -> None:
    process = world.process("ten_1")
    read, left = world.append("ten_1", process.id, "read"), world.append("ten_1", process.id, "left")
    lanes.acquire_epoch("ten_1", process.id, [left.id])  # a turn that died with it
    epoch = lanes.acquire_epoch("ten_1", process.id, [read.id, left.id]).epoch
    assert _attempts(lanes, "ten_1", process.id) == {"read": 1, "left": 2}
    commit = world.turn(process, epoch, drained=[read.id], uncounted_ids=[left.id, read.id])
    assert None is not lanes.commit_turn("ten_1", process.id, epoch, commit)
    assert _attempts(lanes, "ten_1", process.id) == {"left": 1}
