"""A user's sessions a page at a time: newest first, filtered by status in the query, the
pages joined by an opaque cursor; only the user's own; counted per status up to a cap."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import InvalidInput
from vancetope_brain.models import Session, SessionStatus, utcnow
from vancetope_brain.store import SessionStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import Storage, World

CLOSED, OPEN, SUSPENDED = SessionStatus.CLOSED, SessionStatus.OPEN, SessionStatus.SUSPENDED


def _paged(sessions: SessionStore, limit: int, status: SessionStatus | None = None,
           tenant_id: str = "ten_1", user_id: str = "usr_1") -> list[list[str]]:
    """The ids of each page, read from the first until ``next_cursor`` is None."""
    pages, cursor = [], None
    while True:
        page = sessions.list_sessions(tenant_id, user_id, status=status, cursor=cursor,
                                      limit=limit)
        pages.append([s.id for s in page.sessions])
        if page.next_cursor is None:
            return pages
        assert len(page.sessions) == limit, "a page before the last is full"
        cursor = page.next_cursor


def _dated(world: World, offsets: list[int], **fields: object) -> list[Session]:
    start = utcnow()
    return [world.session("ten_1", "usr_1", created_at=start + timedelta(seconds=s), **fields)
            for s in offsets]


def test_pages_are_newest_first_and_join_without_gaps_or_repeats(
        sessions: SessionStore, world: World) -> None:
    made = _dated(world, [2, 0, 5, 1, 6, 3, 4])
    newest_first = [s.id for s in sorted(made, key=lambda s: s.created_at, reverse=True)]
    assert _paged(sessions, 3) == [newest_first[:3], newest_first[3:6], newest_first[6:]]
    assert _paged(sessions, 7) == [newest_first]
    assert _paged(sessions, 200) == [newest_first]


def test_sessions_of_one_millisecond_are_each_listed_once(
        sessions: SessionStore, world: World) -> None:
    at = utcnow()
    made = {world.session("ten_1", "usr_1", created_at=at).id for _ in range(5)}
    later = world.session("ten_1", "usr_1", created_at=at + timedelta(seconds=1))
    pages = _paged(sessions, 2)
    listed = [sid for page in pages for sid in page]
    assert listed[0] == later.id and sorted(listed[1:]) == sorted(made)
    assert [sid for page in _paged(sessions, 1) for sid in page] == listed


def test_same_millisecond_ties_follow_the_backends_documented_order(
        sessions: SessionStore, world: World, storage: Storage) -> None:
    """SQL stores: the newest inserted first; MongoDB: the greater session id first (the
    port's module docstring)."""
    at = utcnow()
    made = [world.session("ten_1", "usr_1", created_at=at).id for _ in range(4)]
    expected = sorted(made, reverse=True) if storage.name.startswith("mongo") else made[::-1]
    assert [sid for page in _paged(sessions, 3) for sid in page] == expected


def test_the_status_filter_pages_only_that_status(sessions: SessionStore, world: World) -> None:
    start = utcnow()
    statuses = [CLOSED, OPEN, CLOSED, SUSPENDED, CLOSED, CLOSED, OPEN, CLOSED]
    made = [world.session("ten_1", "usr_1", status=status,
                          created_at=start + timedelta(seconds=i))
            for i, status in enumerate(statuses)]
    for status in SessionStatus:
        expected = [s.id for s in reversed(made) if s.status is status]
        assert [sid for page in _paged(sessions, 2, status) for sid in page] == expected
    assert _paged(sessions, 2, CLOSED)[0] == [made[7].id, made[5].id]


def test_only_the_users_own_sessions_are_listed_and_counted(
        sessions: SessionStore, world: World) -> None:
    mine = world.session("ten_1", "usr_1")
    world.session("ten_1", "usr_2")
    world.session("ten_2", "usr_1")  # the same user id in another tenant
    world.session("ten_1", "_system", system=True)  # a service's session (never a user's)
    assert _paged(sessions, 1) == [[mine.id]]
    assert _paged(sessions, 50, OPEN, user_id="usr_3") == [[]]
    assert sessions.count_sessions("ten_1", "usr_1", cap=10) == {OPEN: 1, SUSPENDED: 0,
                                                                 CLOSED: 0}


def test_a_cursor_of_another_filter_or_user_only_positions_the_read(
        sessions: SessionStore, world: World) -> None:
    """A cursor is a position in time, not a grant: used by another user it reads that
    user's own sessions older than it, never the first user's."""
    made = _dated(world, [0, 1, 2])
    theirs = world.session("ten_1", "usr_2", created_at=made[0].created_at - timedelta(days=1))
    first = sessions.list_sessions("ten_1", "usr_1", limit=1)
    assert first.next_cursor is not None
    page = sessions.list_sessions("ten_1", "usr_2", cursor=first.next_cursor, limit=10)
    assert [s.id for s in page.sessions] == [theirs.id]


@pytest.mark.parametrize("cursor", ["not-a-cursor", "|", "12|", "|7", "x1|7", "-5|7",
                                    "１２|7", "12"])
def test_a_cursor_not_made_by_a_page_is_invalid_input(
        sessions: SessionStore, world: World, cursor: str) -> None:
    world.session("ten_1", "usr_1")
    with pytest.raises(InvalidInput) as refused:
        sessions.list_sessions("ten_1", "usr_1", cursor=cursor, limit=10)
    assert refused.value.code == "invalid_input"


def test_counts_per_status_stop_at_the_cap(sessions: SessionStore, world: World) -> None:
    for status, many in ((CLOSED, 5), (OPEN, 2), (SUSPENDED, 1)):
        for _ in range(many):
            world.session("ten_1", "usr_1", status=status)
    assert sessions.count_sessions("ten_1", "usr_1", cap=3) == {OPEN: 2, SUSPENDED: 1,
                                                                CLOSED: 3}
    assert sessions.count_sessions("ten_1", "usr_1", cap=1000) == {OPEN: 2, SUSPENDED: 1,
                                                                   CLOSED: 5}
    assert sessions.count_sessions("ten_1", "usr_9", cap=3) == {OPEN: 0, SUSPENDED: 0,
                                                                CLOSED: 0}
