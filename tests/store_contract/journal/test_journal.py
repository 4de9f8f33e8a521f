"""JournalStore: entries keyed per process, written by the current epoch only, capped, and
cleared by the commit of the turn that read them (``TurnCommit.journal_opened``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from vancetope_brain.errors import JournalFull, NotFound
from vancetope_brain.models import JournalEntry, ProcessStatus, StepKind, StepState, ThinkProcess
from vancetope_brain.models.process import CloseReason
from vancetope_brain.store import JournalStore, LaneStore
from vancetope_brain.store.journal import MAX_ENTRIES, MAX_ENTRY_BYTES

if TYPE_CHECKING:
    from tests.store_contract.conftest import World


def step(process: ThinkProcess, key: str, state: StepState = StepState.DONE,
         **fields: Any) -> JournalEntry:
    return JournalEntry(**{"id": f"{process.id}:{key}", "tenant_id": process.tenant_id,
                           "process_id": process.id, "key": key, "turn": "turn_1",
                           "kind": StepKind.TOOL, "state": state, **fields})


@pytest.fixture
def running(lanes: LaneStore, world: World) -> tuple[ThinkProcess, int]:
    """A process in a turn: (the process, the turn's epoch)."""
    process = world.process("ten_1")
    return process, lanes.acquire_epoch("ten_1", process.id).epoch


def keys(journal: JournalStore, process: ThinkProcess) -> list[str]:
    return [e.key for e in journal.journal(process.tenant_id, process.id)]


def test_steps_read_back_whole_in_the_order_their_keys_were_first_written(
        journal: JournalStore, running: tuple[ThinkProcess, int]) -> None:
    process, epoch = running
    a, c = step(process, "a"), step(process, "c", message_ids=["m_1"])
    started = step(process, "b", StepState.STARTED, tool="send", params={"to": "ada"},
                   match="m1")
    assert journal.record_steps("ten_1", process.id, epoch, [a, started])
    done = started.model_copy(update={"state": StepState.DONE,
                                      "result": {"status": "success", "result": [1, "x"]}})
    assert journal.record_steps("ten_1", process.id, epoch, [c, done])
    assert journal.journal("ten_1", process.id) == [a, done, c]


def test_a_turn_whose_epoch_moved_on_writes_nothing(
        journal: JournalStore, lanes: LaneStore, running: tuple[ThinkProcess, int]) -> None:
    process, epoch = running
    a = step(process, "a")
    assert journal.record_steps("ten_1", process.id, epoch, [a])
    newer = lanes.acquire_epoch("ten_1", process.id).epoch
    assert not journal.record_steps("ten_1", process.id, epoch,
                                    [step(process, "a", StepState.STARTED), step(process, "b")])
    assert journal.journal("ten_1", process.id) == [a]
    assert journal.record_steps("ten_1", process.id, newer, [step(process, "b")])
    assert keys(journal, process) == ["a", "b"]


def test_a_batch_past_the_entry_cap_is_refused_whole(
        journal: JournalStore, running: tuple[ThinkProcess, int]) -> None:
    process, epoch = running
    first = [step(process, f"k{i}") for i in range(MAX_ENTRIES - 1)]
    assert journal.record_steps("ten_1", process.id, epoch, first)
    with pytest.raises(JournalFull) as refused:
        journal.record_steps("ten_1", process.id, epoch,
                             [step(process, "k0", StepState.STARTED), step(process, "new1"),
                              step(process, "new2")])
    assert refused.value.code == "journal_full"
    assert journal.journal("ten_1", process.id) == first
    # Rewriting held keys takes no room; the last free place is still there.
    assert journal.record_steps("ten_1", process.id, epoch,
                                [step(process, "k0", StepState.STARTED), step(process, "new1")])
    assert len(keys(journal, process)) == MAX_ENTRIES


def test_an_entry_past_the_size_cap_is_refused(
        journal: JournalStore, running: tuple[ThinkProcess, int]) -> None:
    process, epoch = running
    big = step(process, "big", result={"text": "x" * MAX_ENTRY_BYTES})
    with pytest.raises(JournalFull):
        journal.record_steps("ten_1", process.id, epoch, [step(process, "a"), big])
    assert journal.journal("ten_1", process.id) == []


def test_another_tenants_journal_is_missing(
        journal: JournalStore, running: tuple[ThinkProcess, int]) -> None:
    process, epoch = running
    assert journal.record_steps("ten_1", process.id, epoch, [step(process, "a")])
    assert journal.journal("ten_2", process.id) == []
    foreign = step(process, "b").model_copy(update={"tenant_id": "ten_2"})
    with pytest.raises(NotFound):
        journal.record_steps("ten_2", process.id, epoch, [foreign])
    with pytest.raises(NotFound):
        journal.record_steps("ten_1", "proc_missing", 1, [])
    assert keys(journal, process) == ["a"]


def _in_a_turn(journal: JournalStore, lanes: LaneStore, world: World) -> tuple[ThinkProcess, int]:
    """A process whose turn journaled a done step, a decided call and an in-doubt call."""
    process = world.process("ten_1")
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    assert journal.record_steps("ten_1", process.id, epoch, [
        step(process, "input", kind=StepKind.INPUT), step(process, "llm"),
        step(process, "doubt", StepState.IN_DOUBT, item_id="item_1"),
        step(process, "said-no", StepState.REJECTED)])
    return process, epoch


def test_the_commit_of_a_turn_that_read_the_journal_keeps_only_the_in_doubt_calls(
        journal: JournalStore, lanes: LaneStore, world: World) -> None:
    process, epoch = _in_a_turn(journal, lanes, world)
    assert lanes.commit_turn("ten_1", process.id, epoch,
                             world.turn(process, epoch, journal_opened=True)) is not None
    assert keys(journal, process) == ["doubt"]


def test_a_turn_that_never_read_the_journal_leaves_it(
        journal: JournalStore, lanes: LaneStore, world: World) -> None:
    process, epoch = _in_a_turn(journal, lanes, world)
    assert lanes.commit_turn("ten_1", process.id, epoch,
                             world.turn(process, epoch, status=ProcessStatus.PAUSED)) is not None
    assert keys(journal, process) == ["input", "llm", "doubt", "said-no"]


def test_a_commit_that_closes_the_process_clears_it_all(
        journal: JournalStore, lanes: LaneStore, world: World) -> None:
    process, epoch = _in_a_turn(journal, lanes, world)
    closing = world.turn(process, epoch, status=ProcessStatus.CLOSED,
                         close_reason=CloseReason.STOPPED)
    assert lanes.commit_turn("ten_1", process.id, epoch, closing) is not None
    assert journal.journal("ten_1", process.id) == []


def test_a_fenced_commit_clears_nothing(
        journal: JournalStore, lanes: LaneStore, world: World) -> None:
    process, epoch = _in_a_turn(journal, lanes, world)
    lanes.acquire_epoch("ten_1", process.id)
    assert lanes.commit_turn("ten_1", process.id, epoch,
                             world.turn(process, epoch, journal_opened=True)) is None
    assert keys(journal, process) == ["input", "llm", "doubt", "said-no"]
