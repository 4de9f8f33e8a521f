"""The user Inbox: filtered listing newest first, paging, and the pending summary."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from vancetope_brain.models import utcnow
from vancetope_brain.models.inbox import Criticality, InboxItem, InboxQuery, ItemStatus, ItemType
from vancetope_brain.store import UserInboxStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import World

C, S = Criticality, ItemStatus


def _ids(items: list[InboxItem]) -> list[str]:
    return [item.id for item in items]


# ── listing ───────────────────────────────────────────────────────────────
def test_items_are_listed_newest_first_then_by_id_descending(
    user_inbox: UserInboxStore, world: World
) -> None:
    base = utcnow() - timedelta(hours=1)
    old = world.add_item("ten_1", id="itm_m", created_at=base)
    tie_a = world.add_item("ten_1", id="itm_a", created_at=base + timedelta(seconds=1))
    new = world.add_item("ten_1", id="itm_0", created_at=base + timedelta(seconds=2))
    tie_b = world.add_item("ten_1", id="itm_b", created_at=base + timedelta(seconds=1))
    assert user_inbox.list_inbox_items("ten_1", InboxQuery()) == [new, tie_b, tie_a, old]
    assert user_inbox.list_inbox_items("ten_1", InboxQuery(limit=2)) == [new, tie_b]
    with pytest.raises(ValueError, match="at least 1"):
        InboxQuery(limit=0)


def test_paging_with_before_crosses_equal_timestamps(
    user_inbox: UserInboxStore, world: World
) -> None:
    at = utcnow() - timedelta(hours=1)
    same = [world.add_item("ten_1", id=f"itm_{c}", created_at=at) for c in "abcde"]
    older = world.add_item("ten_1", id="itm_z", created_at=at - timedelta(milliseconds=1))
    pages, before = [], None
    while True:
        page = user_inbox.list_inbox_items("ten_1", InboxQuery(before=before, limit=2))
        if not page:
            break
        pages.append(_ids(page))
        before = (page[-1].created_at, page[-1].id)
    assert pages == [["itm_e", "itm_d"], ["itm_c", "itm_b"], ["itm_a", older.id]]
    assert _ids(same) == ["itm_a", "itm_b", "itm_c", "itm_d", "itm_e"]


def test_list_filters_by_assignee_status_criticality_session_and_process(
    user_inbox: UserInboxStore, world: World
) -> None:
    mine = world.add_item("ten_1", assigned_to="usr_1", criticality=C.CRITICAL,
                          origin_session_id="ses_1", origin_process_id="proc_1")
    mine_low = world.add_item("ten_1", assigned_to="usr_1", criticality=C.LOW,
                              origin_session_id="ses_2", origin_process_id="proc_2")
    mine_done = world.add_item("ten_1", assigned_to="usr_1", status=S.ANSWERED,
                               origin_session_id="ses_1", origin_process_id="proc_1")
    theirs = world.add_item("ten_1", assigned_to="usr_2", origin_session_id="ses_1")

    def ids(**filters: Any) -> set[str]:
        return set(_ids(user_inbox.list_inbox_items("ten_1", InboxQuery(**filters))))

    assert ids(assigned_to="usr_1") == {mine.id, mine_low.id, mine_done.id}
    assert ids(assigned_to="usr_2") == {theirs.id}
    assert ids(statuses=frozenset({S.PENDING})) == {mine.id, mine_low.id, theirs.id}
    assert ids(statuses=frozenset({S.ANSWERED, S.DISMISSED})) == {mine_done.id}
    assert ids(statuses=frozenset()) == set()
    assert ids(criticalities=frozenset({C.CRITICAL, C.LOW})) == {mine.id, mine_low.id}
    assert ids(origin_session_id="ses_1") == {mine.id, mine_done.id, theirs.id}
    assert ids(origin_process_id="proc_1") == {mine.id, mine_done.id}
    assert ids(assigned_to="usr_1", statuses=frozenset({S.PENDING}),
               origin_session_id="ses_1") == {mine.id}
    assert ids(assigned_to="usr_3") == set()


def test_list_filters_by_every_given_tag(user_inbox: UserInboxStore, world: World) -> None:
    both = world.add_item("ten_1", tags=["analysis", "review"])
    one = world.add_item("ten_1", tags=["analysis"])
    world.add_item("ten_1", tags=[])
    world.add_item("ten_1", tags=["analysis-review"])

    def ids(*tags: str) -> set[str]:
        return set(_ids(user_inbox.list_inbox_items("ten_1", InboxQuery(tags=tags))))

    assert ids("analysis") == {both.id, one.id}
    assert ids("analysis", "review") == {both.id}
    assert ids("review", "analysis") == {both.id}
    assert ids("analysis", "missing") == set()
    assert len(ids()) == 4


def test_list_filters_by_requires_action(user_inbox: UserInboxStore, world: World) -> None:
    ask = world.add_item("ten_1", origin_process_id="proc_1")
    output = world.add_item("ten_1", origin_process_id="proc_1", type=ItemType.OUTPUT_TEXT,
                            requires_action=False)

    def ids(requires_action: bool | None) -> set[str]:
        query = InboxQuery(origin_process_id="proc_1", requires_action=requires_action)
        return set(_ids(user_inbox.list_inbox_items("ten_1", query)))

    assert ids(True) == {ask.id}
    assert ids(False) == {output.id}
    assert ids(None) == {ask.id, output.id}


def test_list_filters_by_resolved_before(user_inbox: UserInboxStore, world: World) -> None:
    now = utcnow()
    long_ago = world.add_item("ten_1", status=S.ANSWERED, resolved_at=now - timedelta(days=40))
    world.add_item("ten_1", status=S.DISMISSED, resolved_at=now - timedelta(days=2))
    world.add_item("ten_1")  # unresolved: never "resolved before"
    query = InboxQuery(resolved_before=now - timedelta(days=30))
    assert user_inbox.list_inbox_items("ten_1", query) == [long_ago]


def test_a_save_moves_the_item_between_filters(user_inbox: UserInboxStore, world: World) -> None:
    item = world.add_item("ten_1", tags=["a"])
    pending = InboxQuery(assigned_to="usr_1", statuses=frozenset({S.PENDING}))
    user_inbox.save_inbox_item(item.model_copy(update={"assigned_to_user_id": "usr_2",
                                                  "tags": ["b"]}), expected_revision=0)
    assert user_inbox.list_inbox_items("ten_1", pending) == []
    assert _ids(user_inbox.list_inbox_items("ten_1", InboxQuery(assigned_to="usr_2",
                                                           tags=("b",)))) == [item.id]
    assert user_inbox.list_inbox_items("ten_1", InboxQuery(tags=("a",))) == []


# ── the pending summary ───────────────────────────────────────────────────
def test_pending_counts_per_criticality_and_the_oldest(
    user_inbox: UserInboxStore, world: World
) -> None:
    oldest = utcnow() - timedelta(hours=3)
    world.add_item("ten_1", criticality=C.LOW, created_at=oldest + timedelta(hours=1))
    world.add_item("ten_1", criticality=C.LOW, created_at=oldest)
    world.add_item("ten_1", criticality=C.NORMAL)
    world.add_item("ten_1", criticality=C.CRITICAL, status=S.ANSWERED,
                   created_at=oldest - timedelta(hours=1))
    world.add_item("ten_1", assigned_to="usr_2", criticality=C.CRITICAL)
    world.add_item("ten_2", criticality=C.CRITICAL)
    counts, since = user_inbox.inbox_pending_counts("ten_1", "usr_1")
    assert counts == {"LOW": 2, "NORMAL": 1}
    assert since == oldest
    assert since is not None and since.utcoffset() == timedelta(0)
    assert user_inbox.inbox_pending_counts("ten_1", "usr_2")[0] == {"CRITICAL": 1}
    assert user_inbox.inbox_pending_counts("ten_1", "usr_3") == ({}, None)


def test_open_items_are_counted_per_criticality_across_tenants(
    user_inbox: UserInboxStore, world: World
) -> None:
    assert user_inbox.open_items_by_criticality() == {}
    world.add_item("ten_1", criticality=C.LOW)
    world.add_item("ten_1", criticality=C.LOW, assigned_to="usr_2")
    world.add_item("ten_2", criticality=C.CRITICAL)
    world.add_item("ten_2", criticality=C.NORMAL, status=S.ANSWERED)
    assert user_inbox.open_items_by_criticality() == {"LOW": 2, "CRITICAL": 1}
