"""The user Inbox: idempotent creates, compare-and-set saves with their message, filtered
listing newest first, and the pending summary."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models import InboxAnswer, InboxMessage, new_id, utcnow
from vancetope_brain.models.inbox import (
    AnswerPayload,
    Criticality,
    HistoryAction,
    HistoryEntry,
    InboxItem,
    InboxQuery,
    ItemStatus,
    ItemType,
    Outcome,
    ResolvedBy,
)
from vancetope_brain.store import Store

from .conftest import BACKENDS

if TYPE_CHECKING:
    from .conftest import Backend, World

C, S = Criticality, ItemStatus


def _answered(item: InboxItem, *, by: str = "usr_1") -> InboxItem:
    """``item`` as the service would save it after the user approved it."""
    now = utcnow()
    return item.model_copy(update={
        "status": S.ANSWERED, "resolved_by": ResolvedBy.USER, "resolved_at": now,
        "updated_at": now,
        "answer": AnswerPayload(outcome=Outcome.DECIDED, value={"approved": True}, answered_by=by),
        "history": [*item.history, HistoryEntry(action=HistoryAction.ANSWER, by=by, at=now)],
    })


def _answer(item: InboxItem, *, target: str, key: str | None = None) -> InboxMessage:
    return InboxMessage(
        id=new_id("msg"), tenant_id=item.tenant_id, target_process_id=target,
        idempotency_key=key,
        message=InboxAnswer(inbox_item_id=item.id, item_type="approval", answer={"ok": True}))


def _ids(items: list[InboxItem]) -> list[str]:
    return [item.id for item in items]


# ── create and get ────────────────────────────────────────────────────────
def test_an_item_round_trips_whole(store: Store, world: World) -> None:
    item = world.item(
        "ten_1", origin_process_id="proc_1", origin_session_id="ses_1", idempotency_key="k",
        type=ItemType.DECISION, criticality=C.CRITICAL, tags=["analysis", "review"],
        body="Which one?", payload={"options": ["a", "b"], "nested": {"n": 1}},
        history=[HistoryEntry(action=HistoryAction.CREATE, by="usr_1")])
    assert store.create_inbox_item(item) == (item, True)
    assert store.get_inbox_item("ten_1", item.id) == item
    answered = _answered(item)
    store.save_inbox_item(answered, expected_revision=0)
    assert store.get_inbox_item("ten_1", item.id) == answered.model_copy(update={"revision": 1})


def test_a_repeated_origin_and_key_returns_the_first_and_stores_nothing(
    store: Store, world: World
) -> None:
    first = world.add_item("ten_1", origin_process_id="proc_1", idempotency_key="ask-1")
    again = world.item("ten_1", origin_process_id="proc_1", idempotency_key="ask-1",
                       title="A second title")
    assert store.create_inbox_item(again) == (first, False)
    with pytest.raises(NotFound):
        store.get_inbox_item("ten_1", again.id)
    assert store.list_inbox_items("ten_1", InboxQuery()) == [first]


def test_the_first_is_returned_as_stored_now(store: Store, world: World) -> None:
    first = world.add_item("ten_1", origin_process_id="proc_1", idempotency_key="ask-1")
    saved = store.save_inbox_item(_answered(first), expected_revision=0)
    again = world.item("ten_1", origin_process_id="proc_1", idempotency_key="ask-1")
    assert store.create_inbox_item(again) == (saved, False)


def test_idempotency_needs_both_origin_and_key_and_is_per_tenant_and_process(
    store: Store, world: World
) -> None:
    for fields in ({"idempotency_key": "k"}, {"idempotency_key": "k"},
                   {"origin_process_id": "proc_1"}, {"origin_process_id": "proc_1"},
                   {"origin_process_id": "proc_1", "idempotency_key": "k"},
                   {"origin_process_id": "proc_2", "idempotency_key": "k"}):
        world.add_item("ten_1", **fields)
    world.add_item("ten_2", origin_process_id="proc_1", idempotency_key="k")
    assert len(store.list_inbox_items("ten_1", InboxQuery())) == 6
    assert len(store.list_inbox_items("ten_2", InboxQuery())) == 1


# mongomock is not thread-safe: SQLite and (with VANCETOPE_TEST_MONGO_URL) the real server race.
@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "mongomock"], indirect=True)
def test_concurrent_idempotent_creates_store_one_item(
    backend: Backend, world: World
) -> None:
    stores = [backend.open_store() for _ in range(8)]
    barrier = threading.Barrier(len(stores))
    results: list[tuple[InboxItem, bool]] = []

    def create(store: Store, n: int) -> None:
        item = world.item("ten_1", origin_process_id="proc_1", idempotency_key="race",
                          title=f"attempt {n}")
        barrier.wait()
        results.append(store.create_inbox_item(item))

    threads = [threading.Thread(target=create, args=(s, n)) for n, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(results) == len(stores)
    winners = [item for item, created in results if created]
    assert len(winners) == 1
    assert {item.id for item, _ in results} == {winners[0].id}
    assert stores[0].list_inbox_items("ten_1", InboxQuery()) == winners


def test_a_duplicate_item_id_conflicts(store: Store, world: World) -> None:
    item = world.add_item("ten_1")
    with pytest.raises(Conflict):
        store.create_inbox_item(item.model_copy(update={"title": "other"}))
    assert store.get_inbox_item("ten_1", item.id) == item


def test_another_tenants_item_is_missing(store: Store, world: World) -> None:
    item = world.add_item("ten_1")
    with pytest.raises(NotFound):
        store.get_inbox_item("ten_2", item.id)
    foreign = _answered(item).model_copy(update={"tenant_id": "ten_2"})
    with pytest.raises(NotFound):
        store.save_inbox_item(foreign, expected_revision=0)
    assert store.get_inbox_item("ten_1", item.id) == item
    assert store.list_inbox_items("ten_2", InboxQuery()) == []
    assert store.inbox_pending_counts("ten_2", "usr_1") == ({}, None)


# ── save: compare-and-set, with the answer for the process ───────────────
def test_a_save_increments_the_revision(store: Store, world: World) -> None:
    item = world.add_item("ten_1")
    answered = store.save_inbox_item(_answered(item), expected_revision=0)
    assert answered.revision == 1
    assert answered.status is S.ANSWERED
    archived = store.save_inbox_item(
        answered.model_copy(update={"status": S.ARCHIVED, "archived_at": utcnow()}),
        expected_revision=1)
    assert archived.revision == 2
    assert store.get_inbox_item("ten_1", item.id) == archived


def test_a_stale_revision_conflicts_and_writes_nothing(store: Store, world: World) -> None:
    process = world.process("ten_1")
    item = world.add_item("ten_1", origin_process_id=process.id)
    saved = store.save_inbox_item(_answered(item, by="usr_1"), expected_revision=0)
    late = _answered(item, by="usr_2").model_copy(update={"title": "late"})
    with pytest.raises(Conflict):
        store.save_inbox_item(late, expected_revision=0,
                              message=_answer(item, target=process.id))
    assert store.get_inbox_item("ten_1", item.id) == saved
    assert store.pending_messages("ten_1", process.id) == []


def test_saving_a_missing_item_is_not_found(store: Store, world: World) -> None:
    process = world.process("ten_1")
    item = world.item("ten_1")
    with pytest.raises(NotFound):
        store.save_inbox_item(item, expected_revision=0, message=_answer(item, target=process.id))
    assert store.pending_messages("ten_1", process.id) == []


def test_the_message_is_appended_with_the_next_seq_and_pending(
    store: Store, world: World
) -> None:
    process = world.process("ten_1")
    earlier = world.append("ten_1", process.id)
    item = world.add_item("ten_1", origin_process_id=process.id)
    message = _answer(item, target=process.id, key=f"answer:{item.id}")
    saved = store.save_inbox_item(_answered(item), expected_revision=0, message=message)
    assert saved.revision == 1
    assert store.pending_messages("ten_1", process.id) == [
        earlier, message.model_copy(update={"seq": 2})]
    assert store.get_process("ten_1", process.id).next_seq == 2


def test_a_save_cut_short_is_all_or_nothing_once_redelivered(
    store: Store, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash while the message is being appended: either the whole save is undone, or the
    item is saved and ``redeliver_inbox_messages`` appends its message — exactly once."""
    process = world.process("ten_1")
    item = world.add_item("ten_1", origin_process_id=process.id)
    message = _answer(item, target=process.id, key=f"answer:{item.id}")

    def crash(*args: Any) -> None:
        raise RuntimeError("the worker died here")

    for name in ("append_message", "_append_in"):  # the adapters' append paths
        monkeypatch.setattr(store, name, crash, raising=False)
    with pytest.raises(RuntimeError):
        store.save_inbox_item(_answered(item), expected_revision=0, message=message)
    monkeypatch.undo()
    store.redeliver_inbox_messages()
    assert store.redeliver_inbox_messages() == 0
    saved = store.get_inbox_item("ten_1", item.id)
    pending = store.pending_messages("ten_1", process.id)
    if saved.revision == 0:
        assert saved == item and pending == []
    else:
        assert saved.status is S.ANSWERED
        assert [m.id for m in pending] == [message.id]


