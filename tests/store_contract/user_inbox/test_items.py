"""The user Inbox: idempotent creates, and compare-and-set saves with their message."""

from __future__ import annotations

import sys
import threading
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
from vancetope_brain.store import LaneStore, SessionStore, UserInboxStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import Storage, World

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
        message=InboxAnswer(inbox_item_id=item.id, item_type="APPROVAL", answer=AnswerPayload(
            outcome=Outcome.DECIDED, value={"approved": True}, answered_by="user_1")))


# ── create and get ────────────────────────────────────────────────────────
def test_an_item_round_trips_whole(user_inbox: UserInboxStore, world: World) -> None:
    item = world.item(
        "ten_1", origin_process_id="proc_1", origin_session_id="ses_1", idempotency_key="k",
        type=ItemType.DECISION, criticality=C.CRITICAL, tags=["analysis", "review"],
        body="Which one?", payload={"options": ["a", "b"], "nested": {"n": 1}},
        history=[HistoryEntry(action=HistoryAction.CREATE, by="usr_1")])
    assert user_inbox.create_inbox_item(item) == (item, True)
    assert user_inbox.get_inbox_item("ten_1", item.id) == item
    answered = _answered(item)
    user_inbox.save_inbox_item(answered, expected_revision=0)
    assert user_inbox.get_inbox_item("ten_1", item.id) == answered.model_copy(update={"revision": 1})


def test_a_repeated_origin_and_key_returns_the_first_and_stores_nothing(
    user_inbox: UserInboxStore, world: World
) -> None:
    first = world.add_item("ten_1", origin_process_id="proc_1", idempotency_key="ask-1")
    again = world.item("ten_1", origin_process_id="proc_1", idempotency_key="ask-1",
                       title="A second title")
    assert user_inbox.create_inbox_item(again) == (first, False)
    with pytest.raises(NotFound):
        user_inbox.get_inbox_item("ten_1", again.id)
    assert user_inbox.list_inbox_items("ten_1", InboxQuery()) == [first]


def test_the_first_is_returned_as_stored_now(user_inbox: UserInboxStore, world: World) -> None:
    first = world.add_item("ten_1", origin_process_id="proc_1", idempotency_key="ask-1")
    saved = user_inbox.save_inbox_item(_answered(first), expected_revision=0)
    again = world.item("ten_1", origin_process_id="proc_1", idempotency_key="ask-1")
    assert user_inbox.create_inbox_item(again) == (saved, False)


def test_idempotency_needs_both_origin_and_key_and_is_per_tenant_and_process(
    user_inbox: UserInboxStore, world: World
) -> None:
    for fields in ({"idempotency_key": "k"}, {"idempotency_key": "k"},
                   {"origin_process_id": "proc_1"}, {"origin_process_id": "proc_1"},
                   {"origin_process_id": "proc_1", "idempotency_key": "k"},
                   {"origin_process_id": "proc_2", "idempotency_key": "k"}):
        world.add_item("ten_1", **fields)
    world.add_item("ten_2", origin_process_id="proc_1", idempotency_key="k")
    assert len(user_inbox.list_inbox_items("ten_1", InboxQuery())) == 6
    assert len(user_inbox.list_inbox_items("ten_2", InboxQuery())) == 1


def test_concurrent_idempotent_creates_store_one_item(storage: Storage, world: World) -> None:
    stores = [storage.open_backend().port(UserInboxStore) for _ in range(8)]
    barrier = threading.Barrier(len(stores))
    results: list[tuple[InboxItem, bool]] = []

    def create(store: UserInboxStore, n: int) -> None:
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


def test_a_duplicate_item_id_conflicts(user_inbox: UserInboxStore, world: World) -> None:
    item = world.add_item("ten_1")
    with pytest.raises(Conflict):
        user_inbox.create_inbox_item(item.model_copy(update={"title": "other"}))
    assert user_inbox.get_inbox_item("ten_1", item.id) == item


def test_another_tenants_item_is_missing(user_inbox: UserInboxStore, world: World) -> None:
    item = world.add_item("ten_1")
    with pytest.raises(NotFound):
        user_inbox.get_inbox_item("ten_2", item.id)
    foreign = _answered(item).model_copy(update={"tenant_id": "ten_2"})
    with pytest.raises(NotFound):
        user_inbox.save_inbox_item(foreign, expected_revision=0)
    assert user_inbox.get_inbox_item("ten_1", item.id) == item
    assert user_inbox.list_inbox_items("ten_2", InboxQuery()) == []
    assert user_inbox.inbox_pending_counts("ten_2", "usr_1") == ({}, None)


