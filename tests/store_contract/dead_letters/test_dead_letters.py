"""Dead letters: listed per tenant and process, oldest first; put back once, with attempts 0."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import (
    CloseReason,
    DeadLetter,
    InboxMessage,
    ProcessStatus,
    ThinkProcess,
    utcnow,
)
from vancetope_brain.store import DeadLetterStore, LaneStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import World


def _dead_letter(lanes: LaneStore, world: World, process: ThinkProcess, text: str,
                 attempts: int = 3, age: float = 0.0) -> InboxMessage:
    """Append ``text``, count ``attempts`` turns that died with it, then dead-letter it."""
    message = world.append(process.tenant_id, process.id, text)
    for _ in range(attempts):
        lanes.acquire_epoch(process.tenant_id, process.id, [message.id])
    epoch = lanes.acquire_epoch(process.tenant_id, process.id).epoch
    mark = DeadLetter(reason="its worker died each time", attempts=attempts,
                      at=utcnow() - timedelta(seconds=age))
    assert None is not lanes.commit_turn(process.tenant_id, process.id, epoch, world.turn(
        process, epoch, dead_letters={message.id: mark}))
    return message


def test_dead_letters_are_listed_with_their_mark_oldest_first(
    lanes: LaneStore, dead_letters: DeadLetterStore, world: World
) -> None:
    one, two = world.process("ten_1"), world.process("ten_1")
    newer = _dead_letter(lanes, world, one, "newer", attempts=3)
    older = _dead_letter(lanes, world, two, "older", attempts=2, age=60)
    world.append("ten_1", one.id, "pending, not dead")
    listed = dead_letters.dead_letters("ten_1")
    assert [m.id for m in listed] == [older.id, newer.id]
    mark = listed[1].dead_letter
    assert mark is not None and (mark.reason, mark.attempts) == ("its worker died each time", 3)
    assert mark.at.tzinfo is not None and listed[1].drained_at is not None
    assert listed[1].attempts == 3 and listed[1].seq == newer.seq
    assert [m.id for m in dead_letters.dead_letters("ten_1", one.id)] == [newer.id]
    assert [m.id for m in dead_letters.dead_letters("ten_1", limit=1)] == [older.id]
    assert dead_letters.dead_letters("ten_2") == []


def test_requeue_puts_a_dead_letter_back_first_in_line_with_no_attempts(
    lanes: LaneStore, dead_letters: DeadLetterStore, world: World
) -> None:
    process = world.process("ten_1")
    poison = _dead_letter(lanes, world, process, "poison")
    later = world.append("ten_1", process.id, "later")
    back = dead_letters.requeue_dead_letter("ten_1", poison.id)
    assert (back.id, back.seq, back.attempts, back.dead_letter, back.drained_at) == (
        poison.id, poison.seq, 0, None, None)
    assert [m.id for m in lanes.pending_messages("ten_1", process.id)] == [poison.id, later.id]
    assert lanes.pending_messages("ten_1", process.id)[0] == back
    assert dead_letters.dead_letters("ten_1") == []
    with pytest.raises(NotFound):  # once only
        dead_letters.requeue_dead_letter("ten_1", poison.id)


def test_requeue_finds_no_plain_or_foreign_message(
    lanes: LaneStore, dead_letters: DeadLetterStore, world: World
) -> None:
    process = world.process("ten_1")
    pending = world.append("ten_1", process.id)
    poison = _dead_letter(lanes, world, process, "poison")
    for tenant, message_id in (("ten_1", pending.id), ("ten_2", poison.id),
                               ("ten_1", "msg_missing")):
        with pytest.raises(NotFound):
            dead_letters.requeue_dead_letter(tenant, message_id)
    assert [m.id for m in dead_letters.dead_letters("ten_1")] == [poison.id]


def test_requeue_to_a_closed_process_is_refused(
    lanes: LaneStore, dead_letters: DeadLetterStore, world: World
) -> None:
    process = world.process("ten_1")
    poison = _dead_letter(lanes, world, process, "poison")
    world.set_status(process, ProcessStatus.CLOSED, close_reason=CloseReason.FAILED)
    with pytest.raises(Conflict, match="CLOSED"):
        dead_letters.requeue_dead_letter("ten_1", poison.id)
    assert [m.id for m in dead_letters.dead_letters("ten_1")] == [poison.id]