def test_a_missing_target_is_not_found_and_leaves_the_item_unchanged(
    store: Store, world: World
) -> None:
    item = world.add_item("ten_1", origin_process_id="proc_gone")
    with pytest.raises(NotFound):
        store.save_inbox_item(_answered(item), expected_revision=0,
                              message=_answer(item, target="proc_gone"))
    assert store.get_inbox_item("ten_1", item.id) == item
    assert store.save_inbox_item(_answered(item), expected_revision=0).revision == 1


def test_a_target_in_another_tenant_is_not_found(store: Store, world: World) -> None:
    foreign = world.process("ten_2")
    item = world.add_item("ten_1")
    with pytest.raises(NotFound):
        store.save_inbox_item(_answered(item), expected_revision=0,
                              message=_answer(item, target=foreign.id))
    assert store.get_inbox_item("ten_1", item.id) == item
    assert store.pending_messages("ten_2", foreign.id) == []


# ── listing ───────────────────────────────────────────────────────────────
def test_items_are_listed_newest_first_then_by_id_descending(
    store: Store, world: World
) -> None:
    base = utcnow() - timedelta(hours=1)
    old = world.add_item("ten_1", id="itm_m", created_at=base)
    tie_a = world.add_item("ten_1", id="itm_a", created_at=base + timedelta(seconds=1))
    new = world.add_item("ten_1", id="itm_0", created_at=base + timedelta(seconds=2))
    tie_b = world.add_item("ten_1", id="itm_b", created_at=base + timedelta(seconds=1))
    assert store.list_inbox_items("ten_1", InboxQuery()) == [new, tie_b, tie_a, old]
    assert store.list_inbox_items("ten_1", InboxQuery(limit=2)) == [new, tie_b]
    with pytest.raises(ValueError, match="at least 1"):
        InboxQuery(limit=0)


