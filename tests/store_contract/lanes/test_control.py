"""request_control: a lifecycle call recorded atomically for the next turn, cleared by its commit."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import ProcessStatus, ThinkProcess, utcnow
from vancetope_brain.store import LaneStore, SessionStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import World

S = ProcessStatus
# The store knows no lifecycle table: each test passes the statuses it allows.
ACTIVE = frozenset({S.IDLE, S.BLOCKED, S.RUNNING})
HELD = frozenset({S.PAUSED, S.SUSPENDED})
LATER = timedelta(seconds=5)


def _pending(sessions: SessionStore, process: ThinkProcess) -> tuple[str | None, object]:
    stored = sessions.get_process(process.tenant_id, process.id)
    return stored.pending_control, stored.control_requested_at


def _idle(world: World) -> ThinkProcess:
    process = world.process("ten_1")
    world.set_status(process, S.IDLE)
    return process


def test_a_new_process_has_no_pending_control(sessions: SessionStore, world: World) -> None:
    process = world.process("ten_1")
    assert _pending(sessions, process) == (None, None)


def test_request_in_an_allowed_status_sets_both_fields_and_returns_the_document(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = _idle(world)
    before = utcnow()
    returned = lanes.request_control("ten_1", process.id, "pause", ACTIVE)
    assert returned.pending_control == "pause"
    assert returned.control_requested_at is not None
    assert before <= returned.control_requested_at <= utcnow()
    assert returned.status == S.IDLE
    assert returned == sessions.get_process("ten_1", process.id)


def test_request_in_a_disallowed_status_conflicts_naming_it_and_changes_nothing(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = _idle(world)
    lanes.request_control("ten_1", process.id, "pause", ACTIVE)
    before = sessions.get_process("ten_1", process.id)
    with pytest.raises(Conflict, match="IDLE"):
        lanes.request_control("ten_1", process.id, "resume", HELD)
    with pytest.raises(Conflict, match="IDLE"):
        lanes.request_control("ten_1", process.id, "stop", frozenset())
    assert sessions.get_process("ten_1", process.id) == before


def test_request_on_a_closed_process_conflicts(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = world.process("ten_1")
    world.set_status(process, S.CLOSED)
    with pytest.raises(Conflict, match="CLOSED"):
        lanes.request_control("ten_1", process.id, "stop", ACTIVE | HELD | {S.INIT})
    assert _pending(sessions, process) == (None, None)


def test_request_on_a_missing_or_foreign_process_is_not_found(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = _idle(world)
    with pytest.raises(NotFound):
        lanes.request_control("ten_1", "proc_missing", "pause", ACTIVE)
    with pytest.raises(NotFound):
        lanes.request_control("ten_2", process.id, "pause", ACTIVE)
    assert _pending(sessions, process) == (None, None)


def test_a_newer_request_replaces_an_older_one(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = _idle(world)
    first = lanes.request_control("ten_1", process.id, "pause", ACTIVE)
    second = lanes.request_control("ten_1", process.id, "stop", ACTIVE | HELD)
    assert second.pending_control == "stop"
    assert first.control_requested_at is not None and second.control_requested_at is not None
    assert second.control_requested_at >= first.control_requested_at
    assert _pending(sessions, process) == ("stop", second.control_requested_at)


def test_commit_of_the_handled_call_clears_both_fields(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = _idle(world)
    lanes.request_control("ten_1", process.id, "pause", ACTIVE)
    acquired = lanes.acquire_epoch("ten_1", process.id)
    commit = world.turn(process, acquired.epoch, status=S.PAUSED,
                        control_handled=acquired.pending_control)
    assert None is not lanes.commit_turn("ten_1", process.id, acquired.epoch, commit)
    stored = sessions.get_process("ten_1", process.id)
    assert (stored.status, stored.pending_control, stored.control_requested_at) == (
        S.PAUSED, None, None)


def test_a_newer_request_survives_the_commit_of_the_older(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = _idle(world)
    lanes.request_control("ten_1", process.id, "pause", ACTIVE)
    acquired = lanes.acquire_epoch("ten_1", process.id)
    assert acquired.pending_control == "pause"
    newer = lanes.request_control("ten_1", process.id, "stop", ACTIVE | HELD)
    commit = world.turn(process, acquired.epoch, status=S.PAUSED, control_handled="pause")
    assert None is not lanes.commit_turn("ten_1", process.id, acquired.epoch, commit)
    stored = sessions.get_process("ten_1", process.id)
    assert (stored.status, stored.pending_control, stored.control_requested_at) == (
        S.PAUSED, "stop", newer.control_requested_at)


def test_a_commit_that_handled_no_call_keeps_the_pending_one(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = _idle(world)
    requested = lanes.request_control("ten_1", process.id, "pause", ACTIVE)
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    assert None is not lanes.commit_turn("ten_1", process.id, epoch, world.turn(process, epoch))
    assert _pending(sessions, process) == ("pause", requested.control_requested_at)


def test_a_fenced_commit_does_not_clear_the_call(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = _idle(world)
    requested = lanes.request_control("ten_1", process.id, "pause", ACTIVE)
    stale = lanes.acquire_epoch("ten_1", process.id).epoch
    lanes.acquire_epoch("ten_1", process.id)  # a takeover
    commit = world.turn(process, stale, status=S.PAUSED, control_handled="pause")
    assert None is lanes.commit_turn("ten_1", process.id, stale, commit)
    assert _pending(sessions, process) == ("pause", requested.control_requested_at)


def test_acquire_epoch_and_append_message_keep_the_call(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = _idle(world)
    requested = lanes.request_control("ten_1", process.id, "suspend", ACTIVE)
    world.append("ten_1", process.id)
    acquired = lanes.acquire_epoch("ten_1", process.id)
    assert (acquired.pending_control, acquired.control_requested_at) == (
        "suspend", requested.control_requested_at)
    world.append("ten_1", process.id)
    assert _pending(sessions, process) == ("suspend", requested.control_requested_at)
    stored = sessions.get_process("ten_1", process.id)
    assert (stored.status, stored.epoch, stored.next_seq) == (S.RUNNING, acquired.epoch, 2)


@pytest.mark.parametrize("held", [S.PAUSED, S.SUSPENDED])
def test_stale_pending_returns_a_held_process_with_an_old_call(
    sessions: SessionStore, lanes: LaneStore, world: World, held: ProcessStatus
) -> None:
    process = world.process("ten_1")
    world.set_status(process, held)
    lanes.request_control("ten_1", process.id, "resume", HELD)
    assert lanes.stale_pending(utcnow() + LATER) == [("ten_1", process.id)]


def test_stale_pending_skips_a_call_newer_than_the_cutoff(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = world.process("ten_1")
    world.set_status(process, S.PAUSED)
    cutoff = utcnow()
    lanes.request_control("ten_1", process.id, "resume", HELD)
    assert lanes.stale_pending(cutoff) == []


def test_stale_pending_skips_a_closed_process_with_a_call(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = world.process("ten_1")
    world.set_status(process, S.PAUSED)
    lanes.request_control("ten_1", process.id, "stop", HELD)
    # Closed by a turn that handled a different call, so "stop" is still recorded.
    world.set_status(process, S.CLOSED, control_handled="resume")
    assert sessions.get_process("ten_1", process.id).pending_control == "stop"
    assert lanes.stale_pending(utcnow() + LATER) == []


def test_stale_pending_skips_a_handled_call(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process = world.process("ten_1")
    world.set_status(process, S.PAUSED)
    lanes.request_control("ten_1", process.id, "resume", HELD)
    world.set_status(process, S.IDLE, control_handled="resume")
    assert lanes.stale_pending(utcnow() + LATER) == []


def test_stale_pending_lists_a_process_with_a_call_and_messages_once(
    sessions: SessionStore, lanes: LaneStore, world: World
) -> None:
    process, other = _idle(world), _idle(world)
    world.append("ten_1", process.id)
    lanes.request_control("ten_1", process.id, "pause", ACTIVE)
    lanes.request_control("ten_1", other.id, "pause", ACTIVE)
    found = lanes.stale_pending(utcnow() + LATER)
    assert sorted(found) == sorted([("ten_1", process.id), ("ten_1", other.id)])
    assert len(lanes.stale_pending(utcnow() + LATER, limit=1)) == 1
