"""Every record carries a schema version; a newer one is refused, not misread; reopening is safe."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import StoreError
from vancetope_brain.models import Document
from vancetope_brain.store import Store
from vancetope_brain.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from .conftest import Backend, World


def test_every_record_reads_back_with_the_current_schema_version(
    store: Store, world: World
) -> None:
    tenant = world.tenant()
    user = world.user(tenant)
    session = world.session(tenant, user)
    process = world.process(tenant, session.id)
    world.append(tenant, process.id)
    world.token(tenant, "9" * 64)
    epoch = store.acquire_epoch(tenant, process.id).epoch
    commit = world.turn(process, epoch, chat=[world.line(process, "hi")])
    assert None is not store.commit_turn(tenant, process.id, epoch, commit)
    records: list[Document] = [
        store.get_user(tenant, user),
        store.get_session(tenant, session.id),
        store.get_process(tenant, process.id),
        *store.pending_messages(tenant, process.id),
        *store.chat_history(tenant, process.id),
        *store.turn_records(tenant, process.id),
    ]
    token = store.token_by_hash("9" * 64)
    assert token is not None
    records.append(token)
    assert len(records) == 7
    assert all(r.schema_version == type(r).SCHEMA_VERSION == 1 for r in records)


def test_a_record_from_a_newer_schema_is_refused(
    store: Store, world: World, backend: Backend
) -> None:
    process = world.process("ten_1")
    backend.set_raw("process", process.id, "schemaVersion", 99)
    with pytest.raises(StoreError, match="schemaVersion 99"):
        store.get_process("ten_1", process.id)


def test_reopening_keeps_data_and_creating_the_schema_is_idempotent(
    store: Store, world: World, backend: Backend
) -> None:
    process = world.process("ten_1")
    message = world.append("ten_1", process.id, key="k")
    again = backend.open_store()
    assert again.get_process("ten_1", process.id).next_seq == 1
    assert again.append_message(world.message("ten_1", process.id, key="k")) == (message, False)
    assert world.append("ten_1", process.id).seq == 2
    again.ping()


def test_sqlite_refuses_a_file_with_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "vancetope.db"
    SqliteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE schema_version SET version = 99")
    conn.close()
    with pytest.raises(StoreError, match="schema version 99"):
        SqliteStore(path)
