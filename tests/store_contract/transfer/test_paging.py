"""Paging and re-running: any page size reads the same records; importing records already
stored writes nothing and changes nothing; a kind the store does not know is refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from tests.store_contract.transfer._used import (
    INSIDE_A_PARENT,
    NOT_EVERYWHERE,
    build,
    export_all,
    export_store,
    import_store,
    searched,
    seen,
)
from vancetope_brain.errors import InvalidInput
from vancetope_brain.store import Backend, TransferStore
from vancetope_brain.store.transfer import KINDS

if TYPE_CHECKING:
    from tests.store_contract.conftest import Storage, World


def test_pages_of_one_record_read_what_one_large_page_does(
        backend: Backend, world: World) -> None:
    build(backend, world)
    transfer = backend.port(TransferStore)
    for kind in KINDS:
        whole, cursor = transfer.export_page(kind.name, None, 10_000)
        assert cursor is None and (whole or kind.name in NOT_EVERYWHERE), kind.name
        assert export_all(transfer, kind.name, 1) == whole, kind.name
        assert export_all(transfer, kind.name, max(len(whole), 1)) == whole, kind.name


def test_kinds_not_in_insertion_order_come_in_the_byte_order_of_their_keys(
        backend: Backend, world: World) -> None:
    build(backend, world)
    transfer = backend.port(TransferStore)
    for kind in KINDS:
        if kind.insertion_ordered:
            continue
        keys = [tuple(record[column] for column in kind.key)
                for record in export_all(transfer, kind.name)]
        assert keys == sorted(keys, key=_bytewise), kind.name
        assert len(set(keys)) == len(keys), kind.name
    servers = [r["server"] for r in export_all(transfer, "tool_health")]
    assert servers == ["Zeta", "files", "search", "émile"]


def _bytewise(key: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(part.encode() if isinstance(part, str) else part for part in key)


def test_importing_the_same_records_again_writes_nothing_and_changes_nothing(
        backend: Backend, world: World, other_storage: Storage) -> None:
    used = build(backend, world)
    exported = export_store(backend.port(TransferStore))
    opened = other_storage.open_backend()
    target = opened.port(TransferStore)
    first = import_store(target, exported, limit=1000)
    assert first == {kind: len(records) for kind, records in exported.items()}
    shown, found = seen(opened, used), searched(opened, used)
    assert import_store(target, exported) == dict.fromkeys(exported, 0)
    assert export_store(target) == exported
    assert (seen(opened, used), searched(opened, used)) == (shown, found)  # nothing counted twice


@pytest.mark.parametrize("cut", ["lanes", "chat", "memory_entries", "knowledge_chunks"])
def test_an_import_interrupted_in_a_kind_completes_when_run_again(
        backend: Backend, world: World, other_storage: Storage, cut: str) -> None:
    build(backend, world)
    exported = export_store(backend.port(TransferStore))
    target = other_storage.open_backend().port(TransferStore)
    names = [kind.name for kind in KINDS]
    done = {kind: exported[kind] if names.index(kind) < names.index(cut)
            else exported[kind][:len(exported[kind]) // 2] if kind == cut else []
            for kind in names}  # the kinds before ``cut`` whole, half of it, none after
    import_store(target, done)
    written = import_store(target, exported)
    assert written == {kind: len(records) - len(done[kind]) for kind, records in exported.items()}
    assert written[cut] > 0 and export_store(target) == exported


def test_a_fresh_store_is_empty_and_a_record_of_any_kind_makes_it_not(
        backend: Backend, world: World, new_storage: Callable[[], Storage]) -> None:
    transfer = backend.port(TransferStore)
    assert transfer.is_empty()
    for kind in KINDS:
        assert transfer.export_page(kind.name, None, 10) == ([], None)
    build(backend, world)
    assert not transfer.is_empty()
    for kind in KINDS:
        records, _ = transfer.export_page(kind.name, None, 1)
        if kind.name in INSIDE_A_PARENT or not records:  # (NOT_EVERYWHERE)
            continue
        other = new_storage().open_backend().port(TransferStore)
        assert other.is_empty()
        assert other.import_records(kind.name, records) == 1
        assert not other.is_empty(), kind.name


def test_a_record_with_other_columns_than_its_kinds_is_refused(
        backend: Backend, world: World, other_storage: Storage) -> None:
    build(backend, world)
    records, _ = backend.port(TransferStore).export_page("memory_entries", None, 2)
    target = other_storage.open_backend().port(TransferStore)
    extra = {**records[1], "created_ms": 0}  # a column of one store's table, not of the form
    missing = {column: value for column, value in records[1].items() if column != "length"}
    for wrong in (extra, missing):
        with pytest.raises(InvalidInput, match="memory_entries"):
            target.import_records("memory_entries", [records[0], wrong])
    assert target.is_empty()  # the call wrote nothing, not even its good record


def test_an_unknown_kind_is_refused_by_name(backend: Backend) -> None:
    transfer = backend.port(TransferStore)
    with pytest.raises(InvalidInput, match="widgets") as raised:
        transfer.export_page("widgets", None, 10)
    assert raised.value.code == "invalid_input"
    with pytest.raises(InvalidInput, match="widgets"):
        transfer.import_records("widgets", [])
