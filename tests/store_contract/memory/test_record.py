"""Memory entries: recorded whole, once per idempotency key, within their scope's cap
(atomically: a refused entry leaves no trace), listed by scope newest first, deleted; another
tenant sees nothing, even under the same scope ids."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.store_contract.memory._entries import entry, project
from vancetope_brain.errors import Conflict, MemoryFull, NotFound
from vancetope_brain.models.memory import MemoryKind, MemoryScope, ScopeRef
from vancetope_brain.store import MemoryStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import Storage


def test_a_recorded_entry_reads_back_whole(memory: MemoryStore, storage: Storage) -> None:
    note = entry(tags=["launch", "plan"], source="marvin:aggregate", kind=MemoryKind.REPORT)
    assert memory.record(note) == (note, True)
    assert memory.get_memory("ten_a", note.id) == note
    assert memory.list_memory("ten_a", [project()]) == [note]
    again = storage.open_backend().port(MemoryStore)
    assert again.get_memory("ten_a", note.id) == note
    assert again.get_memory("ten_a", note.id).schema_version == 1


def test_another_tenant_sees_nothing_under_the_same_scope_ids(memory: MemoryStore) -> None:
    ours = entry("the launch moved to Friday")
    memory.record(ours)
    scopes = [project(), ScopeRef(MemoryScope.TENANT, "ten_a")]
    with pytest.raises(NotFound):
        memory.get_memory("ten_b", ours.id)
    assert memory.list_memory("ten_b", scopes) == []
    assert memory.search_memory("ten_b", scopes, "launch Friday") == []
    with pytest.raises(NotFound):
        memory.delete_memory("ten_b", ours.id)
    theirs = entry("their launch is on Monday", tenant="ten_b")
    memory.record(theirs)  # same project id, same process id: another tenant's
    assert memory.list_memory("ten_a", [project()]) == [ours]
    assert [hit.entry for hit in memory.search_memory("ten_a", [project()], "launch")] == [ours]
    assert memory.list_memory("ten_b", [project()]) == [theirs]


def test_a_repeated_idempotency_key_stores_nothing(memory: MemoryStore) -> None:
    first = entry("turn 1 noted", idempotency_key="turn-7", scope=MemoryScope.PROCESS)
    assert memory.record(first) == (first, True)
    rerun = entry("turn 1 noted again", idempotency_key="turn-7", scope=MemoryScope.PROCESS)
    assert memory.record(rerun) == (first, False)
    other = entry("another process's turn", idempotency_key="turn-7", process="proc_2",
                  scope=MemoryScope.PROCESS, minute=1)
    assert memory.record(other) == (other, True)
    scopes = [ScopeRef(MemoryScope.PROCESS, "proc_1"), ScopeRef(MemoryScope.PROCESS, "proc_2")]
    assert memory.list_memory("ten_a", scopes) == [other, first]
    with pytest.raises(NotFound):
        memory.get_memory("ten_a", rerun.id)


def test_a_full_scope_refuses_with_a_stable_code_and_stores_nothing(
        memory: MemoryStore) -> None:
    kept = [entry(f"note {i}", minute=i, idempotency_key=f"k{i}") for i in range(2)]
    for note in kept:
        memory.record(note, limit=2)
    over = entry("one too many notes", minute=5)
    with pytest.raises(MemoryFull) as refused:
        memory.record(over, limit=2)
    assert refused.value.code == "memory_full"
    with pytest.raises(NotFound):
        memory.get_memory("ten_a", over.id)
    assert memory.list_memory("ten_a", [project()]) == kept[::-1]
    assert memory.search_memory("ten_a", [project()], "many") == []
    # A replay of a recorded key is not a new entry: it answers, full or not.
    replay = entry("note 0", idempotency_key="k0")
    assert memory.record(replay, limit=2) == (kept[0], False)
    # Another scope has its own cap; a deletion frees a slot.
    elsewhere = entry("a session note", scope=MemoryScope.SESSION)
    assert memory.record(elsewhere, limit=2)[1]
    memory.delete_memory("ten_a", kept[0].id)
    assert memory.record(over, limit=2) == (over, True)
    with pytest.raises(MemoryFull):
        memory.record(entry("and again"), limit=2)


def test_an_existing_id_is_a_conflict(memory: MemoryStore) -> None:
    note = entry()
    memory.record(note)
    with pytest.raises(Conflict):
        memory.record(note.model_copy(update={"text": "other"}))
    assert memory.get_memory("ten_a", note.id) == note
    assert memory.list_memory("ten_a", [project()]) == [note]


def test_listing_reads_only_the_scopes_asked_newest_first(memory: MemoryStore) -> None:
    by_scope = {scope: entry(f"{scope} note", scope=scope, minute=i)
                for i, scope in enumerate(MemoryScope)}
    for note in by_scope.values():
        memory.record(note)
    memory.record(entry("another project's note", project="prj_2", minute=9))
    chain = [note.scope_ref for note in by_scope.values()]
    assert memory.list_memory("ten_a", chain) == list(by_scope.values())[::-1]
    assert memory.list_memory("ten_a", chain[:2]) == [by_scope[MemoryScope.SESSION],
                                                     by_scope[MemoryScope.PROCESS]]
    assert memory.list_memory("ten_a", chain, limit=2) == [by_scope[MemoryScope.TENANT],
                                                          by_scope[MemoryScope.GROUP]]
    assert memory.list_memory("ten_a", []) == []
    assert memory.list_memory("ten_a", chain, limit=0) == []


def test_listing_filters_kinds_and_breaks_ties_by_id(memory: MemoryStore) -> None:
    same_time = [entry(f"decision {i}", id=f"mem_{i}", kind=MemoryKind.DECISION)
                 for i in (3, 1, 2)]
    report = entry("the report", kind=MemoryKind.REPORT, minute=-1)
    for note in [*same_time, report]:
        memory.record(note)
    assert [e.id for e in memory.list_memory("ten_a", [project()])] == [
        "mem_3", "mem_2", "mem_1", report.id]
    assert memory.list_memory("ten_a", [project()], kinds=[MemoryKind.REPORT]) == [report]
    assert memory.list_memory("ten_a", [project()], kinds=[]) == []
    assert len(memory.list_memory("ten_a", [project()],
                                  kinds=[MemoryKind.DECISION, MemoryKind.TURN])) == 3


def test_a_deleted_entry_is_gone_everywhere(memory: MemoryStore) -> None:
    note = entry("the launch moved")
    memory.record(note)
    memory.delete_memory("ten_a", note.id)
    with pytest.raises(NotFound):
        memory.get_memory("ten_a", note.id)
    with pytest.raises(NotFound):
        memory.delete_memory("ten_a", note.id)
    assert memory.list_memory("ten_a", [project()]) == []
    assert memory.search_memory("ten_a", [project()], "launch") == []


def test_too_many_scopes_at_once_is_a_caller_error(memory: MemoryStore) -> None:
    scopes = [project(f"prj_{i}") for i in range(9)]
    with pytest.raises(ValueError, match="at most 8 scopes"):
        memory.list_memory("ten_a", scopes)
    with pytest.raises(ValueError, match="at most 8 scopes"):
        memory.search_memory("ten_a", scopes, "launch")
