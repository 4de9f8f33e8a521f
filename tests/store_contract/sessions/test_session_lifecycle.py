"""Session status transitions, the first-bind fingerprint and the context-drift flag."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import Fingerprint, SessionStatus, SuspendCause
from vancetope_brain.store import LaneStore, SessionStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import World

OPEN_ONLY = frozenset({SessionStatus.OPEN})


def test_status_moves_only_from_an_allowed_status(sessions: SessionStore, world: World) -> None:
    session = world.session("ten_1")
    suspended = sessions.update_session_status("ten_1", session.id, SessionStatus.SUSPENDED,
                                            allowed_from=OPEN_ONLY,
                                            suspend_cause=SuspendCause.DISCONNECT)
    assert suspended.status is SessionStatus.SUSPENDED
    assert suspended.suspend_cause is SuspendCause.DISCONNECT
    assert sessions.get_session("ten_1", session.id) == suspended
    with pytest.raises(Conflict, match="SUSPENDED"):
        sessions.update_session_status("ten_1", session.id, SessionStatus.SUSPENDED,
                                    allowed_from=OPEN_ONLY)
    assert sessions.get_session("ten_1", session.id) == suspended
    reopened = sessions.update_session_status("ten_1", session.id, SessionStatus.OPEN,
                                           allowed_from=frozenset({SessionStatus.SUSPENDED}))
    assert reopened.status is SessionStatus.OPEN and reopened.suspend_cause is None


def test_status_of_a_foreign_or_missing_session_is_not_found(
    sessions: SessionStore, world: World
) -> None:
    session = world.session("ten_1")
    for tenant, sid in (("ten_2", session.id), ("ten_1", "ses_missing")):
        with pytest.raises(NotFound):
            sessions.update_session_status(tenant, sid, SessionStatus.CLOSED,
                                        allowed_from=OPEN_ONLY)
    assert sessions.get_session("ten_1", session.id).status is SessionStatus.OPEN


def test_first_fingerprint_wins(sessions: SessionStore, world: World) -> None:
    session = world.session("ten_1")
    first = Fingerprint(machine_id="m1", working_dir="/a")
    assert sessions.set_details("ten_1", session.id, fingerprint=first,
                                only_unset=True).fingerprint == first
    later = sessions.set_details("ten_1", session.id, only_unset=True,
                                 fingerprint=Fingerprint(machine_id="m2", working_dir="/b"))
    assert later.fingerprint == first
    with pytest.raises(NotFound):
        sessions.set_details("ten_2", session.id, fingerprint=first, only_unset=True)


def test_context_drift_flag(sessions: SessionStore, lanes: LaneStore, world: World) -> None:
    process = world.process("ten_1")
    sessions.set_context_drift("ten_1", process.id, True)
    assert sessions.get_process("ten_1", process.id).context_drift is True
    epoch = lanes.acquire_epoch("ten_1", process.id).epoch
    assert lanes.commit_turn("ten_1", process.id, epoch, world.turn(process, epoch)) is not None
    assert sessions.get_process("ten_1", process.id).context_drift is True
    sessions.set_context_drift("ten_1", process.id, False)
    assert sessions.get_process("ten_1", process.id).context_drift is False
    with pytest.raises(NotFound):
        sessions.set_context_drift("ten_2", process.id, True)


def test_count_sessions_follows_the_users_sessions_through_their_statuses(
    sessions: SessionStore, world: World
) -> None:
    """What ``SessionService`` caps open sessions by: OPEN + SUSPENDED of this user only."""
    mine = [world.session("ten_1", "usr_1") for _ in range(4)]
    world.session("ten_1", "usr_2")
    world.session("ten_2", "usr_1")
    open_, suspended, closed = SessionStatus.OPEN, SessionStatus.SUSPENDED, SessionStatus.CLOSED
    assert sessions.count_sessions("ten_1", "usr_1", cap=10) == {
        open_: 4, suspended: 0, closed: 0}
    sessions.update_session_status("ten_1", mine[0].id, suspended, allowed_from=OPEN_ONLY)
    for session in mine[1:3]:
        sessions.update_session_status("ten_1", session.id, closed, allowed_from=OPEN_ONLY)
    assert sessions.count_sessions("ten_1", "usr_1", cap=10) == {
        open_: 1, suspended: 1, closed: 2}
    assert sessions.count_sessions("ten_1", "usr_3", cap=10) == {
        open_: 0, suspended: 0, closed: 0}