def test_paging_with_before_crosses_equal_timestamps(store: Store, world: World) -> None:
    at = utcnow() - timedelta(hours=1)
    same = [world.add_item("ten_1", id=f"itm_{c}", created_at=at) for c in "abcde"]
    older = world.add_item("ten_1", id="itm_z", created_at=at - timedelta(milliseconds=1))
    pages, before = [], None
    while True:
        page = store.list_inbox_items("ten_1", InboxQuery(before=before, limit=2))
        if not page:
            break
        pages.append(_ids(page))
        before = (page[-1].created_at, page[-1].id)
    assert pages == [["itm_e", "itm_d"], ["itm_c", "itm_b"], ["itm_a", older.id]]
    assert _ids(same) == ["itm_a", "itm_b", "itm_c", "itm_d", "itm_e"]


def test_list_filters_by_assignee_status_criticality_session_and_process(
    store: Store, world: World
) -> None:
    mine = world.add_item("ten_1", assigned_to="usr_1", criticality=C.CRITICAL,
                          origin_session_id="ses_1", origin_process_id="proc_1")
    mine_low = world.add_item("ten_1", assigned_to="usr_1", criticality=C.LOW,
                              origin_session_id="ses_2", origin_process_id="proc_2")
    mine_done = world.add_item("ten_1", assigned_to="usr_1", status=S.ANSWERED,
                               origin_session_id="ses_1", origin_process_id="proc_1")
    theirs = world.add_item("ten_1", assigned_to="usr_2", origin_session_id="ses_1")

    def ids(**filters: Any) -> set[str]:
        return set(_ids(store.list_inbox_items("ten_1", InboxQuery(**filters))))

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


