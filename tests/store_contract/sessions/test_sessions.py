"""Sessions: insert, read, list newest first, set the chat process."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import SessionType, utcnow
from vancetope_brain.store import SessionStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import World


def test_session_round_trips(sessions: SessionStore, world: World) -> None:
    session = world.session("ten_1", type=SessionType.AUTONOMOUS, title="Research")
    assert sessions.get_session("ten_1", session.id) == session


def test_duplicate_session_id_conflicts(sessions: SessionStore, world: World) -> None:
    session = world.session("ten_1")
    with pytest.raises(Conflict):
        sessions.create_session(session)


def test_missing_session_is_not_found(sessions: SessionStore) -> None:
    with pytest.raises(NotFound):
        sessions.get_session("ten_1", "ses_missing")


def test_list_sessions_is_newest_first_and_only_the_users(
    sessions: SessionStore, world: World
) -> None:
    start = utcnow()
    ids = [world.session("ten_1", "usr_1", created_at=start + timedelta(seconds=i)).id
           for i in (2, 0, 1)]
    world.session("ten_1", "usr_2")
    assert [s.id for s in sessions.list_sessions("ten_1", "usr_1")] == [ids[0], ids[2], ids[1]]
    assert sessions.list_sessions("ten_1", "usr_3") == []


def test_set_chat_process(sessions: SessionStore, world: World) -> None:
    session = world.session("ten_1")
    sessions.set_chat_process("ten_1", session.id, "proc_1")
    sessions.set_chat_process("ten_1", session.id, "proc_2")
    assert sessions.get_session("ten_1", session.id).chat_process_id == "proc_2"


def test_set_chat_process_of_missing_session_is_not_found(sessions: SessionStore) -> None:
    with pytest.raises(NotFound):
        sessions.set_chat_process("ten_1", "ses_missing", "proc_1")
