"""A used store exported page by page and imported into a fresh store of the same backend
exports again the same records, kind by kind and in order, and behaves the same through
every port: the lists keep their order, a lane carries on after its imported messages, and
the search indexes and counters the adapter derives are rebuilt."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

import pytest

from tests.store_contract.transfer._used import (
    NOT_EVERYWHERE,
    Used,
    build,
    export_store,
    import_store,
    searched,
    seen,
)
from vancetope_brain.errors import MemoryFull
from vancetope_brain.store import (
    Backend,
    DeadLetterStore,
    IdentityStore,
    LaneStore,
    MemoryStore,
    SessionStore,
    TransferStore,
)
from vancetope_brain.store.transfer import KINDS

if TYPE_CHECKING:
    from tests.store_contract.conftest import Storage, World


@pytest.fixture
def used(backend: Backend, world: World) -> Used:
    return build(backend, world)


@pytest.fixture
def imported(backend: Backend, used: Used, other_storage: Storage) -> Backend:
    """A fresh store of the same backend holding an import of ``backend``'s export."""
    target = other_storage.open_backend()
    assert target.port(TransferStore).is_empty()
    exported = export_store(backend.port(TransferStore))
    assert all(exported[kind.name] or kind.name in NOT_EVERYWHERE for kind in KINDS)
    written = import_store(target.port(TransferStore), exported)
    assert written == {kind: len(records) for kind, records in exported.items()}
    return target


def test_an_imported_store_exports_the_same_records_kind_by_kind_in_order(
        backend: Backend, imported: Backend) -> None:
    before = export_store(backend.port(TransferStore))
    after = export_store(imported.port(TransferStore))
    for kind in KINDS:
        assert after[kind.name] == before[kind.name], kind.name
        for record in before[kind.name]:
            assert list(record) == list(kind.columns), kind.name  # the record form, exactly
            for column, typ in kind.columns.items():
                assert _travels_as(typ, record[column]), (kind.name, column, record[column])


def _travels_as(typ: str, value: Any) -> bool:
    """Whether ``value`` is in the record form of a column of type ``typ``."""
    if value is None:
        return typ in ("text", "int")
    if typ == "bytes":
        return isinstance(value, str) and base64.b64encode(base64.b64decode(value)) == \
            value.encode()
    kinds = {"text": str, "int": int, "bool": bool, "json": dict}
    return isinstance(value, kinds[typ]) and (typ == "bool" or not isinstance(value, bool))


def test_an_imported_store_lists_and_finds_what_the_used_one_did(
        backend: Backend, used: Used, imported: Backend) -> None:
    expected = seen(backend, used)
    assert seen(imported, used) == expected
    live, _, revoked = expected["tokens by hash"]  # a revoked token stays refused
    assert live is not None and revoked is None
    tenant = used.tenants[0]
    listed = backend.port(IdentityStore).list_tokens(tenant, used.users[tenant][0])
    assert [token.revoked for token in listed] == [False, False, True]


def test_the_searches_find_the_same_on_the_imported_store(
        backend: Backend, used: Used, imported: Backend) -> None:
    expected = searched(backend, used)
    assert all(expected["sessions"].values())  # an imported chat line must be found
    deploys, budget, tuesdays, approvals = expected["chunks"]
    assert deploys and budget and approvals and all(expected["memory"])
    assert tuesdays == []  # only in the chunks of a version since replaced
    assert all(expected["vectors"]) and all(expected["read"][:2])
    assert searched(imported, used) == expected


def test_a_lane_carries_on_after_its_imported_messages(
        backend: Backend, used: Used, imported: Backend, world: World) -> None:
    tenant, process = used.lane
    target = imported.port(LaneStore)
    pending = target.pending_messages(tenant, process)
    assert [m.message.content for m in pending] == ["three", "four"]  # type: ignore[union-attr]
    drained = backend.port(DeadLetterStore).dead_letters(tenant)[0]
    # The next message of each store takes the same seq, after the imported ones.
    for store in (backend.port(LaneStore), target):
        stored, created = store.append_message(world.message(tenant, process, "five"))
        assert created and stored.seq == pending[-1].seq + 1
    again, created = target.append_message(world.message(tenant, process, "six", key="key-four"))
    assert not created and again.id == pending[-1].id  # idempotency keys came along
    epoch = target.acquire_epoch(tenant, process).epoch
    process_doc = imported.port(SessionStore).get_process(tenant, process)
    assert target.commit_turn(tenant, process, epoch, world.turn(
        process_doc, epoch, drained=[drained.id])) is None  # already drained: refused
    ids = [m.id for m in target.pending_messages(tenant, process)]
    assert len(ids) == 3
    assert target.commit_turn(tenant, process, epoch, world.turn(process_doc, epoch,
                                                                  drained=ids)) is not None
    assert target.pending_messages(tenant, process) == []
    assert imported.port(DeadLetterStore).dead_letters(tenant) == [drained]


def test_a_memory_scope_counts_its_imported_entries_against_its_cap(
        backend: Backend, used: Used, imported: Backend) -> None:
    from tests.store_contract.memory._entries import entry

    tenant = used.tenants[0]
    scope = used.memory_scopes[0]
    memory = imported.port(MemoryStore)
    held = len(memory.list_memory(tenant, [scope], limit=50))
    assert held == 2
    new = entry("One more note.", tenant=tenant, scope=scope.level, project=scope.id)
    with pytest.raises(MemoryFull):
        memory.record(new, limit=held)
    assert memory.record(new, limit=held + 1) == (new, True)
    found = memory.search_memory(tenant, [scope], "note launch")
    assert {hit.entry.id for hit in found} >= {new.id}
    for hit in memory.list_memory(tenant, [scope], limit=50):
        memory.delete_memory(tenant, hit.id)
    assert memory.search_memory(tenant, [scope], "launch friday budget note") == []
    assert memory.record(new.model_copy(update={"id": new.id + "x"}), limit=1)[1]