def test_list_filters_by_every_given_tag(store: Store, world: World) -> None:
    both = world.add_item("ten_1", tags=["analysis", "review"])
    one = world.add_item("ten_1", tags=["analysis"])
    world.add_item("ten_1", tags=[])
    world.add_item("ten_1", tags=["analysis-review"])

    def ids(*tags: str) -> set[str]:
        return set(_ids(store.list_inbox_items("ten_1", InboxQuery(tags=tags))))

    assert ids("analysis") == {both.id, one.id}
    assert ids("analysis", "review") == {both.id}
    assert ids("review", "analysis") == {both.id}
    assert ids("analysis", "missing") == set()
    assert len(ids()) == 4


def test_list_filters_by_requires_action(store: Store, world: World) -> None:
    ask = world.add_item("ten_1", origin_process_id="proc_1")
    output = world.add_item("ten_1", origin_process_id="proc_1", type=ItemType.OUTPUT_TEXT,
                            requires_action=False)

    def ids(requires_action: bool | None) -> set[str]:
        query = InboxQuery(origin_process_id="proc_1", requires_action=requires_action)
        return set(_ids(store.list_inbox_items("ten_1", query)))

    assert ids(True) == {ask.id}
    assert ids(False) == {output.id}
    assert ids(None) == {ask.id, output.id}


def test_list_filters_by_resolved_before(store: Store, world: World) -> None:
    now = utcnow()
    long_ago = world.add_item("ten_1", status=S.ANSWERED, resolved_at=now - timedelta(days=40))
    world.add_item("ten_1", status=S.DISMISSED, resolved_at=now - timedelta(days=2))
    world.add_item("ten_1")  # unresolved: never "resolved before"
    query = InboxQuery(resolved_before=now - timedelta(days=30))
    assert store.list_inbox_items("ten_1", query) == [long_ago]


def test_a_save_moves_the_item_between_filters(store: Store, world: World) -> None:
    item = world.add_item("ten_1", tags=["a"])
    pending = InboxQuery(assigned_to="usr_1", statuses=frozenset({S.PENDING}))
    store.save_inbox_item(item.model_copy(update={"assigned_to_user_id": "usr_2",
                                                  "tags": ["b"]}), expected_revision=0)
    assert store.list_inbox_items("ten_1", pending) == []
    assert _ids(store.list_inbox_items("ten_1", InboxQuery(assigned_to="usr_2",
                                                           tags=("b",)))) == [item.id]
    assert store.list_inbox_items("ten_1", InboxQuery(tags=("a",))) == []


# ── the pending summary ───────────────────────────────────────────────────
def test_pending_counts_per_criticality_and_the_oldest(store: Store, world: World) -> None:
    oldest = utcnow() - timedelta(hours=3)
    world.add_item("ten_1", criticality=C.LOW, created_at=oldest + timedelta(hours=1))
    world.add_item("ten_1", criticality=C.LOW, created_at=oldest)
    world.add_item("ten_1", criticality=C.NORMAL)
    world.add_item("ten_1", criticality=C.CRITICAL, status=S.ANSWERED,
                   created_at=oldest - timedelta(hours=1))
    world.add_item("ten_1", assigned_to="usr_2", criticality=C.CRITICAL)
    world.add_item("ten_2", criticality=C.CRITICAL)
    counts, since = store.inbox_pending_counts("ten_1", "usr_1")
    assert counts == {"LOW": 2, "NORMAL": 1}
    assert since == oldest
    assert since is not None and since.utcoffset() == timedelta(0)
    assert store.inbox_pending_counts("ten_1", "usr_2")[0] == {"CRITICAL": 1}
    assert store.inbox_pending_counts("ten_1", "usr_3") == ({}, None)
