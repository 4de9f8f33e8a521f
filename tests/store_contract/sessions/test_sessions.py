"""Sessions: insert, read, set the chat process and the title (pages: test_session_pages)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import Fingerprint, SessionType
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


def test_set_chat_process(sessions: SessionStore, world: World) -> None:
    session = world.session("ten_1")
    sessions.set_chat_process("ten_1", session.id, "proc_1")
    sessions.set_chat_process("ten_1", session.id, "proc_2")
    assert sessions.get_session("ten_1", session.id).chat_process_id == "proc_2"


def test_set_chat_process_of_missing_session_is_not_found(sessions: SessionStore) -> None:
    with pytest.raises(NotFound):
        sessions.set_chat_process("ten_1", "ses_missing", "proc_1")


def test_set_details_replaces_the_title(sessions: SessionStore, world: World) -> None:
    session = world.session("ten_1", title="Research")
    renamed = sessions.set_details("ten_1", session.id, title="Tea research")
    assert renamed.title == "Tea research" and renamed.updated_at >= session.updated_at
    assert sessions.get_session("ten_1", session.id) == renamed
    assert sessions.set_details("ten_1", session.id, title="Other",
                                only_unset=True).title == "Tea research"


def test_set_details_only_unset_titles_only_an_untitled_session(sessions: SessionStore,
                                                                world: World) -> None:
    untitled = world.session("ten_1")
    assert untitled.title == ""  # as every session created without one, then and now
    assert sessions.set_details("ten_1", untitled.id, title="From the first message",
                                only_unset=True).title == "From the first message"
    assert sessions.set_details("ten_1", untitled.id, title="From a later message",
                                only_unset=True).title == "From the first message"


def test_set_details_sets_each_field_by_its_own_condition(sessions: SessionStore,
                                                          world: World) -> None:
    titled = world.session("ten_1", title="Mine")
    first = Fingerprint(machine_id="m1", working_dir="/a")
    both = sessions.set_details("ten_1", titled.id, title="Theirs", fingerprint=first,
                                only_unset=True)
    assert (both.title, both.fingerprint) == ("Mine", first)


def test_set_details_of_a_foreign_or_missing_session_is_not_found(sessions: SessionStore,
                                                                  world: World) -> None:
    session = world.session("ten_1", title="Mine")
    for tenant, sid in (("ten_2", session.id), ("ten_1", "ses_missing")):
        for only_unset in (False, True):
            with pytest.raises(NotFound):
                sessions.set_details(tenant, sid, title="Theirs", only_unset=only_unset)
    assert sessions.get_session("ten_1", session.id).title == "Mine"
