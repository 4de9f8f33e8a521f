"""The event outbox: a commit enqueues its events with it (fenced with it), in order; they are
read back per process, removed by id, and found by the sweeper once old."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING

from vancetope_brain.models import (
    ChatRole,
    Committed,
    ProcessStatus,
    ThinkProcess,
    TurnEvent,
    utcnow,
)
from vancetope_brain.store import EventOutboxStore, LaneStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import World

STATUS = TurnEvent("status-changed", {"from": "RUNNING", "to": "IDLE"})


def _commit(lanes: LaneStore, world: World, process: ThinkProcess, *contents: str,
            events: list[TurnEvent] | None = None, epoch: int | None = None
            ) -> tuple[int, Committed]:
    """Commit a turn writing one assistant line per content; returns its epoch and what it
    wrote."""
    epoch = epoch or lanes.acquire_epoch(process.tenant_id, process.id).epoch
    message = world.append(process.tenant_id, process.id)
    chat = [world.line(process, text, source=message.id if i == 0 else None)
            for i, text in enumerate(contents)]
    written = lanes.commit_turn(process.tenant_id, process.id, epoch, world.turn(
        process, epoch, drained=[message.id], chat=chat, events=events or []))
    assert written is not None
    return epoch, written


def test_a_commit_enqueues_its_chat_lines_then_its_events(
    lanes: LaneStore, event_outbox: EventOutboxStore, world: World
) -> None:
    session = world.session("ten_1")
    process = world.process("ten_1", session.id)
    epoch, written = _commit(lanes, world, process, "one", "two", events=[STATUS])
    lines = lanes.chat_history("ten_1", process.id)
    events = event_outbox.pending_events("ten_1", process.id)
    # What the commit returns is what it enqueued: its committer publishes that unread.
    assert written.lines == lines
    assert [(e.id, e.type, e.data) for e in written.events] == [
        (e.id, e.type, e.data) for e in events]
    assert [(e.type, e.data) for e in events] == [
        ("chat-message", lines[0].dump()), ("chat-message", lines[1].dump()),
        ("status-changed", {"from": "RUNNING", "to": "IDLE"})]
    assert [e.id for e in events] == [f"chat:{lines[0].id}", f"chat:{lines[1].id}",
                                      f"{process.id}:{epoch}:2"]
    assert {(e.tenant_id, e.session_id, e.process_id, e.epoch) for e in events} == {
        ("ten_1", session.id, process.id, epoch)}
    assert [e.index for e in events] == [0, 1, 2]
    assert [line.seq for line in lines] == [1, 2]  # the events carry the lines as numbered


def test_a_fenced_commit_enqueues_nothing(
    lanes: LaneStore, event_outbox: EventOutboxStore, world: World
) -> None:
    process = world.process("ten_1")
    stale = lanes.acquire_epoch("ten_1", process.id).epoch
    lanes.acquire_epoch("ten_1", process.id)  # a takeover
    commit = world.turn(process, stale, chat=[world.line(process, "late")], events=[STATUS])
    assert lanes.commit_turn("ten_1", process.id, stale, commit) is None
    assert event_outbox.pending_events("ten_1", process.id) == []


def test_a_commit_without_lines_or_events_enqueues_nothing(
    lanes: LaneStore, event_outbox: EventOutboxStore, world: World
) -> None:
    process = world.process("ten_1")
    world.set_status(process, ProcessStatus.IDLE)
    assert event_outbox.pending_events("ten_1", process.id) == []
    assert event_outbox.stale_event_processes(utcnow() + timedelta(seconds=5)) == []


def test_events_read_in_commit_order_within_a_limit_and_per_process(
    lanes: LaneStore, event_outbox: EventOutboxStore, world: World
) -> None:
    process, other = world.process("ten_1"), world.process("ten_1")
    _commit(lanes, world, process, "a", "b", events=[STATUS])
    _commit(lanes, world, other, "elsewhere")
    _commit(lanes, world, process, "c")
    contents = [e.data.get("content") for e in event_outbox.pending_events("ten_1", process.id)]
    assert contents == ["a", "b", None, "c"]
    assert [e.data.get("content") for e in
            event_outbox.pending_events("ten_1", process.id, limit=2)] == ["a", "b"]
    assert [e.data["content"] for e in event_outbox.pending_events("ten_1", other.id)] == [
        "elsewhere"]


def test_a_line_already_written_adds_no_second_event(
    lanes: LaneStore, event_outbox: EventOutboxStore, world: World
) -> None:
    """A later commit repeating a stored (sourceMessageId, role) writes no line, and its
    event is enqueued at most once."""
    process = world.process("ten_1")
    message = world.append("ten_1", process.id)
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    first = world.line(process, "answer", source=message.id)
    assert lanes.commit_turn("ten_1", process.id, epoch, world.turn(
        process, epoch, drained=[message.id], chat=[first])).lines == [
        first.model_copy(update={"seq": 1})]
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    again = world.line(process, "answer, again", source=message.id)
    assert lanes.commit_turn("ten_1", process.id, epoch, world.turn(
        process, epoch, chat=[again])).lines == []
    assert [e.id for e in event_outbox.pending_events("ten_1", process.id)] == [
        f"chat:{first.id}"]


def test_remove_events_removes_those_ids_of_the_tenant_only(
    lanes: LaneStore, event_outbox: EventOutboxStore, world: World
) -> None:
    process = world.process("ten_1")
    _commit(lanes, world, process, "a", "b", events=[STATUS])
    a, b, status = event_outbox.pending_events("ten_1", process.id)
    event_outbox.remove_events("ten_2", [a.id])  # a foreign tenant's id is not its own
    event_outbox.remove_events("ten_1", [a.id, status.id, "chat:no-such-line"])
    assert event_outbox.pending_events("ten_1", process.id) == [b]
    event_outbox.remove_events("ten_1", [a.id])  # again: harmless
    event_outbox.remove_events("ten_1", [])
    assert event_outbox.pending_events("ten_1", process.id) == [b]
    assert event_outbox.pending_events("ten_2", process.id) == []


def test_stale_event_processes_finds_each_waiting_process_once_oldest_first(
    lanes: LaneStore, event_outbox: EventOutboxStore, world: World
) -> None:
    first, second, published = (world.process(t) for t in ("ten_1", "ten_2", "ten_1"))
    _commit(lanes, world, first, "a", "b", events=[STATUS])
    time.sleep(0.01)  # a later millisecond
    _commit(lanes, world, second, "c")
    _commit(lanes, world, published, "d")
    event_outbox.remove_events("ten_1", [e.id for e in
                                         event_outbox.pending_events("ten_1", published.id)])
    later = utcnow() + timedelta(seconds=5)
    assert event_outbox.stale_event_processes(later) == [
        ("ten_1", first.id), ("ten_2", second.id)]
    assert event_outbox.stale_event_processes(later, limit=1) == [("ten_1", first.id)]
    assert event_outbox.stale_event_processes(utcnow() - timedelta(minutes=5)) == []


def test_events_round_trip_with_the_current_schema_version(
    lanes: LaneStore, event_outbox: EventOutboxStore, world: World
) -> None:
    process = world.process("ten_1")
    _commit(lanes, world, process, "hi")
    (event,) = event_outbox.pending_events("ten_1", process.id)
    assert event.schema_version == type(event).SCHEMA_VERSION == 1
    assert event.data["role"] == ChatRole.ASSISTANT.value
    assert event.created_at.utcoffset() == timedelta(0)
