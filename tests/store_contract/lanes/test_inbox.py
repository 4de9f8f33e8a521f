"""The inbox: per-process seq, idempotent appends, pending order, the sweeper's query."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import (
    CloseReason,
    ExternalCommand,
    InboxAnswer,
    InboxMessage,
    ProcessEvent,
    ProcessStatus,
    SteerMessage,
    ToolResult,
    UserChatInput,
    utcnow,
)
from vancetope_brain.models.inbox import AnswerPayload, Outcome
from vancetope_brain.models.steer import ProcessEventType, ToolCallStatus
from vancetope_brain.store import LaneStore, SessionStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import World

S = ProcessStatus
VARIANTS: list[SteerMessage] = [
    UserChatInput(from_user="usr_1", content="hi"),
    ProcessEvent(source_process_id="proc_x", type=ProcessEventType.DONE, human_summary="ok", payload={"n": 1}),
    ToolResult(tool_call_id="call_1", tool_name="search", status=ToolCallStatus.SUCCESS, result=[1, "a"]),
    ExternalCommand(command="stop", params={"why": "user"}),
    InboxAnswer(inbox_item_id="item_1", item_type="APPROVAL", answer=AnswerPayload(
        outcome=Outcome.DECIDED, value={"approved": True}, answered_by="user_1")),
]


def test_seq_is_strictly_increasing_per_process(sessions: SessionStore, world: World) -> None:
    a, b = world.process("ten_1"), world.process("ten_1")
    seqs_a = [world.append("ten_1", a.id, f"a{i}").seq for i in range(5)]
    seqs_b = [world.append("ten_1", b.id, f"b{i}").seq for i in range(2)]
    assert seqs_a == [1, 2, 3, 4, 5]
    assert seqs_b == [1, 2]
    assert sessions.get_process("ten_1", a.id).next_seq == 5


def test_pending_messages_are_in_seq_order_with_limit(lanes: LaneStore, world: World) -> None:
    process = world.process("ten_1")
    appended = [world.append("ten_1", process.id, f"m{i}") for i in range(4)]
    assert lanes.pending_messages("ten_1", process.id) == appended
    assert lanes.pending_messages("ten_1", process.id, limit=2) == appended[:2]
    assert lanes.pending_messages("ten_1", process.id, limit=0) == []
    assert lanes.pending_messages("ten_1", "proc_other") == []


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.kind)
def test_every_steer_variant_round_trips(
    lanes: LaneStore, world: World, variant: SteerMessage
) -> None:
    process = world.process("ten_1")
    message = InboxMessage(id="msg_1", tenant_id="ten_1", target_process_id=process.id,
                           sender_process_id="proc_x", message=variant)
    stored, created = lanes.append_message(message)
    assert created and stored == message.model_copy(update={"seq": 1})
    assert lanes.pending_messages("ten_1", process.id) == [stored]


def test_repeated_idempotency_key_stores_nothing(lanes: LaneStore, world: World) -> None:
    process = world.process("ten_1")
    first = world.append("ten_1", process.id, "one", key="k1")
    again, created = lanes.append_message(world.message("ten_1", process.id, "two", key="k1"))
    assert not created
    assert again == first
    assert lanes.pending_messages("ten_1", process.id) == [first]
    assert world.append("ten_1", process.id, "three", key="k2").seq > first.seq


def test_idempotency_key_is_per_target(world: World) -> None:
    a, b = world.process("ten_1"), world.process("ten_1")
    world.append("ten_1", a.id, key="same")
    assert world.append("ten_1", b.id, key="same").seq == 1


def test_repeated_key_returns_the_first_even_after_it_was_drained(
    lanes: LaneStore, world: World
) -> None:
    process = world.process("ten_1")
    first = world.append("ten_1", process.id, key="k1")
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    assert None is not lanes.commit_turn("ten_1", process.id, epoch,
                             world.turn(process, epoch, drained=[first.id]))
    again, created = lanes.append_message(world.message("ten_1", process.id, key="k1"))
    assert not created and again.id == first.id and again.drained_epoch == epoch
    assert lanes.pending_messages("ten_1", process.id) == []


def test_duplicate_message_id_conflicts(lanes: LaneStore, world: World) -> None:
    process = world.process("ten_1")
    first = world.append("ten_1", process.id)
    with pytest.raises(Conflict):
        lanes.append_message(first)


def test_append_to_a_missing_process_is_not_found(lanes: LaneStore, world: World) -> None:
    with pytest.raises(NotFound):
        lanes.append_message(world.message("ten_1", "proc_missing"))


def _old_pending(world: World, status: ProcessStatus, age: timedelta) -> str:
    process = world.process("ten_1")
    if status is not S.INIT:
        world.set_status(process, status)
    world.append("ten_1", process.id, created_at=utcnow() - age)
    return process.id


def test_stale_pending_finds_only_wakeable_processes(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    old = timedelta(minutes=10)
    wakeable = {s: _old_pending(world, s, old) for s in (S.INIT, S.IDLE, S.BLOCKED, S.RUNNING)}
    for s in (S.PAUSED, S.SUSPENDED, S.CLOSED):
        _old_pending(world, s, old)
    _old_pending(world, S.IDLE, timedelta(seconds=0))  # too recent
    found = lanes.stale_pending(utcnow() - timedelta(minutes=1))
    assert sorted(found) == sorted(("ten_1", pid) for pid in wakeable.values())


def test_stale_pending_finds_a_failed_process_that_owes_an_answer(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    old = utcnow() - timedelta(minutes=10)
    closed = {}
    for reason in CloseReason:
        process = world.process("ten_1")
        world.set_status(process, S.CLOSED, close_reason=reason)
        world.append("ten_1", process.id, created_at=old)
        closed[reason] = process.id
    assert lanes.stale_pending(utcnow() - timedelta(minutes=1)) == [
        ("ten_1", closed[CloseReason.FAILED])]


def test_stale_pending_is_distinct_ignores_drained_and_honours_limit(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    old = utcnow() - timedelta(minutes=10)
    process = world.process("ten_1")
    for _ in range(3):
        world.append("ten_1", process.id, created_at=old)
    drained = world.process("ten_1")
    message = world.append("ten_1", drained.id, created_at=old)
    epoch = lanes.acquire_epoch("ten_1", drained.id).epoch
    assert None is not lanes.commit_turn("ten_1", drained.id, epoch,
                             world.turn(drained, epoch, drained=[message.id]))
    bound = utcnow() - timedelta(minutes=1)
    assert lanes.stale_pending(bound) == [("ten_1", process.id)]
    other = world.process("ten_1")
    world.append("ten_1", other.id, created_at=old)
    assert len(lanes.stale_pending(bound, limit=1)) == 1
    assert len(lanes.stale_pending(bound)) == 2


def test_stale_pending_names_the_tenant(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = world.process("ten_a")
    world.append("ten_a", process.id, created_at=utcnow() - timedelta(hours=1))
    assert lanes.stale_pending(utcnow()) == [("ten_a", process.id)]