# ── save: compare-and-set, with the answer for the process ───────────────
def test_a_save_increments_the_revision(user_inbox: UserInboxStore, world: World) -> None:
    item = world.add_item("ten_1")
    answered = user_inbox.save_inbox_item(_answered(item), expected_revision=0)
    assert answered.revision == 1
    assert answered.status is S.ANSWERED
    archived = user_inbox.save_inbox_item(
        answered.model_copy(update={"status": S.ARCHIVED, "archived_at": utcnow()}),
        expected_revision=1)
    assert archived.revision == 2
    assert user_inbox.get_inbox_item("ten_1", item.id) == archived


def test_a_stale_revision_conflicts_and_writes_nothing(
    lanes: LaneStore, user_inbox: UserInboxStore, world: World
) -> None:
    process = world.process("ten_1")
    item = world.add_item("ten_1", origin_process_id=process.id)
    saved = user_inbox.save_inbox_item(_answered(item, by="usr_1"), expected_revision=0)
    late = _answered(item, by="usr_2").model_copy(update={"title": "late"})
    with pytest.raises(Conflict):
        user_inbox.save_inbox_item(late, expected_revision=0,
                              message=_answer(item, target=process.id))
    assert user_inbox.get_inbox_item("ten_1", item.id) == saved
    assert lanes.pending_messages("ten_1", process.id) == []


def test_saving_a_missing_item_is_not_found(
    lanes: LaneStore, user_inbox: UserInboxStore, world: World
) -> None:
    process = world.process("ten_1")
    item = world.item("ten_1")
    with pytest.raises(NotFound):
        user_inbox.save_inbox_item(item, expected_revision=0, message=_answer(item, target=process.id))
    assert lanes.pending_messages("ten_1", process.id) == []


def test_the_message_is_appended_with_the_next_seq_and_pending(
    sessions: SessionStore, lanes: LaneStore, user_inbox: UserInboxStore, world: World
) -> None:
    process = world.process("ten_1")
    earlier = world.append("ten_1", process.id)
    item = world.add_item("ten_1", origin_process_id=process.id)
    message = _answer(item, target=process.id, key=f"answer:{item.id}")
    saved = user_inbox.save_inbox_item(_answered(item), expected_revision=0, message=message)
    assert saved.revision == 1
    assert lanes.pending_messages("ten_1", process.id) == [
        earlier, message.model_copy(update={"seq": 2})]
    assert sessions.get_process("ten_1", process.id).next_seq == 2


def test_a_save_cut_short_is_all_or_nothing_once_redelivered(
    lanes: LaneStore, user_inbox: UserInboxStore, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash while the message is being appended: either the whole save is undone, or the
    item is saved and ``redeliver_inbox_messages`` appends its message — exactly once."""
    process = world.process("ten_1")
    item = world.add_item("ten_1", origin_process_id=process.id)
    message = _answer(item, target=process.id, key=f"answer:{item.id}")

    def crash(*args: Any) -> None:
        raise RuntimeError("the worker died here")

    # Every adapter's user Inbox module appends through the lanes adapter's ``append_in``.
    monkeypatch.setattr(sys.modules[type(user_inbox).__module__], "append_in", crash)
    with pytest.raises(RuntimeError):
        user_inbox.save_inbox_item(_answered(item), expected_revision=0, message=message)
    monkeypatch.undo()
    user_inbox.redeliver_inbox_messages()
    assert user_inbox.redeliver_inbox_messages() == 0
    saved = user_inbox.get_inbox_item("ten_1", item.id)
    pending = lanes.pending_messages("ten_1", process.id)
    if saved.revision == 0:
        assert saved == item and pending == []
    else:
        assert saved.status is S.ANSWERED
        assert [m.id for m in pending] == [message.id]


def test_a_missing_target_is_not_found_and_leaves_the_item_unchanged(
    user_inbox: UserInboxStore, world: World
) -> None:
    item = world.add_item("ten_1", origin_process_id="proc_gone")
    with pytest.raises(NotFound):
        user_inbox.save_inbox_item(_answered(item), expected_revision=0,
                              message=_answer(item, target="proc_gone"))
    assert user_inbox.get_inbox_item("ten_1", item.id) == item
    assert user_inbox.save_inbox_item(_answered(item), expected_revision=0).revision == 1


def test_a_target_in_another_tenant_is_not_found(
    lanes: LaneStore, user_inbox: UserInboxStore, world: World
) -> None:
    foreign = world.process("ten_2")
    item = world.add_item("ten_1")
    with pytest.raises(NotFound):
        user_inbox.save_inbox_item(_answered(item), expected_revision=0,
                              message=_answer(item, target=foreign.id))
    assert user_inbox.get_inbox_item("ten_1", item.id) == item
    assert lanes.pending_messages("ten_2", foreign.id) == []
